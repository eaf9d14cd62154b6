/* daemon/xfer/send_sm.c — the source state machine (see send_sm.h). */
#include "daemon/xfer/send_sm.h"

#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"

void send_sm_init(struct send_sm *s, uint64_t id, uint64_t born_ms)
{
	memset(s, 0, sizeof(*s));
	s->id = id;
	s->born_ms = born_ms;
}

void send_sm_fini(struct send_sm *s)
{
	free(s->chunks);
	s->chunks = NULL;
	s->nchunks = 0;
}

/* Chunks of cs bytes (the slot size of the staging they will use). */
static struct xs_chunk *chunks_make(uint64_t size, uint64_t cs, uint32_t *ret_n)
{
	uint64_t n64 = (size + cs - 1) / cs;
	struct xs_chunk *ch;

	if (cs == 0 || n64 == 0 || n64 > UINT32_MAX)
		return NULL;
	ch = calloc((size_t)n64, sizeof(*ch));
	if (!ch)
		return NULL;
	for (uint32_t i = 0; i < (uint32_t)n64; i++) {
		ch[i].slot = -1;
		ch[i].off = (uint64_t)i * cs;
		ch[i].len = size - ch[i].off < cs ? size - ch[i].off : cs;
	}
	*ret_n = (uint32_t)n64;
	return ch;
}

int send_sm_on_send(struct send_sm *s, uint64_t size, uint64_t slot_size, bool in_place_ok, bool ipc_ok,
		    bool *ret_in_use)
{
	struct xs_chunk *ch;
	uint32_t n;

	*ret_in_use = s->have_send;
	if (s->have_send || (s->size && s->size != size))
		return PPRPC_EINVAL;
	ch = chunks_make(size, slot_size, &n);
	if (!ch)
		return PPRPC_ENOMEM;
	free(s->chunks);
	s->chunks = ch;
	s->nchunks = n;
	s->size = size;
	s->have_send = true;
	s->in_place_ok = in_place_ok;
	s->ipc_ok = ipc_ok;
	return 0;
}

enum xs_pull_check send_sm_check_pull(const struct send_sm *s, uint64_t size)
{
	if (size == 0)
		return XS_PULL_EMPTY;
	if (!s)
		return XS_PULL_OK;
	if (s->pulling)
		return XS_PULL_BUSY;
	if (s->size != size)
		return XS_PULL_SIZE;
	return XS_PULL_OK;
}

void send_sm_on_pull(struct send_sm *s, uint64_t size, bool ipc_req, uint64_t land_max)
{
	if (!s->have_send)
		s->size = size;
	s->pulling = true;
	s->ipc_req = ipc_req;
	s->land_max = land_max;
}

void send_sm_fail(struct send_sm *s, int status)
{
	s->failed = true;
	if (status && !s->status)
		s->status = status;
}

/* ---- worker ------------------------------------------------------------------ */

/* Waiting for the PULL of a rank known to pull by IPC (the grace). */
static bool in_grace(const struct send_sm *s, const struct xs_env *e)
{
	return s->mode == XS_UNDECIDED && s->grace_until_us && !s->pulling && !s->failed &&
	       e->now_us < s->grace_until_us;
}

bool send_sm_ready(struct send_sm *s, const struct xs_env *e)
{
	if (e->stop)
		return true;
	/* The queue reached it: from now on a missing puller counts.  (With
	 * commands behind it the SEND captures, or ends on its own.) */
	if (!e->behind && !s->exec_ms)
		s->exec_ms = e->now_us / 1000 ? e->now_us / 1000 : 1;
	if (s->failed)
		return true;
	if (s->next == s->nchunks)
		return s->inplace_open == 0;
	if (s->mode == XS_UNDECIDED)
		return e->behind ? !in_grace(s, e) : s->pulling || !(s->in_place_ok || s->ipc_ok);
	if (s->mode == XS_IN_PLACE)
		return e->behind || s->inplace_open < XS_INPLACE_WINDOW;
	if (s->mode == XS_LAND)
		return true;
	/* Capturing: when a slot is free (a full ring waits for the link). */
	return s->mode == XS_IPC ? e->room_pool : e->room_host;
}

/* Chunks sized for the IPC pool's slots instead of the host ring's.  Only
 * before the first is published: nothing on the loop reads them until. */
static int relayout(struct send_sm *s, uint64_t cs)
{
	uint32_t n;
	struct xs_chunk *ch;

	if (s->npublished)
		return PPRPC_EINTERNAL;
	ch = chunks_make(s->size, cs, &n);
	if (!ch)
		return PPRPC_ENOMEM;
	free(s->chunks);
	s->chunks = ch;
	s->nchunks = n;
	return 0;
}

/* The mode, decided once: returns false with *a set when the step must
 * stop here (wait, make the pool). */
static bool decide(struct send_sm *s, const struct xs_env *e, struct xs_act *a)
{
	bool want_ipc = s->pulling && s->ipc_req && s->ipc_ok;

	if (s->pulling && s->size <= s->land_max && relayout(s, s->size) == 0) {
		s->mode = XS_LAND;
		return true;
	}
	if (!s->pulling && e->behind && s->ipc_ok && e->peer_ipc) {
		if (!s->grace_until_us)
			s->grace_until_us = e->now_us + XS_IPC_GRACE_US;
		if (e->now_us < s->grace_until_us) {
			a->kind = XS_ACT_WAIT_UNTIL;
			a->deadline_us = s->grace_until_us;
			return false;
		}
	}
	if (want_ipc && e->pool == 0) {
		a->kind = XS_ACT_MAKE_POOL;
		return false;
	}
	if (want_ipc && e->pool > 0 && relayout(s, e->pool_slot) == 0) {
		s->mode = XS_IPC;
		a->chose_ipc = true;
	} else if (s->pulling && s->in_place_ok && !e->behind) {
		s->mode = XS_IN_PLACE;
	} else if (!s->pulling && (s->in_place_ok || s->ipc_ok) && !e->behind) {
		a->kind = XS_ACT_WAIT;
		return false;
	} else {
		s->mode = XS_CAPTURE;
	}
	return true;
}

void send_sm_step(struct send_sm *s, const struct xs_env *e, struct xs_act *a)
{
	memset(a, 0, sizeof(*a));
	if (e->stop) {
		a->kind = XS_ACT_FAIL;
		a->status = PPRPC_ECANCELED;
		a->why = XS_WHY_CANCELLED;
		return;
	}
	if (s->failed) {
		a->kind = XS_ACT_FAIL;
		a->status = s->status ? s->status : PPRPC_ECANCELED;
		a->why = XS_WHY_FAILED;
		return;
	}
	if (s->next == s->nchunks) {
		a->kind = s->inplace_open ? XS_ACT_WAIT : XS_ACT_DONE;
		return;
	}
	if (s->mode == XS_UNDECIDED && !decide(s, e, a))
		return;
	/* A later command may overwrite the tensor: the rest is captured. */
	if (s->mode == XS_IN_PLACE && e->behind)
		s->mode = XS_CAPTURE;
	a->chunk = s->next;
	if (s->mode == XS_LAND) {
		a->kind = XS_ACT_LAND;
		return;
	}
	if (s->mode == XS_IN_PLACE) {
		a->kind = s->inplace_open >= XS_INPLACE_WINDOW ? XS_ACT_WAIT : XS_ACT_IN_PLACE;
		return;
	}
	a->pool = s->mode == XS_IPC;
	a->kind = (a->pool ? e->room_pool : e->room_host) ? XS_ACT_CAPTURE : XS_ACT_WAIT;
}

void send_sm_published(struct send_sm *s, uint32_t i, enum xs_where where, int32_t slot)
{
	struct xs_chunk *ch = &s->chunks[i];

	ch->slot = slot;
	ch->where = (uint8_t)where;
	ch->state = XS_PUBLISHED;
	s->npublished++;
	s->next = i + 1;
	if (where == XS_INPLACE)
		s->inplace_open++;
	if (where == XS_POOL)
		s->ipc = true;
}

/* ---- loop: the link ------------------------------------------------------------ */

bool send_sm_next_wire_due(const struct send_sm *s)
{
	return s->pulling && !s->failed && s->have_send && s->nsent < s->npublished;
}

int send_sm_next_wire(struct send_sm *s, bool *ret_more)
{
	struct xs_chunk *ch;
	uint32_t i;

	if (!send_sm_next_wire_due(s))
		return -1;
	i = s->nsent++;
	ch = &s->chunks[i];
	ch->state = XS_ON_WIRE;
	s->writes_inflight++;
	if (ch->where == XS_INPLACE)
		s->inplace_wire++;
	*ret_more = ch->where == XS_POOL || s->nsent < s->nchunks;
	return (int)i;
}

void send_sm_on_written(struct send_sm *s, uint32_t i, int status, struct xs_written *out)
{
	struct xs_chunk *ch = &s->chunks[i];

	out->put_slot = -1;
	out->inplace_freed = false;
	if (ch->where == XS_STAGED) {
		out->put_slot = ch->slot;
		ch->slot = -1;
	} else if (ch->where == XS_INPLACE) {
		s->inplace_wire--;
		s->inplace_open--;
		out->inplace_freed = true;
	}
	/* An IPC slot stays until the destination released it. */
	ch->state = XS_WRITTEN;
	s->writes_inflight--;
	if (status == 0)
		s->nwritten++;
	else
		send_sm_fail(s, 0);
}

bool send_sm_releasable(const struct send_sm *s)
{
	return s->ipc && !s->ipc_released;
}

static void put_pool_slots(struct send_sm *s, uint64_t upto, xs_put_fn put, void *arg)
{
	for (uint32_t i = 0; i < s->nchunks; i++) {
		struct xs_chunk *ch = &s->chunks[i];

		if (ch->where != XS_POOL || ch->slot < 0)
			continue;
		if (upto != UINT64_MAX && (ch->state != XS_WRITTEN || ch->off + ch->len > upto))
			continue;
		put(arg, XS_POOL, ch->slot);
		ch->slot = -1;
	}
}

enum xs_release send_sm_on_release(struct send_sm *s, uint64_t done, bool error, xs_put_fn put, void *arg)
{
	if (!error && done < s->size) {
		/* Progress: the slots of the copied prefix take the rest. */
		put_pool_slots(s, done, put, arg);
		return XS_REL_PROGRESS;
	}
	/* The destination copied every byte, so it got every announcement;
	 * the write callback of the last one may still be due (libuv runs it
	 * an iteration later): nwritten catches up, and the transfer is freed
	 * once it has. */
	if (error || s->nsent != s->nchunks)
		return XS_REL_FAILED;
	put_pool_slots(s, UINT64_MAX, put, arg);
	s->ipc_released = true;
	return XS_REL_DONE;
}

uint32_t send_sm_forget_announced(struct send_sm *s)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->nchunks; i++) {
		struct xs_chunk *ch = &s->chunks[i];

		if (ch->where == XS_POOL && ch->slot >= 0 && ch->state >= XS_ON_WIRE) {
			ch->slot = -1;
			n++;
		}
	}
	return n;
}

bool send_sm_waits_on_puller(const struct send_sm *s)
{
	if (!s->pulling || s->failed || send_sm_finished(s))
		return false;
	return s->writes_inflight || (s->ipc && s->nsent && !s->ipc_released);
}

bool send_sm_finished(const struct send_sm *s)
{
	return s->nchunks && s->nwritten == s->nchunks && (!s->ipc || s->ipc_released);
}

bool send_sm_can_free(const struct send_sm *s)
{
	if (!s->exec_done && s->have_send)
		return false;
	return !s->writes_inflight && (send_sm_finished(s) || s->failed);
}

void send_sm_put_all(struct send_sm *s, xs_put_fn put, void *arg)
{
	put_pool_slots(s, UINT64_MAX, put, arg);
	for (uint32_t i = 0; i < s->nchunks; i++) {
		struct xs_chunk *ch = &s->chunks[i];

		if (ch->where == XS_STAGED && ch->state == XS_PUBLISHED && ch->slot >= 0) {
			put(arg, XS_STAGED, ch->slot);
			ch->slot = -1;
		}
	}
}

enum xs_expiry send_sm_expired(const struct send_sm *s, uint64_t now_ms, uint64_t limit_ms, bool asked)
{
	if (!limit_ms || s->failed || now_ms - s->born_ms < limit_ms)
		return XS_KEEP;
	if (!s->have_send && (s->pulling || asked))
		return XS_NO_SEND;
	if (s->have_send && !s->pulling &&
	    (s->exec_done || (s->exec_ms && now_ms - s->exec_ms >= limit_ms)))
		return XS_NOT_PULLED;
	return XS_KEEP;
}
