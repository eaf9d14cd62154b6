/*
 * daemon/peer/mirror.c — remote timeline mirrors (struct rtl, peer.h): the
 * local stand-in of a timeline of another rank that WAITs here are held on.
 *
 * The table holds the live mirrors, one per (rank, handle), by hash: a
 * WAIT finds its mirror in constant time however many are waited on.  A
 * mirror leaves the table as soon as nothing but the table holds it (no
 * WAIT, no subscription in flight), when it fails (a later WAIT gets a
 * fresh one, and, if needed, a new link), and at shutdown — never later:
 * a WAIT refused at once (bad rank, no link) leaves nothing behind.
 * Loop thread only; the cells themselves are read by device workers under
 * the timeline lock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/peer/peer.h"
#include "daemon/pprpcd.h"
#include "pprpc/types.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

struct rtl_map {
	struct rtl **bucket;
	size_t nbuckets;      /* a power of two */
	size_t count;
};

static size_t slot(const struct rtl_map *t, const char *rank, uint64_t handle)
{
	uint64_t h = 1469598103934665603ull;  /* FNV-1a over the rank, then mixed with the handle */

	for (const unsigned char *s = (const unsigned char *)rank; *s; s++)
		h = (h ^ *s) * 1099511628211ull;
	h ^= handle + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (size_t)h & (t->nbuckets - 1);
}

static struct rtl_map *map(struct pprpcd *d)
{
	struct rtl_map *t = d->mirrors;

	if (!t && (t = calloc(1, sizeof(*t)))) {
		t->nbuckets = 64;
		t->bucket = calloc(t->nbuckets, sizeof(*t->bucket));
		if (!t->bucket) {
			free(t);
			return NULL;
		}
		d->mirrors = t;
	}
	return t;
}

/* Twice the buckets once they hold two mirrors each on average; a failed
 * growth only costs longer chains. */
static void grow(struct rtl_map *t)
{
	size_t n = t->nbuckets * 2;
	struct rtl **b = calloc(n, sizeof(*b));
	struct rtl_map nt = { b, n, t->count };

	if (!b)
		return;
	for (size_t i = 0; i < t->nbuckets; i++)
		while (t->bucket[i]) {
			struct rtl *m = t->bucket[i];
			size_t k = slot(&nt, m->rank, m->handle);

			t->bucket[i] = m->hnext;
			m->hnext = b[k];
			b[k] = m;
		}
	free(t->bucket);
	*t = nt;
}

static struct rtl *find(struct rtl_map *t, const char *rank, uint64_t handle)
{
	for (struct rtl *m = t->bucket[slot(t, rank, handle)]; m; m = m->hnext)
		if (m->handle == handle && !strcmp(m->rank, rank))
			return m;
	return NULL;
}

/* Out of the table, dropping the table's reference (the caller holds
 * another, or frees). */
static void unlink_mirror(struct pprpcd *d, struct rtl *m)
{
	struct rtl_map *t = d->mirrors;

	if (!m->in_table)
		return;
	for (struct rtl **pp = &t->bucket[slot(t, m->rank, m->handle)]; *pp; pp = &(*pp)->hnext)
		if (*pp == m) {
			*pp = m->hnext;
			break;
		}
	m->hnext = NULL;
	m->in_table = 0;
	m->refs--;
	t->count--;
}

void peer_mirror_unref(struct pprpcd *d, struct rtl *m)
{
	if (--m->refs == 1 && m->in_table) {
		/* Only the table still holds it: drop it, or every timeline
		 * ever waited on would keep a mirror. */
		unlink_mirror(d, m);
	}
	if (m->refs == 0)
		free(m);
}

size_t peer_mirrors_live(const struct pprpcd *d)
{
	return d->mirrors ? d->mirrors->count : 0;
}

void peer_mirrors_close(struct pprpcd *d)
{
	struct rtl_map *t = d->mirrors;

	if (!t)
		return;
	for (size_t i = 0; i < t->nbuckets; i++)
		while (t->bucket[i]) {
			struct rtl *m = t->bucket[i];

			m->failed = 1;
			timeline_cell_set(d, &m->cell, 0, PPRPC_ECANCELED);
			m->refs++;  /* unlink_mirror drops the table's */
			unlink_mirror(d, m);
			peer_mirror_unref(d, m);
		}
}

void peer_mirrors_fini(struct pprpcd *d)
{
	struct rtl_map *t = d->mirrors;

	if (!t)
		return;
	free(t->bucket);
	free(t);
	d->mirrors = NULL;
}

/* ---- subscriptions ---------------------------------------------------------------- */

struct sub {
	struct pprpcd *d;
	struct rtl *m;
	uint64_t value;
	int code;
};

static int sub_meta(void *arg, int code, const char *errmsg, const struct frame_hdr *h,
		    const uint8_t *meta, size_t len, void **bulk_dst)
{
	struct sub *s = arg;
	ProtobufCMessage *m = NULL;

	(void)errmsg;
	(void)h;
	(void)bulk_dst;
	s->code = code;
	if (code < 0)
		return 0;
	if (meta_unpack(&pprpc__subscribe_reply__descriptor, meta, len, &m) < 0)
		return PPRPC_EPROTO;
	s->value = ((Pprpc__SubscribeReply *)m)->value;
	meta_free(m);
	return 0;
}

static void sub_finish(struct sub *s, int code, const char *why)
{
	if (code < 0) {
		/* Failed for good: the WAITs holding it learn why; a later WAIT
		 * makes a fresh one. */
		s->m->failed = 1;
		timeline_cell_fail(s->d, &s->m->cell, code, why);
		if (s->m->in_table) {
			s->m->refs++;
			unlink_mirror(s->d, s->m);
			peer_mirror_unref(s->d, s->m);
		}
	} else {
		timeline_cell_set(s->d, &s->m->cell, s->value, 0);
	}
	peer_mirror_unref(s->d, s->m);
	free(s);
}

static void sub_done(void *arg, const struct frame_hdr *h, int more)
{
	struct sub *s = arg;

	(void)h;
	(void)more;
	sub_finish(s, s->code, NULL);
}

static void sub_fail(void *arg, int code, const char *why)
{
	char msg[160];

	snprintf(msg, sizeof(msg), "link lost: %.140s", why);
	sub_finish(arg, code, msg);
}

static const struct preq_ops sub_ops = { .meta = sub_meta, .done = sub_done, .fail = sub_fail };

struct rtl *peer_mirror_get(struct pprpcd *d, const char *rank, uint64_t handle, uint64_t value,
			    char *err, size_t errlen)
{
	struct rtl_map *t = map(d);
	struct rtl *m;
	int fresh = 0;

	if (!t) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	m = find(t, rank, handle);
	if (!m) {
		if (strlen(rank) >= sizeof(m->rank)) {
			snprintf(err, errlen, "rank address too long");
			return NULL;
		}
		m = calloc(1, sizeof(*m));
		if (!m) {
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
		snprintf(m->rank, sizeof(m->rank), "%s", rank);
		m->handle = handle;
		m->refs = 1; /* the table's */
		m->in_table = 1;
		if (t->count >= 2 * t->nbuckets)
			grow(t);
		{
			size_t k = slot(t, rank, handle);

			m->hnext = t->bucket[k];
			t->bucket[k] = m;
		}
		t->count++;
		fresh = 1;
	}
	if (value > m->requested) {
		Pprpc__Subscribe req = PPRPC__SUBSCRIBE__INIT;
		struct sub *s = calloc(1, sizeof(*s));
		int rc = PPRPC_ENOMEM;

		if (s) {
			s->d = d;
			s->m = m;
			req.timeline = handle;
			req.value = value;
			m->refs++;
			rc = peer_request(d, rank, MSG_SUBSCRIBE, &req.base, &sub_ops, s, err, errlen);
			if (rc < 0) {
				m->refs--;
				free(s);
			}
		} else {
			snprintf(err, errlen, "out of memory");
		}
		if (rc < 0) {
			/* Refused at once (a bad rank, no link): a mirror made
			 * for this WAIT goes with it. */
			if (fresh) {
				m->refs++;
				unlink_mirror(d, m);
				peer_mirror_unref(d, m);
			}
			return NULL;
		}
		m->requested = value;
	}
	m->refs++;
	return m;
}
