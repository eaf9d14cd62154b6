/*
 * libclient/pipeline.c — the pipeline helper: a fill-drain schedule of M
 * micro-batches over S stages, issued asynchronously and ordered with
 * timelines (see the pipelines section of pprpc.h for the schedule).
 *
 * Issue order.  Step t issues, for s = 0, 1, ..., S-1, micro-batch
 * m = t - s of stage s.  Stage s > 0 first needs the boundary bytes of
 * (s-1, m): that is the only place the caller blocks, and by then stage
 * s-1 already has micro-batch m+1 queued (it was issued earlier in the same
 * step), so no queue runs dry while we wait.
 *
 * Deadlock freedom.  A WAIT queued on stage s for micro-batch m waits for
 * stage s+1's RUN of m-2, issued at step t-1, i.e. already queued.  The
 * caller only ever blocks on a GET queued before any WAIT that could
 * depend on work not yet issued.  Never queue a WAIT before the command
 * that makes it true on the same queue: stages sharing a daemon share its
 * in-order queue, which is fine for the same reason.
 *
 * Boundaries.  On the p2p path (the default) stage s queues, per micro-
 * batch, RECV (from stage s-1's daemon) RUN SIGNAL SEND (to stage s+1's
 * daemon): the bytes go daemon to daemon and the caller never blocks until
 * it collects the last stage's outputs.  SEND snapshots its tensor at its
 * queue position and RECV writes at its own, so the two slots plus the
 * WAIT bounding the skew are all the ordering needed.  On the client path
 * the caller relays each boundary with GET then SET.
 *
 * Boundary GETs use a pending request owned here (not the library's
 * fire-and-forget async GET) so the caller can wait for exactly that reply
 * and learn its own error.  Every such GET gets a reply (bytes or error),
 * and a broken connection completes every pending request, so waiting for
 * all of them always ends once the queues are unblocked.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "libclient/client.h"
#include "libclient/pipeline_hooks.h"
#include "proto/msgtype.h"
#include "util/clock.h"

struct pstage {
	pprpc_stage st;
	char *rank;              /* owned copy, may be NULL */
	pprpc_timeline done;     /* done_s: m+1 (plus the run's base) after RUN of m */
	int wait_local;          /* the next stage is on this stage's connection */
};

struct pprpc_pipeline {
	int n;
	struct pstage *s;
	pprpc_pipeline_opts opts;
	uint64_t base;           /* timeline values of the next run start above this */
	int unsafe;              /* pipeline_hook_skip_war_wait */
	int timelines_ok;
	int p2p;                 /* boundaries go daemon to daemon */
	char transfer_reason[300];
	uint64_t client_bytes;   /* boundary bytes relayed through this process */
	uint64_t xfer_base;      /* transfer id of (stage 0, micro 0) in the next run */
	uint8_t *relay[2];       /* per slot: S-1 boundary buffers back to back */
	uint64_t *relay_off;     /* offset of stage s's output in a relay slot */
	char err[768];
};

/* One run's bookkeeping. */
struct run {
	pprpc_pipeline *p;
	int M;
	pprpc_micro_plan *plan;  /* [s * M + m] */
	struct pending *get;     /* [s * M + m] */
	uint8_t *issued;         /* [s * M + m]: GET sent */
	uint8_t *collected;
	uint64_t *issue_ns;
	void *const *outputs;
	int failed;              /* first failure recorded */
	int fail_stage;
	int rc;
};

static void choose_transfer(pprpc_pipeline *p);

static const char *rank_name(const struct pstage *ps)
{
	return ps->rank ? ps->rank : "?";
}

static int slot_of(const pprpc_pipeline *p, int m)
{
	return p->unsafe ? 0 : m % 2;
}

/* Record the first failure of a run; later ones only add nothing. */
static int fail(struct run *r, int s, int m, const char *call, int code, const char *msg)
{
	pprpc_pipeline *p = r->p;

	if (r->failed)
		return code;
	r->failed = 1;
	r->fail_stage = s;
	r->rc = code;
	if (m >= 0)
		snprintf(p->err, sizeof(p->err), "stage %d (%s): %s of micro-batch %d failed: %s: %s", s,
			 rank_name(&p->s[s]), call, m, pprpc_strerror(code), msg && *msg ? msg : "-");
	else
		snprintf(p->err, sizeof(p->err), "stage %d (%s): %s failed: %s: %s", s, rank_name(&p->s[s]),
			 call, pprpc_strerror(code), msg && *msg ? msg : "-");
	return code;
}

/* Unlink p from c's pending list if it is still there (a send that failed
 * before the engine took it over). */
static void forget(pprpc_client *c, struct pending *p)
{
	struct pending **pp = &c->pend_head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			if (c->pend_tail == p)
				c->pend_tail = prev;
			p->next = NULL;
			return;
		}
}

static int timelines_create(pprpc_pipeline *p)
{
	for (int s = 0; s < p->n; s++) {
		int rc = pprpc_timeline_create(p->s[s].st.client, p->s[s].st.device, 0, &p->s[s].done);

		if (rc < 0) {
			snprintf(p->err, sizeof(p->err), "stage %d (%s): TIMELINE_CREATE failed: %s: %s", s,
				 rank_name(&p->s[s]), pprpc_strerror(rc), pprpc_last_error(p->s[s].st.client));
			for (int i = 0; i < s; i++) {
				pprpc_timeline_destroy(p->s[i].st.client, p->s[i].done);
				p->s[i].done.id = 0;
			}
			p->timelines_ok = 0;
			return rc;
		}
	}
	p->base = 0;
	p->timelines_ok = 1;
	return 0;
}

static void timelines_destroy(pprpc_pipeline *p)
{
	for (int s = 0; s < p->n; s++)
		if (p->s[s].done.id) {
			pprpc_timeline_destroy(p->s[s].st.client, p->s[s].done);
			p->s[s].done.id = 0;
		}
	p->timelines_ok = 0;
}

PPRPC_API int pprpc_pipeline_create(const pprpc_stage *stages, int nstages,
				    const pprpc_pipeline_opts *opts, pprpc_pipeline **out)
{
	pprpc_pipeline *p;
	uint64_t relay_bytes = 0;
	int rc = PPRPC_ENOMEM;

	if (!stages || nstages < 1 || !out)
		return PPRPC_EINVAL;
	for (int s = 0; s < nstages; s++) {
		const pprpc_stage *st = &stages[s];

		if (!st->client || !st->in_bytes || !st->out_bytes)
			return PPRPC_EINVAL;
		if (s + 1 < nstages) {
			const pprpc_stage *nx = &stages[s + 1];

			if (nx->in_bytes != st->out_bytes)
				return st->client ? client_fail(st->client, PPRPC_EINVAL,
								"pipeline: stage %d out_bytes %llu != stage %d in_bytes %llu",
								s, (unsigned long long)st->out_bytes, s + 1,
								(unsigned long long)nx->in_bytes)
						  : PPRPC_EINVAL;
			/* A cross-rank WAIT names the next stage's daemon. */
			if (nx->client != st->client && (!nx->rank || !*nx->rank))
				return client_fail(st->client, PPRPC_EINVAL,
						   "pipeline: stage %d needs a rank address", s + 1);
			if (relay_bytes > UINT64_MAX / 2 - st->out_bytes)
				return PPRPC_EINVAL;
			relay_bytes += st->out_bytes;
		}
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return PPRPC_ENOMEM;
	p->n = nstages;
	if (opts)
		p->opts = *opts;
	p->s = calloc((size_t)nstages, sizeof(*p->s));
	p->relay_off = calloc((size_t)nstages, sizeof(*p->relay_off));
	if (!p->s || !p->relay_off || (size_t)relay_bytes != relay_bytes)
		goto fail;
	if (relay_bytes) {
		p->relay[0] = malloc((size_t)relay_bytes);
		p->relay[1] = malloc((size_t)relay_bytes);
		if (!p->relay[0] || !p->relay[1])
			goto fail;
	}
	for (int s = 0; s < nstages; s++) {
		struct pstage *ps = &p->s[s];

		ps->st = stages[s];
		if (stages[s].rank) {
			ps->rank = strdup(stages[s].rank);
			if (!ps->rank)
				goto fail;
			ps->st.rank = ps->rank;
		}
	}
	/* Each stage's output has its own place inside a relay slot. */
	for (int s = 0; s + 1 < nstages; s++)
		p->relay_off[s + 1] = p->relay_off[s] + stages[s].out_bytes;
	for (int s = 0; s + 1 < nstages; s++) {
		const struct pstage *a = &p->s[s], *b = &p->s[s + 1];

		/* A timeline is waited on locally only by its own connection:
		 * another client of the same daemon names the rank, and the
		 * daemon subscribes over a link to itself. */
		p->s[s].wait_local = a->st.client == b->st.client;
	}
	rc = timelines_create(p);
	if (rc < 0)
		goto fail;
	choose_transfer(p);
	/* A random prefix keeps ids of different pipelines (and clients) apart
	 * on a shared source daemon. */
	p->xfer_base = ((util_now_ns() ^ (uint64_t)(uintptr_t)p) & 0xffffffull) << 36;
	p->err[0] = '\0';
	*out = p;
	return 0;
fail:
	pprpc_pipeline_free(p);
	return rc;
}

PPRPC_API void pprpc_pipeline_free(pprpc_pipeline *p)
{
	if (!p)
		return;
	if (p->s) {
		timelines_destroy(p);
		for (int s = 0; s < p->n; s++)
			free(p->s[s].rank);
	}
	free(p->s);
	free(p->relay_off);
	free(p->relay[0]);
	free(p->relay[1]);
	free(p);
}

PPRPC_API const char *pprpc_pipeline_transfer(const pprpc_pipeline *p, const char **ret_reason)
{
	if (ret_reason)
		*ret_reason = p->transfer_reason;
	return p->p2p ? "p2p" : "client";
}

PPRPC_API uint64_t pprpc_pipeline_client_bytes(const pprpc_pipeline *p)
{
	return p->client_bytes;
}

/* P2P needs every stage's daemon to reach the previous stage's (it pulls
 * from it).  Otherwise the exact fallback through this process, and why. */
static void choose_transfer(pprpc_pipeline *p)
{
	const char *env = getenv("PPRPC_P2P");

	p->p2p = 0;
	if (p->opts.transfer == PPRPC_TRANSFER_CLIENT) {
		snprintf(p->transfer_reason, sizeof(p->transfer_reason), "client path requested");
		return;
	}
	if (env && !strcmp(env, "0")) {
		snprintf(p->transfer_reason, sizeof(p->transfer_reason), "PPRPC_P2P=0 in the environment");
		return;
	}
	for (int s = 1; s < p->n; s++) {
		const struct pstage *a = &p->s[s - 1], *b = &p->s[s];
		int rc;

		if (!a->rank || !b->rank) {
			snprintf(p->transfer_reason, sizeof(p->transfer_reason),
				 "stage %d or %d has no rank address", s - 1, s);
			return;
		}
		rc = pprpc_probe_rank(b->st.client, a->rank, 3000);
		if (rc < 0) {
			snprintf(p->transfer_reason, sizeof(p->transfer_reason),
				 "stage %d's daemon (%s) cannot reach stage %d's (%s): %.200s", s, b->rank, s - 1,
				 a->rank, pprpc_last_error(b->st.client));
			return;
		}
	}
	p->p2p = 1;
	p->transfer_reason[0] = '\0';
}

/* Transfer ids: unique per pipeline and run, the same on both sides. */
static uint64_t xfer_id(const struct run *r, int s, int m)
{
	return r->p->xfer_base + (uint64_t)s * (uint64_t)r->M + (uint64_t)m;
}

void pipeline_hook_skip_war_wait(pprpc_pipeline *p, int on)
{
	p->unsafe = on != 0;
}

PPRPC_API const char *pprpc_pipeline_error(const pprpc_pipeline *p)
{
	return p ? p->err : "";
}

static const pprpc_micro_plan *plan_of(const struct run *r, int s, int m)
{
	return &r->plan[(size_t)s * r->M + m];
}

/* Every (stage, micro-batch)'s graph and sizes, checked before anything is
 * issued: a wrong plan must not leave half a run queued. */
static int make_plans(struct run *r)
{
	pprpc_pipeline *p = r->p;

	for (int s = 0; s < p->n; s++)
		for (int m = 0; m < r->M; m++) {
			const pprpc_stage *st = &p->s[s].st;
			pprpc_micro_plan *pl = &r->plan[(size_t)s * r->M + m];
			int k = slot_of(p, m), rc;

			pl->graph = st->graph[k];
			pl->in_bytes = st->in_bytes;
			pl->out_bytes = st->out_bytes;
			if (p->opts.plan && (rc = p->opts.plan(p->opts.plan_arg, s, m, k, pl)) < 0) {
				snprintf(p->err, sizeof(p->err), "stage %d: the plan of micro-batch %d refused: %s", s,
					 m, pprpc_strerror(rc));
				return rc;
			}
			if (!pl->in_bytes || pl->in_bytes > st->in_bytes || !pl->out_bytes ||
			    pl->out_bytes > st->out_bytes) {
				snprintf(p->err, sizeof(p->err), "stage %d, micro-batch %d: planned sizes in %llu / "
					 "out %llu outside 1 .. %llu / %llu", s, m, (unsigned long long)pl->in_bytes,
					 (unsigned long long)pl->out_bytes, (unsigned long long)st->in_bytes,
					 (unsigned long long)st->out_bytes);
				return PPRPC_EINVAL;
			}
			if (s > 0 && plan_of(r, s - 1, m)->out_bytes != pl->in_bytes) {
				snprintf(p->err, sizeof(p->err), "micro-batch %d: stage %d's out_bytes %llu != stage "
					 "%d's in_bytes %llu", m, s - 1,
					 (unsigned long long)plan_of(r, s - 1, m)->out_bytes, s,
					 (unsigned long long)pl->in_bytes);
				return PPRPC_EINVAL;
			}
		}
	return 0;
}

/* Where stage s's output of micro-batch m goes on the caller's side. */
static void *dest_of(struct run *r, int s, int m)
{
	pprpc_pipeline *p = r->p;

	if (s == p->n - 1)
		return r->outputs[m];
	return p->relay[slot_of(p, m)] + p->relay_off[s];
}

/* Queue the GET of stage s's output of micro-batch m from slot k. */
static int issue_get(struct run *r, int s, int m)
{
	pprpc_pipeline *p = r->p;
	struct pstage *ps = &p->s[s];
	pprpc_client *c = ps->st.client;
	struct pending *g = &r->get[(size_t)s * r->M + m];
	Pprpc__TensorGet req = PPRPC__TENSOR_GET__INIT;
	int rc;

	memset(g, 0, sizeof(*g));
	g->bulk = dest_of(r, s, m);
	g->bulk_len = plan_of(r, s, m)->out_bytes;
	req.buffer = ps->st.out_buf[slot_of(p, m)].id;
	req.offset = 0;
	req.size = g->bulk_len;
	c->err[0] = '\0';
	rc = rpc_send(c, MSG_TENSOR_GET, FRAME_F_QUEUED, &req.base, NULL, 0, g);
	if (rc < 0) {
		if (!g->done)
			forget(c, g);
		return fail(r, s, m, "TENSOR_GET (queue)", rc, c->err);
	}
	r->issued[(size_t)s * r->M + m] = 1;
	return 0;
}

/* Queue stage s's work for micro-batch m; src holds its input bytes. */
static int issue_stage(struct run *r, int s, int m, const void *src)
{
	pprpc_pipeline *p = r->p;
	struct pstage *ps = &p->s[s];
	pprpc_client *c = ps->st.client;
	const pprpc_micro_plan *pl = plan_of(r, s, m);
	int unsafe = p->unsafe, k = slot_of(p, m), rc;

	r->issue_ns[(size_t)s * r->M + m] = util_now_ns();
	/* WAR: slot k of our output (and of the next stage's input) was last
	 * used by micro-batch m-2; run m only once the next stage consumed it. */
	if (!unsafe && s + 1 < p->n && m >= 2) {
		const struct pstage *nx = &p->s[s + 1];

		rc = pprpc_wait(c, ps->st.device, ps->wait_local ? NULL : nx->rank, nx->done,
				p->base + (uint64_t)m - 1);
		if (rc < 0)
			return fail(r, s, m, "WAIT", rc, pprpc_last_error(c));
	}
	if (p->p2p && s > 0) {
		rc = pprpc_recv_async(c, ps->st.in_buf[k], 0, pl->in_bytes, xfer_id(r, s - 1, m),
				      p->s[s - 1].rank);
		if (rc < 0)
			return fail(r, s, m, "RECV", rc, pprpc_last_error(c));
	} else {
		rc = pprpc_tensor_set_async(c, ps->st.in_buf[k], 0, src, pl->in_bytes);
		if (rc < 0)
			return fail(r, s, m, "TENSOR_SET", rc, pprpc_last_error(c));
		if (s > 0)
			p->client_bytes += pl->in_bytes;
	}
	rc = pprpc_graph_run_async(c, pl->graph);
	if (rc < 0)
		return fail(r, s, m, "GRAPH_RUN", rc, pprpc_last_error(c));
	if (unsafe && m >= 1) {
		/* Negative control: the previous micro-batch's boundary is read
		 * only after this run overwrote the single slot. */
		rc = issue_get(r, s, m - 1);
		if (rc < 0)
			return rc;
	}
	rc = pprpc_signal(c, ps->done, p->base + (uint64_t)m + 1);
	if (rc < 0)
		return fail(r, s, m, "SIGNAL", rc, pprpc_last_error(c));
	if (p->p2p && s + 1 < p->n) {
		rc = pprpc_send_async(c, ps->st.out_buf[k], 0, pl->out_bytes, xfer_id(r, s, m),
				      p->s[s + 1].rank);
		if (rc < 0)
			return fail(r, s, m, "SEND", rc, pprpc_last_error(c));
		return 0;
	}
	if (!unsafe || m == r->M - 1)
		return issue_get(r, s, m);
	return 0;
}

/* Wait for stage s's output of micro-batch m to be in hand. */
static int collect(struct run *r, int s, int m)
{
	pprpc_pipeline *p = r->p;
	size_t i = (size_t)s * r->M + m;
	struct pending *g = &r->get[i];
	pprpc_client *c = p->s[s].st.client;
	int rc;

	if (r->collected[i])
		return 0;
	if (!r->issued[i])
		return fail(r, s, m, "TENSOR_GET", PPRPC_EINTERNAL, "boundary read never issued");
	rc = g->done ? g->rc : rpc_wait(c, g);
	r->collected[i] = 1;
	if (rc < 0)
		return fail(r, s, m, "TENSOR_GET (boundary)", rc, g->done ? g->err : c->err);
	if (p->opts.observe) {
		pprpc_pipeline_event ev = {
			.stage = s,
			.micro = m,
			.slot = slot_of(p, m),
			.issue_ns = r->issue_ns[i],
			.done_ns = util_now_ns(),
			.data = g->bulk,
			.bytes = g->bulk_len,
		};

		p->opts.observe(p->opts.observe_arg, &ev);
	}
	return 0;
}

/*
 * p2p path, for an observer that asked for it: until every output of the
 * last stage is in, query each stage's done timeline every poll_us and
 * report the micro-batches it finished (no bytes: they went daemon to
 * daemon).  Querying the last stage's rank also makes progress on its
 * connection, so its outputs are collected as they come.  The loop ends
 * with the last output (or its failure): then every upstream run has ended
 * too, and one more query reports what the last poll missed.
 */
static int poll_stages(struct run *r)
{
	pprpc_pipeline *p = r->p;
	struct timespec pause = { 0, (long)p->opts.observe_poll_us * 1000 };
	int S = p->n, last_in = 0, rc = 0, final = 0;
	int *seen = calloc((size_t)S, sizeof(int));

	if (!seen)
		return fail(r, 0, -1, "poll", PPRPC_ENOMEM, "out of memory");
	while (rc == 0) {
		for (int s = 0; s < S && rc == 0; s++) {
			pprpc_client *c = p->s[s].st.client;
			uint64_t v;

			if (s < S - 1 && seen[s] == r->M)
				continue;
			if ((rc = pprpc_timeline_query(c, p->s[s].done, &v)) < 0) {
				fail(r, s, -1, "TIMELINE_QUERY", rc, pprpc_last_error(c));
				break;
			}
			for (; s < S - 1 && seen[s] < r->M && v >= p->base + (uint64_t)seen[s] + 1; seen[s]++) {
				size_t i = (size_t)s * r->M + seen[s];
				pprpc_pipeline_event ev = {
					.stage = s,
					.micro = seen[s],
					.slot = slot_of(p, seen[s]),
					.issue_ns = r->issue_ns[i],
					.done_ns = util_now_ns(),
					.data = NULL,
					.bytes = plan_of(r, s, seen[s])->out_bytes,
				};

				p->opts.observe(p->opts.observe_arg, &ev);
			}
		}
		for (; rc == 0 && last_in < r->M && r->get[(size_t)(S - 1) * r->M + last_in].done; last_in++)
			rc = collect(r, S - 1, last_in);
		if (rc < 0 || final)
			break;
		if (last_in == r->M)
			final = 1;
		else
			nanosleep(&pause, NULL);
	}
	free(seen);
	return rc;
}

/* Two stages on one (client, device) share a queue: synchronize it once. */
static int first_with_queue(const pprpc_pipeline *p, int s)
{
	for (int i = 0; i < s; i++)
		if (p->s[i].st.client == p->s[s].st.client && p->s[i].st.device == p->s[s].st.device)
			return 0;
	return 1;
}

/*
 * After a failure: release every queued WAIT (destroying a timeline fails
 * the waits on it, local and remote), let every GET we sent be answered,
 * and FENCE every queue, which reports and clears its sticky error.  The
 * failing stage's FENCE names the command that failed first there: when we
 * only saw a consequence (a skipped GET), that becomes the reported error.
 */
static void abort_run(struct run *r)
{
	pprpc_pipeline *p = r->p;
	char first[sizeof(p->err)];

	timelines_destroy(p);
	for (int s = 0; s < p->n; s++)
		for (int m = 0; m < r->M; m++) {
			size_t i = (size_t)s * r->M + m;

			if (r->issued[i] && !r->get[i].done)
				rpc_wait(p->s[s].st.client, &r->get[i]);
		}
	snprintf(first, sizeof(first), "%s", p->err);
	for (int s = 0; s < p->n; s++) {
		pprpc_client *c = p->s[s].st.client;
		int rc;

		if (!first_with_queue(p, s))
			continue;
		rc = pprpc_synchronize(c, p->s[s].st.device);
		if (rc < 0 && s == r->fail_stage && r->rc == PPRPC_EQUEUE) {
			r->rc = rc;
			snprintf(p->err, sizeof(p->err), "stage %d (%s): %s: %s (seen as: %.300s)", s,
				 rank_name(&p->s[s]), pprpc_strerror(rc), pprpc_last_error(c), first);
		}
	}
	if (timelines_create(p) < 0) {
		/* p->err now says why the pipeline cannot run again; keep the
		 * run's own failure first. */
		char again[sizeof(p->err)];

		snprintf(again, sizeof(again), "%s", p->err);
		snprintf(p->err, sizeof(p->err), "%.400s; then: %.300s", first, again);
	}
}

PPRPC_API int pprpc_pipeline_run(pprpc_pipeline *p, int nmicro, const void *const *inputs,
				 void *const *outputs)
{
	struct run r;
	int S, rc = 0;

	if (!p)
		return PPRPC_EINVAL;
	p->err[0] = '\0';
	if (nmicro < 0 || (nmicro > 0 && (!inputs || !outputs))) {
		snprintf(p->err, sizeof(p->err), "pipeline_run: bad arguments");
		return PPRPC_EINVAL;
	}
	for (int m = 0; m < nmicro; m++)
		if (!inputs[m] || !outputs[m]) {
			snprintf(p->err, sizeof(p->err), "pipeline_run: micro-batch %d has no input or output", m);
			return PPRPC_EINVAL;
		}
	if (nmicro == 0)
		return 0;
	if (!p->timelines_ok) {
		rc = timelines_create(p);
		if (rc < 0)
			return rc;
	}
	S = p->n;
	memset(&r, 0, sizeof(r));
	r.p = p;
	r.M = nmicro;
	r.outputs = outputs;
	r.get = calloc((size_t)S * nmicro, sizeof(*r.get));
	r.issued = calloc((size_t)S * nmicro, 1);
	r.collected = calloc((size_t)S * nmicro, 1);
	r.issue_ns = calloc((size_t)S * nmicro, sizeof(*r.issue_ns));
	r.plan = calloc((size_t)S * nmicro, sizeof(*r.plan));
	if (!r.get || !r.issued || !r.collected || !r.issue_ns || !r.plan) {
		snprintf(p->err, sizeof(p->err), "pipeline_run: out of memory");
		rc = PPRPC_ENOMEM;
		goto out;
	}
	rc = make_plans(&r);
	if (rc < 0)
		goto out;

	for (int t = 0; t < nmicro + S - 1 && rc == 0; t++) {
		for (int s = 0; s < S && rc == 0; s++) {
			int m = t - s;
			const void *src;

			if (m < 0 || m >= nmicro)
				continue;
			if (s == 0 || p->p2p) {
				src = s == 0 ? inputs[m] : NULL;
			} else {
				/* The GET we need sits behind stage s-1's WAIT for
				 * stage s's RUN of m-2.  Make sure that one went
				 * through first: if stage s failed, its SIGNAL was
				 * skipped and we would wait forever; its GET tells us
				 * instead.  (For s < S-1 it was collected at step t-1
				 * already; for the last stage this reads an output a
				 * little earlier than needed — it is complete by now
				 * whenever our own GET can be.) */
				if (!p->unsafe && m >= 2 &&
				    (rc = collect(&r, s, m - 2)) < 0)
					break;
				rc = collect(&r, s - 1, m);
				if (rc < 0)
					break;
				src = r.get[(size_t)(s - 1) * nmicro + m].bulk;
			}
			rc = issue_stage(&r, s, m, src);
		}
	}
	if (rc == 0 && p->p2p && p->opts.observe && p->opts.observe_poll_us > 0)
		rc = poll_stages(&r);
	for (int m = 0; m < nmicro && rc == 0; m++)
		rc = collect(&r, S - 1, m);
	/* Every queue ends with a GET that succeeded, so no queued command
	 * failed; a FENCE per queue still confirms it (and catches a failure
	 * the daemon queued on a device we did not read from). */
	for (int s = 0; s < S && rc == 0; s++) {
		pprpc_client *c = p->s[s].st.client;

		if (!first_with_queue(p, s))
			continue;
		rc = pprpc_synchronize(c, p->s[s].st.device);
		if (rc < 0)
			fail(&r, s, -1, "FENCE", rc, pprpc_last_error(c));
	}
	if (rc < 0) {
		abort_run(&r);
		rc = r.rc;
	} else {
		p->base += (uint64_t)nmicro;
	}
	p->xfer_base += (uint64_t)S * (uint64_t)nmicro;
out:
	free(r.get);
	free(r.issued);
	free(r.collected);
	free(r.issue_ns);
	free(r.plan);
	return rc;
}
