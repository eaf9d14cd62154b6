/* daemon/xfer/land.c — landing pages (see land.h). */
#include "daemon/xfer/land.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/xfer/xdev.h"
#include "daemon/xfer/xfer_impl.h"
#include "pprpc/types.h"
#include "proto/auth.h"
#include "util/expect.h"
#include "util/futex.h"

#define LAND_MAGIC 0x31444e414c525050ull  /* "PPRLAND1" */

/* A slot's descriptor: the source writes size, then bell (release); then
 * when it rang (rung_us, then rung_gen = the bell's generation). */
struct land_desc {
	_Atomic uint64_t bell;
	uint64_t size;
	_Atomic uint64_t rung_gen;
	_Atomic uint64_t rung_us;
	uint64_t pad[4];
};

struct land_hdr {
	uint64_t magic;
	uint32_t nslots;
	uint32_t hdr_bytes;
	uint64_t slot_bytes;
	/* a futex word: a source adds 1 after ringing a bell (and the
	 * destination's own queue when work comes, queue_set_wake_word);
	 * sleepers: destination workers asleep on it */
	_Atomic uint32_t wake;
	_Atomic uint32_t sleepers;
	uint64_t pad[4];
	struct land_desc desc[LAND_SLOTS];
};

_Static_assert(sizeof(struct land_hdr) <= LAND_HDR_BYTES, "the header fits its page");
_Static_assert(sizeof(struct land_desc) == 64, "one cache line a slot");

enum { SLOT_FREE, SLOT_OFFERED, SLOT_DEAD };

struct land_page {
	struct land_page *next;
	char name[LAND_NAME_MAX];
	uint8_t *base;
	int refs;                      /* transfers holding it */
	bool own;                      /* made here: the destination's */
	/* destination */
	char peer[64];
	bool retired;                  /* no new offers; unmapped once refs is 0 */
	bool unlinked;
	bool answered;                 /* the source answered from it once */
	atomic_bool no_wait;           /* the source does not use it: do not wait in place */
	struct expect wait;            /* how long a RECV waited for its bytes */
	uint64_t next_gen;
	uint8_t slot[LAND_SLOTS];
	uint32_t dead;
	/* source */
	struct conn *c;                /* the link it was named on (no reference) */
	struct device *pinned_by;      /* page-locked for this device's copies */
	bool pin_tried;
	bool closed;                   /* that link closed, or a newer page replaced it */
};

static struct land_page **pages(struct xfer *xf)
{
	return &xf->land;
}

/* ---- checks ---------------------------------------------------------------------- */

bool land_name_ok(const char *name)
{
	size_t np = strlen(LAND_PREFIX), i, digits = 0;

	if (!name || strncmp(name, LAND_PREFIX, np))
		return false;
	for (i = np; name[i] >= '0' && name[i] <= '9'; i++)
		digits++;
	if (digits < 1 || digits > 10 || name[i++] != '-')
		return false;
	for (size_t k = 0; k < 32; k++, i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	return name[i] == '\0';
}

int land_hdr_check(const void *base, uint64_t len, char *why, size_t whylen)
{
	const struct land_hdr *h = base;

	if (len != LAND_PAGE_BYTES) {
		snprintf(why, whylen, "the page has %llu bytes, not %llu", (unsigned long long)len,
			 (unsigned long long)LAND_PAGE_BYTES);
		return PPRPC_EPROTO;
	}
	if (h->magic != LAND_MAGIC || h->nslots != LAND_SLOTS || h->hdr_bytes != LAND_HDR_BYTES ||
	    h->slot_bytes != LAND_SLOT_BYTES) {
		snprintf(why, whylen, "the page's header is not this version's");
		return PPRPC_EPROTO;
	}
	return 0;
}

int land_desc_check(const void *base, uint32_t slot, uint64_t gen, uint64_t size)
{
	struct land_hdr *h = (struct land_hdr *)base;
	uint64_t bell;

	if (slot >= LAND_SLOTS)
		return PPRPC_EPROTO;
	bell = atomic_load(&h->desc[slot].bell);
	if (bell != gen)
		return 0;
	return h->desc[slot].size == size ? 1 : PPRPC_EPROTO;
}

/* ---- pages ---------------------------------------------------------------------- */

static void path_of(const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", LAND_DIR, name);
}

static void page_unlink(struct land_page *pg)
{
	char path[300];

	if (!pg->own || pg->unlinked)
		return;
	path_of(pg->name, path, sizeof(path));
	unlink(path);
	pg->unlinked = true;
}

static void page_free(struct xfer *xf, struct land_page *pg)
{
	for (struct land_page **pp = pages(xf); *pp; pp = &(*pp)->next)
		if (*pp == pg) {
			*pp = pg->next;
			break;
		}
	page_unlink(pg);
	if (pg->pinned_by)
		xdev_pin_host(pg->pinned_by, pg->base, LAND_PAGE_BYTES, 0);
	if (pg->base)
		munmap(pg->base, LAND_PAGE_BYTES);
	free(pg);
}

/* Gone once nothing holds it and nothing new may come to it. */
static void page_maybe_free(struct xfer *xf, struct land_page *pg)
{
	if (pg->refs == 0 && (pg->own ? pg->retired : pg->closed))
		page_free(xf, pg);
}

static void page_retire(struct xfer *xf, struct land_page *pg)
{
	pg->retired = true;
	page_unlink(pg);
	page_maybe_free(xf, pg);
}

static struct land_page *page_make(struct xfer *xf, const char *peer)
{
	struct land_page *pg = calloc(1, sizeof(*pg));
	uint8_t rnd[16];
	char path[300];
	struct land_hdr *h;
	int fd = -1;
	void *m;

	if (!pg || auth_random(rnd, sizeof(rnd)) < 0)
		goto fail;
	snprintf(pg->name, sizeof(pg->name), LAND_PREFIX "%ld-", (long)getpid());
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(pg->name + strlen(pg->name), 3, "%02x", rnd[i]);
	path_of(pg->name, path, sizeof(path));
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	if (ftruncate(fd, (off_t)LAND_PAGE_BYTES) < 0)
		goto fail_unlink;
	m = mmap(NULL, LAND_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		goto fail_unlink;
	close(fd);
	pg->base = m;
	h = m;
	h->nslots = LAND_SLOTS;
	h->hdr_bytes = LAND_HDR_BYTES;
	h->slot_bytes = LAND_SLOT_BYTES;
	h->magic = LAND_MAGIC; /* the source learns of the page from a PULL sent after this */
	pg->own = true;
	snprintf(pg->peer, sizeof(pg->peer), "%s", peer);
	pg->next = *pages(xf);
	*pages(xf) = pg;
	LOG(xf->d, LOG_INFO_, "landing page %s for transfers from %s", path, peer);
	return pg;
fail_unlink:
	unlink(path);
fail:
	if (fd >= 0)
		close(fd);
	if (!xf->land_warned) {
		xf->land_warned = true;
		LOG(xf->d, LOG_NOTICE_, "no landing page under %s (%s): small transfers go by the link", LAND_DIR,
		    strerror(errno));
	}
	free(pg);
	return NULL;
}

void land_sweep(void)
{
	DIR *dir = opendir(LAND_DIR);
	struct dirent *e;

	if (!dir)
		return;
	while ((e = readdir(dir))) {
		char path[300];
		struct stat st;
		long pid;

		if (!land_name_ok(e->d_name))
			continue;
		pid = strtol(e->d_name + strlen(LAND_PREFIX), NULL, 10);
		path_of(e->d_name, path, sizeof(path));
		if (pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
			unlink(path);
	}
	closedir(dir);
}

/* ---- destination ----------------------------------------------------------------- */

int land_offer(struct xfer *xf, const char *peer, uint64_t size, struct land_ref *ret)
{
	struct land_page *pg = NULL;

	memset(ret, 0, sizeof(*ret));
	if (size == 0 || size > LAND_SLOT_BYTES)
		return PPRPC_EINVAL;
	for (struct land_page *p = *pages(xf); p; p = p->next)
		if (p->own && !p->retired && !strcmp(p->peer, peer)) {
			pg = p;
			break;
		}
	if (!pg && !(pg = page_make(xf, peer)))
		return PPRPC_EUNSUPP;
	for (uint32_t i = 0; i < LAND_SLOTS; i++) {
		if (pg->slot[i] != SLOT_FREE)
			continue;
		/* Never a generation the slot had: a stray late write of an
		 * older one is never taken for this one. */
		pg->next_gen++;
		pg->slot[i] = SLOT_OFFERED;
		pg->refs++;
		ret->pg = pg;
		ret->slot = i;
		ret->gen = pg->next_gen;
		return 0;
	}
	return PPRPC_EBUSY;
}

const char *land_page_name(const struct land_ref *r)
{
	return r->pg ? r->pg->name : "";
}

int land_landed(const struct land_ref *r, uint64_t size)
{
	return r->pg ? land_desc_check(r->pg->base, r->slot, r->gen, size) : 0;
}

_Atomic uint32_t *land_wake_word(const struct land_ref *r)
{
	return &((struct land_hdr *)r->pg->base)->wake;
}

uint32_t land_wake_seq(const struct land_ref *r)
{
	return atomic_load(land_wake_word(r));
}

int land_sleep(const struct land_ref *r, uint64_t size, uint32_t seq, uint64_t timeout_us)
{
	struct land_hdr *h = (struct land_hdr *)r->pg->base;
	int l;

	atomic_fetch_add(&h->sleepers, 1);
	l = land_landed(r, size);
	if (l == 0) {
		futex_wait_us(&h->wake, seq, timeout_us);
		l = land_landed(r, size);
	}
	atomic_fetch_sub(&h->sleepers, 1);
	return l;
}

uint64_t land_expected_us(const struct land_ref *r)
{
	return expect_us(&r->pg->wait);
}

void land_note_wait(const struct land_ref *r, uint64_t waited_us)
{
	expect_note(&r->pg->wait, waited_us);
}

uint64_t land_rung_us(const struct land_ref *r)
{
	struct land_desc *dsc;

	if (!r->pg || r->slot >= LAND_SLOTS)
		return 0;
	dsc = &((struct land_hdr *)r->pg->base)->desc[r->slot];
	return atomic_load(&dsc->rung_gen) == r->gen ? atomic_load(&dsc->rung_us) : 0;
}

const void *land_data(const struct land_ref *r)
{
	return r->pg->base + LAND_HDR_BYTES + (uint64_t)r->slot * LAND_SLOT_BYTES;
}

int land_pin_for(const struct land_ref *r, struct device *dev)
{
	struct land_page *pg = r->pg;

	if (!pg || !pg->own)
		return PPRPC_EINVAL;
	/* Once per page (a few hundred microseconds), for one device. */
	if (!pg->pin_tried) {
		pg->pin_tried = true;
		if (xdev_pin_host(dev, pg->base, LAND_PAGE_BYTES, 1) == 0)
			pg->pinned_by = dev;
	}
	return pg->pinned_by == dev ? 0 : PPRPC_EUNSUPP;
}

const volatile uint64_t *land_bell(const struct land_ref *r)
{
	struct land_hdr *h = (struct land_hdr *)r->pg->base;

	return (const volatile uint64_t *)&h->desc[r->slot].bell;
}

void land_ring(const struct land_ref *r, const void *bytes, uint64_t size)
{
	struct land_hdr *h = (struct land_hdr *)r->pg->base;

	if (bytes && size <= LAND_SLOT_BYTES)
		memcpy((void *)land_data(r), bytes, (size_t)size);
	else
		size = UINT64_MAX;
	h->desc[r->slot].size = size;
	atomic_store(&h->desc[r->slot].bell, r->gen);
}

void land_answered(struct xfer *xf, const struct land_ref *r)
{
	struct land_page *pg = r->pg;

	(void)xf;
	if (!pg)
		return;
	pg->answered = true;
	atomic_store(&pg->no_wait, false);
	page_unlink(pg);
}

void land_unused(struct xfer *xf, const struct land_ref *r, bool refused)
{
	struct land_page *pg = r->pg;

	if (!pg || pg->retired)
		return;
	if (refused && pg->answered) {
		/* It had the page and no longer has: the source restarted, and
		 * the name is gone.  A new page for its next transfers. */
		page_retire(xf, pg);
		return;
	}
	if (!pg->answered)
		atomic_store(&pg->no_wait, true);
}

bool land_wait_ok(const struct land_ref *r)
{
	return r->pg && !atomic_load(&r->pg->no_wait);
}

void land_settle(struct xfer *xf, struct land_ref *r, bool clean)
{
	struct land_page *pg = r->pg;

	if (!pg)
		return;
	r->pg = NULL;
	if (clean) {
		pg->slot[r->slot] = SLOT_FREE;
	} else {
		pg->slot[r->slot] = SLOT_DEAD;
		/* A page that lost half its slots is replaced. */
		if (++pg->dead >= LAND_SLOTS / 2)
			pg->retired = true;
	}
	pg->refs--;
	if (pg->retired)
		page_unlink(pg);
	page_maybe_free(xf, pg);
}

/* ---- source ------------------------------------------------------------------------- */

static struct land_page *page_open(struct xfer *xf, struct conn *c, const char *name, char *why, size_t whylen)
{
	struct land_page *pg;
	char path[300];
	struct stat st;
	void *m;
	int fd, rc;

	path_of(name, path, sizeof(path));
	fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (uint64_t)st.st_size != LAND_PAGE_BYTES) {
		snprintf(why, whylen, "%s is not a landing page of this user", path);
		close(fd);
		return NULL;
	}
	m = mmap(NULL, LAND_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED) {
		snprintf(why, whylen, "cannot map %s: %s", path, strerror(errno));
		return NULL;
	}
	if ((rc = land_hdr_check(m, LAND_PAGE_BYTES, why, whylen)) < 0) {
		munmap(m, LAND_PAGE_BYTES);
		return NULL;
	}
	pg = calloc(1, sizeof(*pg));
	if (!pg) {
		snprintf(why, whylen, "out of memory");
		munmap(m, LAND_PAGE_BYTES);
		return NULL;
	}
	snprintf(pg->name, sizeof(pg->name), "%s", name);
	pg->base = m;
	pg->c = c;
	pg->next = *pages(xf);
	*pages(xf) = pg;
	return pg;
}

int land_open(struct xfer *xf, struct conn *c, const char *name, uint32_t slot, uint64_t gen, struct device *dev,
	      struct land_ref *ret, char *why, size_t whylen)
{
	struct land_page *pg = NULL;

	memset(ret, 0, sizeof(*ret));
	if (!land_name_ok(name) || slot >= LAND_SLOTS || gen == 0) {
		snprintf(why, whylen, "not a landing slot this daemon makes");
		return PPRPC_EINVAL;
	}
	for (struct land_page *p = *pages(xf), *next; p; p = next) {
		next = p->next;
		if (p->own || p->c != c || p->closed)
			continue;
		if (!strcmp(p->name, name)) {
			pg = p;
			continue;
		}
		/* The destination replaced its page: the old one goes. */
		p->closed = true;
		page_maybe_free(xf, p);
	}
	if (!pg && !(pg = page_open(xf, c, name, why, whylen)))
		return PPRPC_EUNSUPP;
	/* Once per page (a few hundred microseconds); devices of host
	 * memory answer no. */
	if (!pg->pin_tried && dev) {
		pg->pin_tried = true;
		if (xdev_pin_host(dev, pg->base, LAND_PAGE_BYTES, 1) == 0)
			pg->pinned_by = dev;
	}
	pg->refs++;
	ret->pg = pg;
	ret->slot = slot;
	ret->gen = gen;
	return 0;
}

int land_put(const struct land_ref *r, struct device *dev, const void *src, uint64_t n)
{
	struct land_hdr *h = (struct land_hdr *)r->pg->base;
	int rc;

	if (n > LAND_SLOT_BYTES || r->slot >= LAND_SLOTS)
		return PPRPC_EINVAL;
	rc = xdev_download(dev, (void *)land_data(r), src, n);
	if (rc < 0)
		return rc;
	h->desc[r->slot].size = n;
	atomic_store(&h->desc[r->slot].bell, r->gen);
	land_put_woke(r);
	return 0;
}

void land_put_woke(const struct land_ref *r)
{
	struct land_hdr *h = (struct land_hdr *)r->pg->base;

	/* The time before its generation: a reader that sees the generation
	 * reads this ring's time (a slot is offered again only once settled). */
	atomic_store(&h->desc[r->slot].rung_us, xfer_now_us());
	atomic_store(&h->desc[r->slot].rung_gen, r->gen);
	/* After the bell (seq_cst both sides: a destination that went to sleep
	 * before it counted itself first, and one that did not sees the bell). */
	atomic_fetch_add(&h->wake, 1);
	if (atomic_load(&h->sleepers))
		futex_wake_all(&h->wake);
}

int land_put_on(const struct land_ref *r, struct device *dev, struct stream *s, const void *src, uint64_t n,
		void (*done)(void *arg, int status, const char *why), void *arg, char *why, size_t whylen)
{
	struct land_hdr *h = (struct land_hdr *)r->pg->base;

	if (n > LAND_SLOT_BYTES || r->slot >= LAND_SLOTS)
		return PPRPC_EINVAL;
	if (r->pg->pinned_by != dev) {
		snprintf(why, whylen, "the landing page is not page-locked for the device");
		return PPRPC_EUNSUPP;
	}
	/* The size before the device's bell: the destination reads it only
	 * once the bell holds its generation. */
	h->desc[r->slot].size = n;
	return xdev_land_put_submit(dev, s, (volatile uint64_t *)&h->desc[r->slot].bell, r->gen, (void *)land_data(r),
				    src, n, done, arg, why, whylen);
}

void land_unref(struct xfer *xf, struct land_ref *r)
{
	struct land_page *pg = r->pg;

	if (!pg)
		return;
	r->pg = NULL;
	pg->refs--;
	page_maybe_free(xf, pg);
}

void land_conn_closed(struct xfer *xf, struct conn *c)
{
	for (struct land_page *p = *pages(xf), *next; p; p = next) {
		next = p->next;
		if (!p->own && p->c == c) {
			p->closed = true;
			p->c = NULL;
			page_maybe_free(xf, p);
		}
	}
}

void land_unpin(struct xfer *xf)
{
	for (struct land_page *p = *pages(xf); p; p = p->next)
		if (p->pinned_by) {
			xdev_pin_host(p->pinned_by, p->base, LAND_PAGE_BYTES, 0);
			p->pinned_by = NULL;
		}
}

void land_fini(struct xfer *xf)
{
	while (*pages(xf))
		page_free(xf, *pages(xf));
}
