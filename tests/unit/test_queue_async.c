/*
 * tests/unit/test_queue_async.c — the device queue with commands that
 * complete asynchronously (QCMD_PENDING, as the CUDA backend's GRAPH_RUN,
 * WAIT and SIGNAL do), and the registry of WAITs held on a device
 * (timeline.c), without a GPU: a "device" thread completes pending commands
 * in order, and slots are plain memory.
 *
 * What must hold: host-side commands of a stream never overtake its device
 * work; other streams are not held by it; a completion that arrives before
 * exec returned is not lost; sticky errors and FENCE see failures in issue
 * order; the queue is not torn down under pending work; and every held WAIT
 * is released when its value is reached, its timeline fails, its stream is
 * cancelled or the daemon stops — each alone.  A command the loop runs
 * inline (queue_run_inline) takes the same steps, only while the device is
 * idle.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/pprpcd.h"
#include "daemon/exec/queue.h"
#include "daemon/exec/stream.h"
#include "daemon/objects/timeline.h"
#include "pprpc/types.h"
#include "util/clock.h"

/* ---- a fake device: completes handed-over commands in order, on its own thread */

#define MAXCMD 64

struct fdev {
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct tcmd *fifo[MAXCMD];
	int head, tail, stop;
	int hold;              /* do not complete while set */
	struct queue *q;
};

struct tcmd {
	struct qcmd q;
	struct fdev *dev;
	int id;
	int dev_status;        /* what the device reports */
	int early;             /* complete from inside exec */
	int *log, *nlog;       /* done order */
	int ran;               /* exec ran (worker) */
};

static void *fdev_main(void *arg)
{
	struct fdev *f = arg;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		while (!f->stop && (f->head == f->tail || f->hold))
			pthread_cond_wait(&f->cond, &f->lock);
		if (f->head == f->tail && f->stop)
			break;
		struct tcmd *c = f->fifo[f->head++ % MAXCMD];

		pthread_mutex_unlock(&f->lock);
		usleep(2000); /* the device takes a while */
		queue_complete(f->q, &c->q, c->dev_status, c->dev_status ? "device says no" : NULL);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static void fdev_hold(struct fdev *f, int hold)
{
	pthread_mutex_lock(&f->lock);
	f->hold = hold;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static int exec_async(struct qcmd *q)
{
	struct tcmd *c = (struct tcmd *)q;
	struct fdev *f = c->dev;

	c->ran = 1;
	if (c->early) {
		/* The device finished before exec could even return. */
		queue_complete(f->q, q, c->dev_status, c->dev_status ? "device says no" : NULL);
		return QCMD_PENDING;
	}
	pthread_mutex_lock(&f->lock);
	f->fifo[f->tail++ % MAXCMD] = c;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
	return QCMD_PENDING;
}

static int exec_sync(struct qcmd *q)
{
	struct tcmd *c = (struct tcmd *)q;

	c->ran = 1;
	/* A host-side command must find its stream's device work finished. */
	return queue_stream_pending(q->stream) == 0 ? 0 : PPRPC_EINTERNAL;
}

static void on_done(struct qcmd *q)
{
	struct tcmd *c = (struct tcmd *)q;

	c->log[(*c->nlog)++] = c->id;
}

struct rig {
	uv_loop_t loop;
	struct queue *q;
	struct fdev f;
	struct tcmd c[MAXCMD];
	int log[MAXCMD], nlog;
	int n;
};

static void rig_start(struct rig *r)
{
	memset(r, 0, sizeof(*r));
	assert_int_equal(uv_loop_init(&r->loop), 0);
	assert_int_equal(queue_create(&r->loop, "q-test", &r->q), 0);
	pthread_mutex_init(&r->f.lock, NULL);
	pthread_cond_init(&r->f.cond, NULL);
	r->f.q = r->q;
	assert_int_equal(pthread_create(&r->f.th, NULL, fdev_main, &r->f), 0);
}

static struct tcmd *cmd(struct rig *r, struct stream *s, int async, int status)
{
	struct tcmd *c = &r->c[r->n];

	memset(c, 0, sizeof(*c));
	c->id = r->n++;
	c->dev = &r->f;
	c->dev_status = status;
	c->log = r->log;
	c->nlog = &r->nlog;
	c->q.exec = async ? exec_async : exec_sync;
	c->q.done = on_done;
	c->q.stream = s;
	c->q.async_ok = (uint8_t)async;
	c->q.sticky = 1;
	c->q.req_id = (uint64_t)c->id + 1;
	return c;
}

static void run_until(struct rig *r, int n)
{
	for (int i = 0; i < 5000 && r->nlog < n; i++) {
		uv_run(&r->loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(r->nlog, n);
}

static void rig_stop(struct rig *r)
{
	queue_destroy(r->q);
	pthread_mutex_lock(&r->f.lock);
	r->f.stop = 1;
	pthread_cond_signal(&r->f.cond);
	pthread_mutex_unlock(&r->f.lock);
	pthread_join(r->f.th, NULL);
	uv_run(&r->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&r->loop), 0);
}

/* Device work, then a host-side command, on one stream: the host command
 * runs only after the device finished, and completions keep issue order. */
static void test_host_waits_for_device(void **state)
{
	struct rig r;
	struct stream s = { 0 };

	(void)state;
	rig_start(&r);
	queue_push(r.q, &cmd(&r, &s, 1, 0)->q);
	queue_push(r.q, &cmd(&r, &s, 1, 0)->q);
	queue_push(r.q, &cmd(&r, &s, 0, 0)->q);
	queue_push(r.q, &cmd(&r, &s, 1, 0)->q);
	run_until(&r, 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(r.log[i], i);
		assert_int_equal(r.c[i].q.status, 0);
	}
	rig_stop(&r);
}

/* A stream whose device work is held does not hold another stream's
 * host-side command. */
static void test_streams_independent(void **state)
{
	struct rig r;
	struct stream a = { 0 }, b = { 0 };

	(void)state;
	rig_start(&r);
	fdev_hold(&r.f, 1);
	queue_push(r.q, &cmd(&r, &a, 1, 0)->q);   /* 0: held on the device */
	queue_push(r.q, &cmd(&r, &a, 0, 0)->q);   /* 1: waits for 0 */
	queue_push(r.q, &cmd(&r, &b, 0, 0)->q);   /* 2: free to run */
	run_until(&r, 1);
	assert_int_equal(r.log[0], 2);
	assert_false(r.c[1].ran);
	assert_int_equal(queue_stream_pending(&a), 1);
	fdev_hold(&r.f, 0);
	run_until(&r, 3);
	assert_int_equal(r.log[1], 0);
	assert_int_equal(r.log[2], 1);
	assert_int_equal(r.c[1].q.status, 0);
	rig_stop(&r);
}

/* queue_complete before exec returned QCMD_PENDING is not lost. */
static void test_early_completion(void **state)
{
	struct rig r;
	struct stream s = { 0 };
	struct tcmd *c;

	(void)state;
	rig_start(&r);
	c = cmd(&r, &s, 1, 0);
	c->early = 1;
	queue_push(r.q, &c->q);
	queue_push(r.q, &cmd(&r, &s, 0, 0)->q);
	run_until(&r, 2);
	assert_int_equal(r.log[0], 0);
	assert_int_equal(r.log[1], 1);
	assert_int_equal(queue_stream_pending(&s), 0);
	rig_stop(&r);
}

/* A device failure: the pending commands behind it report that they ran on
 * what it left, later ones are skipped, and the FENCE names the first. */
static void test_sticky_order(void **state)
{
	struct rig r;
	struct stream s = { 0 };
	struct tcmd *fence;

	(void)state;
	rig_start(&r);
	fdev_hold(&r.f, 1);
	queue_push(r.q, &cmd(&r, &s, 1, 0)->q);               /* 0 ok */
	queue_push(r.q, &cmd(&r, &s, 1, PPRPC_EDEVICE)->q);   /* 1 fails on the device */
	queue_push(r.q, &cmd(&r, &s, 1, 0)->q);               /* 2 already queued behind it */
	fence = cmd(&r, &s, 0, 0);                            /* 3 */
	fence->q.exec = NULL;
	fence->q.fence = 1;
	fence->q.sticky = 0;
	queue_push(r.q, &fence->q);
	queue_push(r.q, &cmd(&r, &s, 1, 0)->q);               /* 4 after the FENCE: runs */
	usleep(20000);
	fdev_hold(&r.f, 0);
	run_until(&r, 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(r.log[i], i);
	assert_int_equal(r.c[0].q.status, 0);
	assert_int_equal(r.c[1].q.status, PPRPC_EDEVICE);
	assert_int_equal(r.c[2].q.status, PPRPC_EQUEUE);
	assert_non_null(strstr(r.c[2].q.err, "ran after command #2"));
	assert_int_equal(fence->q.status, PPRPC_EDEVICE);
	assert_int_equal(fence->q.fail_cmd, 2);
	assert_non_null(strstr(fence->q.err, "device says no"));
	assert_int_equal(r.c[4].q.status, 0);
	assert_true(r.c[4].ran);
	rig_stop(&r);
}

/* queue_destroy with device work pending waits for its completion. */
static void test_destroy_waits(void **state)
{
	struct rig r;
	struct stream s = { 0 };

	(void)state;
	rig_start(&r);
	for (int i = 0; i < 6; i++)
		queue_push(r.q, &cmd(&r, &s, 1, 0)->q);
	queue_destroy(r.q); /* returns only once all six completed and ran done() */
	assert_int_equal(r.nlog, 6);
	r.q = NULL;
	pthread_mutex_lock(&r.f.lock);
	r.f.stop = 1;
	pthread_cond_signal(&r.f.cond);
	pthread_mutex_unlock(&r.f.lock);
	pthread_join(r.f.th, NULL);
	uv_run(&r.loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&r.loop), 0);
}

/* ---- commands run inline on the loop (queue_run_inline) --------------------------- */

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int open, entered;
};

static struct gate g_gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };

/* Holds the worker inside exec until the gate opens. */
static int exec_gated(struct qcmd *q)
{
	struct tcmd *c = (struct tcmd *)q;

	c->ran = 1;
	pthread_mutex_lock(&g_gate.lock);
	g_gate.entered = 1;
	pthread_cond_broadcast(&g_gate.cond);
	while (!g_gate.open)
		pthread_cond_wait(&g_gate.cond, &g_gate.lock);
	pthread_mutex_unlock(&g_gate.lock);
	return 0;
}

static int not_ready(struct qcmd *q)
{
	(void)q;
	return 0;
}

static int exec_fail(struct qcmd *q)
{
	((struct tcmd *)q)->ran = 1;
	snprintf(q->err, sizeof(q->err), "kernel says no");
	return PPRPC_ERANGE;
}

/* The device idle: the command runs on the caller's thread and its done()
 * has run when the call returns (also when the device completes it inside
 * exec, as the CPU does); a failure is sticky; a failed stream's command is
 * skipped there too. */
static void test_run_inline(void **state)
{
	struct rig r;
	struct stream s = { 0 };
	struct tcmd *c;

	(void)state;
	rig_start(&r);
	c = cmd(&r, &s, 0, 0);                    /* 0: host-side, ok */
	assert_int_equal(queue_run_inline(r.q, &c->q), 1);
	assert_int_equal(r.nlog, 1);
	assert_true(c->ran);
	c = cmd(&r, &s, 1, 0);                    /* 1: device work, completed in exec */
	c->early = 1;
	assert_int_equal(queue_run_inline(r.q, &c->q), 1);
	assert_int_equal(r.nlog, 2);
	assert_int_equal(c->q.status, 0);
	assert_int_equal(queue_stream_pending(&s), 0);
	c = cmd(&r, &s, 0, 0);                    /* 2: fails */
	c->q.exec = exec_fail;
	assert_int_equal(queue_run_inline(r.q, &c->q), 1);
	assert_int_equal(r.nlog, 3);
	assert_int_equal(c->q.status, PPRPC_ERANGE);
	assert_int_equal(s.err, PPRPC_ERANGE);
	c = cmd(&r, &s, 0, 0);                    /* 3: skipped, not run */
	assert_int_equal(queue_run_inline(r.q, &c->q), 1);
	assert_int_equal(r.nlog, 4);
	assert_false(c->ran);
	assert_int_equal(c->q.status, PPRPC_EQUEUE);
	assert_non_null(strstr(c->q.err, "kernel says no"));
	for (int i = 0; i < 4; i++)
		assert_int_equal(r.log[i], i);
	assert_int_equal(queue_depth(r.q), 0);
	rig_stop(&r);
}

/* The device not idle: a command waiting in the queue, one running on the
 * worker, or one pending on the device — the caller must push. */
static void test_run_inline_refused(void **state)
{
	struct rig r;
	struct stream a = { 0 }, b = { 0 };
	struct tcmd *w, *c;

	(void)state;
	rig_start(&r);
	/* waiting: a WAIT-like command that is not ready */
	w = cmd(&r, &a, 0, 0);
	w->q.ready = not_ready;
	queue_push(r.q, &w->q);
	usleep(10000);
	c = cmd(&r, &b, 0, 0);
	assert_int_equal(queue_run_inline(r.q, &c->q), 0);
	assert_false(c->ran);
	w->q.ready = NULL;
	queue_kick(r.q);
	run_until(&r, 1);

	/* running on the worker */
	g_gate.open = g_gate.entered = 0;
	w = cmd(&r, &a, 0, 0);
	w->q.exec = exec_gated;
	queue_push(r.q, &w->q);
	pthread_mutex_lock(&g_gate.lock);
	while (!g_gate.entered)
		pthread_cond_wait(&g_gate.cond, &g_gate.lock);
	pthread_mutex_unlock(&g_gate.lock);
	c = cmd(&r, &b, 0, 0);
	assert_int_equal(queue_run_inline(r.q, &c->q), 0);
	assert_false(c->ran);
	pthread_mutex_lock(&g_gate.lock);
	g_gate.open = 1;
	pthread_cond_broadcast(&g_gate.cond);
	pthread_mutex_unlock(&g_gate.lock);
	run_until(&r, 2);

	/* pending on the device */
	fdev_hold(&r.f, 1);
	queue_push(r.q, &cmd(&r, &a, 1, 0)->q);
	while (queue_stream_pending(&a) == 0)
		usleep(1000);
	c = cmd(&r, &b, 0, 0);
	assert_int_equal(queue_run_inline(r.q, &c->q), 0);
	assert_false(c->ran);
	fdev_hold(&r.f, 0);
	run_until(&r, 3);
	/* and idle again: taken */
	assert_int_equal(queue_run_inline(r.q, &c->q), 1);
	assert_int_equal(r.nlog, 4);
	rig_stop(&r);
}

/* queue_stream_quiet: a stream is quiet when nothing of it waits in the
 * queue or runs on the worker — what is pending on the device, or another
 * stream's work, does not count. */
static void test_stream_quiet(void **state)
{
	struct rig r;
	struct stream a = { 0 }, b = { 0 };
	struct tcmd *w;

	(void)state;
	rig_start(&r);
	assert_true(queue_stream_quiet(r.q, &a));
	/* waiting (not ready): a is not quiet, b is */
	w = cmd(&r, &a, 0, 0);
	w->q.ready = not_ready;
	queue_push(r.q, &w->q);
	usleep(10000);
	assert_false(queue_stream_quiet(r.q, &a));
	assert_true(queue_stream_quiet(r.q, &b));
	w->q.ready = NULL;
	queue_kick(r.q);
	run_until(&r, 1);
	assert_true(queue_stream_quiet(r.q, &a));

	/* running on the worker */
	g_gate.open = g_gate.entered = 0;
	w = cmd(&r, &a, 0, 0);
	w->q.exec = exec_gated;
	queue_push(r.q, &w->q);
	pthread_mutex_lock(&g_gate.lock);
	while (!g_gate.entered)
		pthread_cond_wait(&g_gate.cond, &g_gate.lock);
	pthread_mutex_unlock(&g_gate.lock);
	assert_false(queue_stream_quiet(r.q, &a));
	assert_true(queue_stream_quiet(r.q, &b));
	pthread_mutex_lock(&g_gate.lock);
	g_gate.open = 1;
	pthread_cond_broadcast(&g_gate.cond);
	pthread_mutex_unlock(&g_gate.lock);
	run_until(&r, 2);

	/* pending on the device only: quiet */
	fdev_hold(&r.f, 1);
	queue_push(r.q, &cmd(&r, &a, 1, 0)->q);
	while (queue_stream_pending(&a) == 0)
		usleep(1000);
	assert_true(queue_stream_quiet(r.q, &a));
	fdev_hold(&r.f, 0);
	run_until(&r, 3);
	rig_stop(&r);
}

/* A command waiting for bytes from elsewhere (QPASS_LETS, a RECV) lets the
 * stream's next writes of other memory (QPASS_GOES, TENSOR_SETs) run first,
 * in their order; one that overlaps its region, and any other command,
 * waits behind it.  Made to fail by taking passer() out of pick(). */
static struct tcmd *pass_cmd(struct rig *r, struct stream *s, uint8_t pass, uintptr_t lo, uintptr_t hi)
{
	struct tcmd *c = cmd(r, s, 0, 0);

	c->q.pass = pass;
	c->q.rgn_lo = lo;
	c->q.rgn_hi = hi;
	return c;
}

static void test_pass_waiting(void **state)
{
	struct rig r;
	struct stream a = { 0 };
	struct tcmd *w, *s1, *s2, *ov, *s3;

	(void)state;
	rig_start(&r);
	w = pass_cmd(&r, &a, QPASS_LETS, 1000, 2000);
	w->q.ready = not_ready;
	s1 = pass_cmd(&r, &a, QPASS_GOES, 0, 1000);
	s2 = pass_cmd(&r, &a, QPASS_GOES, 2000, 3000);
	ov = pass_cmd(&r, &a, QPASS_GOES, 1999, 2001);
	s3 = pass_cmd(&r, &a, QPASS_GOES, 5000, 6000);
	queue_push(r.q, &w->q);
	queue_push(r.q, &s1->q);
	queue_push(r.q, &s2->q);
	queue_push(r.q, &ov->q);
	queue_push(r.q, &s3->q);
	run_until(&r, 2);
	assert_int_equal(r.log[0], s1->id);
	assert_int_equal(r.log[1], s2->id);
	usleep(20000);
	uv_run(&r.loop, UV_RUN_NOWAIT);
	assert_int_equal(r.nlog, 2);    /* the overlapping one, and what follows it, wait */
	assert_false(ov->ran);
	assert_false(s3->ran);
	w->q.ready = NULL;
	queue_kick(r.q);
	run_until(&r, 5);
	assert_int_equal(r.log[2], w->id);
	assert_int_equal(r.log[3], ov->id);
	assert_int_equal(r.log[4], s3->id);
	rig_stop(&r);
}

/* A RECV held on the device (qcmd.held, pending): the stream's writes of
 * other memory run while it is pending, one that overlaps its region and
 * any other host-side command wait for it — and while other device work
 * of the stream is pending (not held) nothing passes.  Made to fail by
 * taking the held rule out of runnable(). */
static int exec_held(struct qcmd *q)
{
	q->held = 1;
	return exec_async(q);
}

static int exec_passing(struct qcmd *q)
{
	((struct tcmd *)q)->ran = 1;
	return 0;
}

static void test_pass_held(void **state)
{
	struct rig r;
	struct stream a = { 0 };
	struct tcmd *h, *s1, *ov, *host, *g, *s2;

	(void)state;
	rig_start(&r);
	fdev_hold(&r.f, 1);
	h = pass_cmd(&r, &a, QPASS_LETS, 1000, 2000);
	h->q.exec = exec_held;
	h->q.async_ok = 1;
	s1 = pass_cmd(&r, &a, QPASS_GOES, 0, 1000);
	s1->q.exec = exec_passing;
	ov = pass_cmd(&r, &a, QPASS_GOES, 1500, 2500);
	ov->q.exec = exec_passing;
	host = cmd(&r, &a, 0, 0);
	queue_push(r.q, &h->q);
	queue_push(r.q, &s1->q);
	queue_push(r.q, &ov->q);
	queue_push(r.q, &host->q);
	run_until(&r, 1);
	assert_int_equal(r.log[0], s1->id);
	usleep(20000);
	uv_run(&r.loop, UV_RUN_NOWAIT);
	assert_int_equal(r.nlog, 1);
	assert_false(ov->ran);
	assert_false(host->ran);
	assert_int_equal(queue_stream_pending(&a), 1);
	assert_int_equal(a.held, 1);
	fdev_hold(&r.f, 0);
	run_until(&r, 4);
	assert_int_equal(r.log[1], h->id);
	assert_int_equal(r.log[2], ov->id);
	assert_int_equal(r.log[3], host->id);
	assert_int_equal(a.held, 0);

	/* device work that is not held ahead of the held one: nothing passes */
	fdev_hold(&r.f, 1);
	g = cmd(&r, &a, 1, 0);
	h = pass_cmd(&r, &a, QPASS_LETS, 1000, 2000);
	h->q.exec = exec_held;
	h->q.async_ok = 1;
	s2 = pass_cmd(&r, &a, QPASS_GOES, 0, 1000);
	s2->q.exec = exec_passing;
	queue_push(r.q, &g->q);
	queue_push(r.q, &h->q);
	queue_push(r.q, &s2->q);
	usleep(20000);
	uv_run(&r.loop, UV_RUN_NOWAIT);
	assert_int_equal(r.nlog, 4);
	assert_false(s2->ran);
	assert_int_equal(queue_stream_pending(&a), 2);
	fdev_hold(&r.f, 0);
	run_until(&r, 7);
	/* once only the held one is pending, the write passes it (the
	 * device takes 2 ms for each) */
	assert_int_equal(r.log[4], g->id);
	assert_int_equal(r.log[5], s2->id);
	assert_int_equal(r.log[6], h->id);
	rig_stop(&r);
}

/* ---- an idle worker spins only in its window (queue_spin_until) -------------------- */

static void test_spin_window(void **state)
{
	struct rig r;
	struct stream a = { 0 };
	uint64_t t0, t1, t2;

	(void)state;
	rig_start(&r);
	usleep(20000);
	t0 = queue_spin_turns(r.q);
	/* 60 ms of looking for work: the worker turns while it lasts (how
	 * much CPU it gets depends on the host's load: it yields to every
	 * other thread, so its turns are counted, not its CPU time) */
	queue_spin_until(r.q, util_now_ns() + 60000000ull);
	usleep(30000);
	/* work pushed meanwhile runs (the spin sees the push) */
	queue_push(r.q, &cmd(&r, &a, 0, 0)->q);
	run_until(&r, 1);
	usleep(40000);
	t1 = queue_spin_turns(r.q);
	/* past the window it sleeps again: no turn but the one a starved
	 * worker may have been in when the window closed */
	usleep(50000);
	t2 = queue_spin_turns(r.q);
	assert_true(t1 > t0);
	assert_true(t2 - t1 <= 1);
	/* a window in the past wakes no one into spinning */
	queue_spin_until(r.q, util_now_ns() - 1);
	usleep(30000);
	assert_int_equal(queue_spin_turns(r.q), t2);
	rig_stop(&r);
}

/* ---- WAITs held on a device: the release rules (timeline.c) ---------------------- */

static struct pprpcd *tl_daemon(void)
{
	struct pprpcd *d = calloc(1, sizeof(*d));

	d->opts.max_timelines = 16;
	timeline_sys_init(d);
	return d;
}

static void tl_daemon_free(struct pprpcd *d)
{
	timeline_sys_fini(d);
	free(d);
}

static void gw_init(struct tl_gpu_wait *w, const struct tl_cell *cell, uint64_t value, const struct stream *s,
		    volatile uint64_t *slot)
{
	memset(w, 0, sizeof(*w));
	w->cell = cell;
	w->value = value;
	w->s = s;
	w->slot = slot;
}

static void test_gpu_wait_release(void **state)
{
	struct pprpcd *d = tl_daemon();
	struct tl_cell a = { 0 }, b = { 0 };
	struct stream s1 = { 0 }, s2 = { 0 };
	volatile uint64_t slot[4] = { 7, 7, 7, 7 };
	struct tl_gpu_wait w[4];
	char err[256];

	(void)state;
	gw_init(&w[0], &a, 5, &s1, &slot[0]);
	gw_init(&w[1], &a, 9, &s1, &slot[1]);
	gw_init(&w[2], &b, 1, &s2, &slot[2]);
	gw_init(&w[3], &b, 2, &s1, &slot[3]);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(timeline_gpu_wait_begin(d, &w[i]), 0);
		assert_int_equal(slot[i], 0); /* held */
	}
	/* Below the value: nobody moves.  At 5: only w0. */
	timeline_cell_set(d, &a, 4, 0);
	assert_int_equal(slot[0] + slot[1] + slot[2] + slot[3], 0);
	timeline_cell_set(d, &a, 5, 0);
	assert_int_equal(slot[0], 1);
	assert_int_equal(slot[1] + slot[2] + slot[3], 0);
	assert_int_equal(timeline_gpu_wait_end(d, &w[0], err, sizeof(err)), 0);
	/* s1 is cancelled: w1 and w3 go, w2 (s2) stays. */
	atomic_store(&s1.canceled, 1);
	timeline_wake_all(d);
	assert_int_equal(slot[1], 1);
	assert_int_equal(slot[3], 1);
	assert_int_equal(slot[2], 0);
	assert_int_equal(timeline_gpu_wait_end(d, &w[1], err, sizeof(err)), PPRPC_ECANCELED);
	assert_int_equal(timeline_gpu_wait_end(d, &w[3], err, sizeof(err)), PPRPC_ECANCELED);
	/* b fails: w2 goes with the reason. */
	timeline_cell_fail(d, &b, PPRPC_ECONN, "link lost");
	assert_int_equal(slot[2], 1);
	assert_int_equal(timeline_gpu_wait_end(d, &w[2], err, sizeof(err)), PPRPC_ECONN);
	assert_non_null(strstr(err, "link lost"));
	assert_null(d->gpu_waits);
	tl_daemon_free(d);
}

static void test_gpu_wait_decided_and_stop(void **state)
{
	struct pprpcd *d = tl_daemon();
	struct tl_cell a = { .value = 10 };
	struct stream s = { 0 };
	volatile uint64_t slot[2];
	struct tl_gpu_wait w[2];
	char err[256];

	(void)state;
	/* Reached already: decided, nothing registered. */
	gw_init(&w[0], &a, 10, &s, &slot[0]);
	assert_int_equal(timeline_gpu_wait_begin(d, &w[0]), 1);
	assert_null(d->gpu_waits);
	assert_int_equal(timeline_gpu_wait_end(d, &w[0], err, sizeof(err)), 0);
	/* Held, then the daemon stops: released, cancelled; later waits are
	 * decided at once. */
	gw_init(&w[1], &a, 11, &s, &slot[1]);
	assert_int_equal(timeline_gpu_wait_begin(d, &w[1]), 0);
	atomic_store(&d->stopping_workers, 1);
	timeline_wake_all(d);
	assert_int_equal(slot[1], 1);
	assert_int_equal(timeline_gpu_wait_end(d, &w[1], err, sizeof(err)), PPRPC_ECANCELED);
	gw_init(&w[1], &a, 12, &s, &slot[1]);
	assert_int_equal(timeline_gpu_wait_begin(d, &w[1]), 1);
	/* A device that passed a wait without a release (it faulted): end()
	 * unlinks it. */
	atomic_store(&d->stopping_workers, 0);
	gw_init(&w[1], &a, 13, &s, &slot[1]);
	assert_int_equal(timeline_gpu_wait_begin(d, &w[1]), 0);
	assert_int_equal(timeline_gpu_wait_end(d, &w[1], err, sizeof(err)), PPRPC_ECANCELED);
	assert_null(d->gpu_waits);
	tl_daemon_free(d);
}

/* A SIGNAL reserved on the device: a second one must exceed it even before
 * the first is published, and publishing releases held waits. */
static void test_signal_two_step(void **state)
{
	struct pprpcd *d = tl_daemon();
	struct timeline t = { 0 };
	struct stream s = { 0 };
	volatile uint64_t slot;
	struct tl_gpu_wait w;
	char err[256];

	(void)state;
	t.sig_hi = t.cell.value = 1;
	gw_init(&w, &t.cell, 3, &s, &slot);
	assert_int_equal(timeline_gpu_wait_begin(d, &w), 0);
	assert_int_equal(timeline_signal_begin(d, &t, 3, err, sizeof(err)), 0);
	assert_int_equal(timeline_signal_begin(d, &t, 3, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "does not exceed"));
	assert_int_equal(slot, 0);
	assert_int_equal(t.cell.value, 1);
	timeline_signal_end(d, &t, 3);
	assert_int_equal(slot, 1);
	assert_int_equal(timeline_gpu_wait_end(d, &w, err, sizeof(err)), 0);
	tl_daemon_free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_waits_for_device),
		cmocka_unit_test(test_streams_independent),
		cmocka_unit_test(test_early_completion),
		cmocka_unit_test(test_sticky_order),
		cmocka_unit_test(test_destroy_waits),
		cmocka_unit_test(test_run_inline),
		cmocka_unit_test(test_run_inline_refused),
		cmocka_unit_test(test_stream_quiet),
		cmocka_unit_test(test_pass_waiting),
		cmocka_unit_test(test_pass_held),
		cmocka_unit_test(test_spin_window),
		cmocka_unit_test(test_gpu_wait_release),
		cmocka_unit_test(test_gpu_wait_decided_and_stop),
		cmocka_unit_test(test_signal_two_step),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
