/*
 * tests/unit/test_device.c — the device layer: the backend table, the
 * stubs that stand in for absent optional ops, the CPU backend's
 * interfaces, and the one execution model on the CPU (the queue submits,
 * the CPU stream completes inside the submit, on the worker).
 *
 * What must hold: specs find their backend by the longest prefix; a backend
 * missing a mandatory op (or half of a group) is refused, an absent optional
 * op answers PPRPC_EUNSUPP; the CPU stream calls done exactly once before
 * its submit returns (also when a kernel fails), never for a refused
 * submission; and through the queue, a failure found inside the submit is
 * sticky in issue order, a WAIT the CPU cannot hold waits in the queue
 * without holding other streams, and nothing is ever left pending.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/device/backend_impl.h"
#include "daemon/device/device.h"
#include "daemon/exec/queue.h"
#include "daemon/exec/stream.h"
#include "daemon/objects/graph.h"
#include "kernels/tensor.h"
#include "pprpc/types.h"

/* ---- the backend table ------------------------------------------------------------ */

static void test_registry(void **state)
{
	uv_loop_t loop;
	struct device *d = NULL;
	struct device_conf conf = { .threads = 1 };
	char err[256] = "";

	(void)state;
	assert_true(device_spec_known("cpu"));
	assert_true(device_spec_known("cuda:0"));
	assert_false(device_spec_known("gpu"));
	assert_false(device_spec_known("cud"));
	assert_false(device_spec_may_be_absent("cpu"));
	assert_true(device_spec_may_be_absent("cuda:3"));
	assert_true(device_spec_known("ggml:CPU"));
	assert_true(device_spec_may_be_absent("ggml:CUDA0"));
	assert_string_equal(device_spec_names(), "cpu, cuda:N, ggml:NAME");

	assert_int_equal(uv_loop_init(&loop), 0);
	assert_int_equal(device_open(&loop, "gpu", 0, &conf, &d, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "unknown device 'gpu' (cpu, cuda:N, ggml:NAME)"));
	/* The row matched, its open refuses what follows the prefix. */
	assert_int_equal(device_open(&loop, "cpu0", 0, &conf, &d, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "cpu0"));
	assert_null(d);
	assert_int_equal(uv_loop_close(&loop), 0);
}

/* ---- stubs ---------------------------------------------------------------------------- */

static void nop_props(void *ctx, struct device_props *ret) { (void)ctx, (void)ret; }
static int nop_mem(void *ctx, uint64_t *f, uint64_t *t) { (void)ctx, (void)f, (void)t; return 0; }
static int nop_sopen(void *ctx, void **s, char *e, size_t n) { (void)ctx, (void)s, (void)e, (void)n; return 0; }
static void nop_sclose(void *ctx, void *s) { (void)ctx, (void)s; }
static void nop_destroy(void *ctx) { (void)ctx; }
static int nop_alloc(void *ctx, uint64_t n, void **p) { (void)ctx, (void)n, (void)p; return 0; }
static void nop_free(void *ctx, void *p, uint64_t n) { (void)ctx, (void)p, (void)n; }
static int nop_fill(void *ctx, void *d, int v, uint64_t n) { (void)ctx, (void)d, (void)v, (void)n; return 0; }
static int nop_copy(void *ctx, void *d, const void *s, uint64_t n) { (void)ctx, (void)d, (void)s, (void)n; return 0; }
static int nop_gsub(void *s, struct graph *g, device_done_fn f, void *a, char *e, size_t n)
{
	(void)s, (void)g, (void)f, (void)a, (void)e, (void)n;
	return 0;
}
static int nop_wsub(void *s, volatile uint64_t *sl, device_done_fn f, void *a, char *e, size_t n)
{
	(void)s, (void)sl, (void)f, (void)a, (void)e, (void)n;
	return 0;
}
static int nop_xsub(void *s, volatile uint64_t *sl, uint64_t v, device_done_fn f, void *a, char *e, size_t n)
{
	(void)s, (void)sl, (void)v, (void)f, (void)a, (void)e, (void)n;
	return 0;
}
static int nop_ipc_wait(void *ctx, char *e, size_t n) { (void)ctx, (void)e, (void)n; return 0; }

static void nop_gbuild(void *ctx, void *job)
{
	(void)ctx, (void)job;
}

static void nop_lend_return(void *ctx, void *host)
{
	(void)ctx, (void)host;
}

static void test_fill_stubs(void **state)
{
	struct device_i dev = { .get_props = nop_props, .mem_info = nop_mem, .stream_open = nop_sopen,
				.stream_close = nop_sclose, .destroy = nop_destroy };
	struct buffer_i buf = { .alloc = nop_alloc, .free = nop_free, .fill = nop_fill, .copy = nop_copy,
				.upload = nop_copy, .download = nop_copy };
	struct stream_i str = { .graph_submit = nop_gsub, .wait_submit = nop_wsub, .write_submit = nop_xsub };
	struct backend_dev be = { .dev = &dev, .buf = &buf, .stream = &str };
	struct device_i fdev;
	struct buffer_i fbuf;
	struct stream_i fstr;
	volatile uint64_t *slot = NULL;
	uint8_t handle[DEVICE_IPC_HANDLE];
	void *p = NULL;
	char err[128] = "";

	(void)state;
	/* Everything optional absent: stubs, and the mandatory ops as given. */
	assert_int_equal(backend_fill(&be, &fdev, &fbuf, &fstr, err, sizeof(err)), 0);
	assert_ptr_equal(fdev.mem_info, nop_mem);
	assert_ptr_equal(fstr.graph_submit, nop_gsub);
	assert_int_equal(fdev.slot_alloc(NULL, &slot), PPRPC_EUNSUPP);
	assert_null(slot);
	fdev.slot_free(NULL, NULL);
	fdev.graph_release(NULL, NULL);
	assert_int_equal(fbuf.ipc_export(NULL, 4096, &p, handle, err, sizeof(err)), PPRPC_EUNSUPP);
	assert_null(p);
	assert_non_null(strstr(err, "no IPC"));
	assert_int_equal(fbuf.ipc_copy(NULL, NULL, handle, 0, 1, err, sizeof(err)), PPRPC_EUNSUPP);
	assert_int_equal(fbuf.ipc_wait(NULL, err, sizeof(err)), PPRPC_EUNSUPP);
	assert_int_equal(fbuf.pin_host(NULL, NULL, 0, 1), PPRPC_EUNSUPP);
	/* No memory to lend a download in: the caller copies into its own. */
	assert_int_equal(fbuf.download_lend(NULL, NULL, 1, &p), PPRPC_EUNSUPP);
	assert_null(p);
	fbuf.download_return(NULL, NULL);
	/* No graphs: creates and probes answer PPRPC_EUNSUPP. */
	{
		bool ok = true;
		uint64_t size = 7;
		void *job = NULL;

		assert_int_equal(fdev.graph_begin(NULL, DEVICE_WIRE_NATIVE, NULL, NULL, NULL, &job, err, sizeof(err)),
				 PPRPC_EUNSUPP);
		assert_null(job);
		assert_int_equal(fdev.graph_finish(NULL, NULL, err, sizeof(err)), PPRPC_EUNSUPP);
		fdev.graph_build(NULL, NULL);
		fdev.graph_drop(NULL, NULL);
		assert_int_equal(fdev.graph_supports(NULL, DEVICE_WIRE_GGML, NULL, NULL, &ok, err, sizeof(err)),
				 PPRPC_EUNSUPP);
		assert_true(ok);
		assert_int_equal(fdev.graph_alloc_size(NULL, DEVICE_WIRE_GGML, NULL, NULL, &size, err, sizeof(err)),
				 PPRPC_EUNSUPP);
		assert_int_equal(size, 7);
	}
	/* A create is the four steps or none. */
	dev.graph_build = nop_gbuild;
	assert_int_equal(backend_fill(&be, &fdev, &fbuf, &fstr, err, sizeof(err)), PPRPC_EINTERNAL);
	assert_non_null(strstr(err, "graph_begin"));
	dev.graph_build = NULL;

	/* Half of the IPC group is a bug, as is a missing mandatory op. */
	buf.ipc_wait = nop_ipc_wait;
	assert_int_equal(backend_fill(&be, &fdev, &fbuf, &fstr, err, sizeof(err)), PPRPC_EINTERNAL);
	assert_non_null(strstr(err, "ipc_export"));
	buf.ipc_wait = NULL;
	buf.download_return = nop_lend_return;
	assert_int_equal(backend_fill(&be, &fdev, &fbuf, &fstr, err, sizeof(err)), PPRPC_EINTERNAL);
	assert_non_null(strstr(err, "download_lend"));
	buf.download_return = NULL;
	str.write_submit = NULL;
	assert_int_equal(backend_fill(&be, &fdev, &fbuf, &fstr, err, sizeof(err)), PPRPC_EINTERNAL);
	assert_non_null(strstr(err, "write_submit"));
}

/* ---- the CPU backend ------------------------------------------------------------------- */

struct rig {
	uv_loop_t loop;
	struct device *d;
};

static void rig_open(struct rig *r, int cpu_ipc)
{
	struct device_conf conf = { .threads = 1, .cpu_ipc = cpu_ipc };
	char err[256] = "";

	assert_int_equal(uv_loop_init(&r->loop), 0);
	assert_int_equal(device_open(&r->loop, "cpu", 0, &conf, &r->d, err, sizeof(err)), 0);
}

static void rig_close(struct rig *r)
{
	device_close(r->d);
	uv_run(&r->loop, UV_RUN_DEFAULT);
	assert_int_equal(uv_loop_close(&r->loop), 0);
}

static void test_cpu_props(void **state)
{
	struct rig r;
	volatile uint64_t *slot = NULL;
	uint8_t handle[DEVICE_IPC_HANDLE];
	void *p = NULL;
	char st[200], err[256] = "";

	(void)state;
	rig_open(&r, 0);
	assert_string_equal(r.d->name, "cpu");
	assert_string_equal(device_kind(r.d), "cpu");
	assert_non_null(strstr(r.d->desc, "1 threads"));
	assert_true(device_host_visible(r.d));
	assert_false(device_holds_waits(r.d));
	assert_true(device_completes_inline(r.d));
	device_waits_status(r.d, st, sizeof(st));
	assert_string_equal(st, "");
	/* No events, no pinning, no IPC unless asked for. */
	assert_int_equal(device_slot_alloc(r.d, &slot), PPRPC_EUNSUPP);
	assert_int_equal(device_pin_host(r.d, NULL, 0, 1), PPRPC_EUNSUPP);
	assert_false(device_has_ipc(r.d));
	assert_int_equal(device_ipc_pool(r.d, 4096, &p, handle, err, sizeof(err)), PPRPC_EUNSUPP);
	/* Native graphs only: a ggml graph or probe is refused, naming what
	 * the device is not. */
	assert_true(device_takes_wire(r.d, DEVICE_WIRE_NATIVE, err, sizeof(err)));
	assert_false(device_takes_wire(r.d, DEVICE_WIRE_GGML, err, sizeof(err)));
	assert_non_null(strstr(err, "not a ggml device"));
	{
		bool ok = false;

		assert_int_equal(device_graph_supports(r.d, DEVICE_WIRE_GGML, NULL, NULL, &ok, err, sizeof(err)),
				 PPRPC_EUNSUPP);
		assert_non_null(strstr(err, "not a ggml device"));
	}
	assert_null(device_info(r.d)->ggml_version);
	rig_close(&r);

	/* cpu-ipc: memory exported by pid and address, read back by
	 * cross-memory attach (here from this very process). */
	rig_open(&r, 1);
	assert_true(device_has_ipc(r.d));
	assert_int_equal(device_ipc_pool(r.d, 4096, &p, handle, err, sizeof(err)), 0);
	memcpy((uint8_t *)p + 100, "boundary", 8);
	{
		char got[8] = { 0 };

		assert_int_equal(device_ipc_copy(r.d, got, handle, 100, 8, err, sizeof(err)), 0);
		assert_int_equal(device_ipc_wait(r.d, err, sizeof(err)), 0);
		assert_memory_equal(got, "boundary", 8);
		/* outside the exported bytes */
		assert_int_equal(device_ipc_copy(r.d, got, handle, 4090, 8, err, sizeof(err)), PPRPC_EPROTO);
	}
	munmap(p, 4096); /* CPU memory is a mapping (not counted by device_alloc) */
	rig_close(&r);
}

/* A graph of one node over caller memory. */
struct tgraph {
	struct graph g;
	struct gnode node;
	struct kern_tensor t[3];
	float table[6], out[2];
	int32_t id;
};

static void tg_scale(struct tgraph *tg, float *x, int64_t n)
{
	int64_t ne[PPRPC_MAX_DIMS] = { n, 1, 1, 1 };

	memset(tg, 0, sizeof(*tg));
	assert_int_equal(kern_tensor_init_contig(&tg->t[0], PPRPC_F32, ne), 0);
	tg->t[1] = tg->t[0];
	tg->t[0].data = tg->t[1].data = x; /* in place */
	tg->node.op = PPRPC_OP_SCALE;
	tg->node.nsrc = 1;
	tg->node.src[0] = 0;
	tg->node.dst = 1;
	tg->node.p.f[0] = 2.0f;
	tg->node.p.f[1] = 1.0f;
	tg->g.ntensors = 2;
	tg->g.t = tg->t;
	tg->g.nnodes = 1;
	tg->g.nodes = &tg->node;
}

/* GET_ROWS of row id from a 3-row table: PPRPC_ERANGE when id >= 3. */
static void tg_rows(struct tgraph *tg, int32_t id)
{
	int64_t ne_t[PPRPC_MAX_DIMS] = { 2, 3, 1, 1 }, ne_i[PPRPC_MAX_DIMS] = { 1, 1, 1, 1 };
	int64_t ne_o[PPRPC_MAX_DIMS] = { 2, 1, 1, 1 };

	memset(tg, 0, sizeof(*tg));
	for (int i = 0; i < 6; i++)
		tg->table[i] = (float)i;
	tg->id = id;
	assert_int_equal(kern_tensor_init_contig(&tg->t[0], PPRPC_F32, ne_t), 0);
	assert_int_equal(kern_tensor_init_contig(&tg->t[1], PPRPC_I32, ne_i), 0);
	assert_int_equal(kern_tensor_init_contig(&tg->t[2], PPRPC_F32, ne_o), 0);
	tg->t[0].data = tg->table;
	tg->t[1].data = &tg->id;
	tg->t[2].data = tg->out;
	tg->node.op = PPRPC_OP_GET_ROWS;
	tg->node.nsrc = 2;
	tg->node.src[0] = 0;
	tg->node.src[1] = 1;
	tg->node.dst = 2;
	tg->g.ntensors = 3;
	tg->g.t = tg->t;
	tg->g.nnodes = 1;
	tg->g.nodes = &tg->node;
}

struct done_rec {
	int calls;
	int status;
	char why[256];
};

static void rec_done(void *arg, int status, const char *why)
{
	struct done_rec *r = arg;

	r->calls++;
	r->status = status;
	snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
}

static void test_cpu_stream_inline(void **state)
{
	struct rig r;
	struct stream s = { 0 };
	struct tgraph tg;
	struct done_rec rec = { 0 };
	float x[4] = { 0, 1, 2, 3 };
	volatile uint64_t slot = 0;
	char err[256] = "";

	(void)state;
	rig_open(&r, 0);
	/* done runs before the submit returns, with the kernel's result. */
	tg_scale(&tg, x, 4);
	tg.g.dev = r.d;
	assert_int_equal(device_graph_submit(r.d, &s, &tg.g, rec_done, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.calls, 1);
	assert_int_equal(rec.status, 0);
	for (int i = 0; i < 4; i++)
		assert_true(x[i] == (float)(2 * i + 1));
	assert_non_null(s.dev_stream);

	/* A kernel failure is the completion's status, not the submit's. */
	tg_rows(&tg, 1);
	assert_int_equal(device_graph_submit(r.d, &s, &tg.g, rec_done, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.calls, 2);
	assert_int_equal(rec.status, 0);
	assert_true(tg.out[0] == 2.0f && tg.out[1] == 3.0f);
	tg_rows(&tg, 3);
	assert_int_equal(device_graph_submit(r.d, &s, &tg.g, rec_done, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.calls, 3);
	assert_int_equal(rec.status, PPRPC_ERANGE);
	assert_non_null(strstr(rec.why, "node 0 (GET_ROWS)"));

	/* Nothing to wait for: done at once.  A slot to hold on: refused,
	 * done never runs. */
	assert_int_equal(device_wait_submit(r.d, &s, NULL, rec_done, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.calls, 4);
	assert_int_equal(rec.status, 0);
	assert_int_equal(device_wait_submit(r.d, &s, &slot, rec_done, &rec, err, sizeof(err)), PPRPC_EUNSUPP);
	assert_int_equal(rec.calls, 4);
	assert_int_equal(device_write_submit(r.d, &s, &slot, 42, rec_done, &rec, err, sizeof(err)), 0);
	assert_int_equal(rec.calls, 5);
	assert_int_equal(slot, 42);

	device_stream_release(r.d, &s);
	assert_null(s.dev_stream);
	rig_close(&r);
}

/* ---- the CPU through its queue ---------------------------------------------------------- */

struct qc {
	struct qcmd q;
	struct device *d;
	struct tgraph tg;
	atomic_int *gate;        /* a WAIT: ready once *gate != 0 */
	int id;
	int *log, *nlog;
	int ran;
	int pending_after;       /* the stream's pending count when exec returned */
	int gate_seen;           /* the WAIT's gate when it ran */
};

static void qc_device_done(void *arg, int status, const char *why)
{
	struct qc *c = arg;

	queue_complete(c->d->q, &c->q, status, why);
}

/* What GRAPH_RUN's exec does. */
static int qc_run(struct qcmd *q)
{
	struct qc *c = (struct qc *)q;
	int rc;

	c->ran = 1;
	rc = device_graph_submit(c->d, q->stream, &c->tg.g, qc_device_done, c, q->err, sizeof(q->err));
	/* The CPU completed it already: nothing of the stream is pending
	 * (checked on the test's thread: cmocka asserts only there). */
	c->pending_after = queue_stream_pending(q->stream);
	return rc < 0 ? rc : QCMD_PENDING;
}

/* What WAIT's exec does on a device that does not hold waits. */
static int qc_wait(struct qcmd *q)
{
	struct qc *c = (struct qc *)q;
	int rc;

	c->ran = 1;
	c->gate_seen = atomic_load(c->gate);
	rc = device_wait_submit(c->d, q->stream, NULL, qc_device_done, c, q->err, sizeof(q->err));
	return rc < 0 ? rc : QCMD_PENDING;
}

static int qc_ready(struct qcmd *q)
{
	return atomic_load(((struct qc *)q)->gate) != 0;
}

static void qc_on_done(struct qcmd *q)
{
	struct qc *c = (struct qc *)q;

	c->log[(*c->nlog)++] = c->id;
}

struct qrig {
	struct rig r;
	struct qc c[16];
	int log[16], nlog, n;
	float x[16][4];
};

static struct qc *qc_new(struct qrig *qr, struct stream *s, int rows_id)
{
	struct qc *c = &qr->c[qr->n];

	memset(c, 0, sizeof(*c));
	c->id = qr->n;
	c->d = qr->r.d;
	c->log = qr->log;
	c->nlog = &qr->nlog;
	if (rows_id >= 0)
		tg_rows(&c->tg, rows_id);
	else
		tg_scale(&c->tg, qr->x[qr->n], 4);
	c->tg.g.dev = qr->r.d;
	c->q.exec = qc_run;
	c->q.done = qc_on_done;
	c->q.stream = s;
	c->q.async_ok = 1;   /* as every GRAPH_RUN, WAIT and SIGNAL now */
	c->q.sticky = 1;
	c->q.req_id = (uint64_t)qr->n + 1;
	qr->n++;
	return c;
}

static void qrun_until(struct qrig *qr, int n)
{
	for (int i = 0; i < 5000 && qr->nlog < n; i++) {
		uv_run(&qr->r.loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	assert_int_equal(qr->nlog, n);
}

/* A GRAPH_RUN failing inside the CPU submit: sticky in issue order, the
 * FENCE names it, the stream works again after it. */
static void test_cpu_queue_sticky(void **state)
{
	struct qrig *qr = calloc(1, sizeof(*qr));
	struct stream s = { 0 };
	struct qc *fence;

	(void)state;
	rig_open(&qr->r, 0);
	queue_push(qr->r.d->q, &qc_new(qr, &s, 1)->q);     /* 0 ok */
	queue_push(qr->r.d->q, &qc_new(qr, &s, 7)->q);     /* 1 ERANGE on the device */
	queue_push(qr->r.d->q, &qc_new(qr, &s, -1)->q);    /* 2 skipped */
	fence = qc_new(qr, &s, -1);                         /* 3 */
	fence->q.exec = NULL;
	fence->q.fence = 1;
	fence->q.sticky = 0;
	fence->q.async_ok = 0;
	queue_push(qr->r.d->q, &fence->q);
	queue_push(qr->r.d->q, &qc_new(qr, &s, -1)->q);    /* 4 runs */
	qrun_until(qr, 5);
	for (int i = 0; i < 5; i++)
		assert_int_equal(qr->log[i], i);
	assert_int_equal(qr->c[0].q.status, 0);
	assert_int_equal(qr->c[1].q.status, PPRPC_ERANGE);
	assert_int_equal(qr->c[2].q.status, PPRPC_EQUEUE);
	assert_false(qr->c[2].ran);
	assert_true(qr->x[2][1] == 0.0f); /* untouched */
	assert_int_equal(fence->q.status, PPRPC_ERANGE);
	assert_int_equal(fence->q.fail_cmd, 2);
	assert_non_null(strstr(fence->q.err, "GET_ROWS"));
	assert_int_equal(qr->c[4].q.status, 0);
	assert_true(qr->x[4][3] == 1.0f); /* 0 * 2 + 1 */
	for (int i = 0; i < 5; i++)
		assert_int_equal(qr->c[i].pending_after, 0);
	assert_int_equal(queue_stream_pending(&s), 0);
	device_stream_release(qr->r.d, &s);
	rig_close(&qr->r);
	free(qr);
}

/* A WAIT that is not reached holds its stream in the queue (the CPU cannot
 * hold it), not the worker: another stream's work runs meanwhile, and the
 * WAIT runs once its value is there and the queue is kicked. */
static void test_cpu_wait_in_queue(void **state)
{
	struct qrig *qr = calloc(1, sizeof(*qr));
	struct stream a = { 0 }, b = { 0 };
	atomic_int gate = 0;
	struct qc *w;

	(void)state;
	rig_open(&qr->r, 0);
	w = qc_new(qr, &a, -1);                           /* 0: WAIT on a */
	w->q.exec = qc_wait;
	w->q.ready = qc_ready;
	w->gate = &gate;
	queue_push(qr->r.d->q, &w->q);
	queue_push(qr->r.d->q, &qc_new(qr, &a, -1)->q);  /* 1: behind the WAIT */
	queue_push(qr->r.d->q, &qc_new(qr, &b, -1)->q);  /* 2: another stream */
	qrun_until(qr, 1);
	assert_int_equal(qr->log[0], 2);
	usleep(20000);
	uv_run(&qr->r.loop, UV_RUN_NOWAIT);
	assert_int_equal(qr->nlog, 1);
	assert_false(w->ran);
	assert_false(qr->c[1].ran);
	atomic_store(&gate, 1);
	queue_kick(qr->r.d->q);
	qrun_until(qr, 3);
	assert_int_equal(qr->log[1], 0);
	assert_int_equal(qr->log[2], 1);
	assert_int_equal(w->q.status, 0);
	assert_int_equal(w->gate_seen, 1);
	assert_int_equal(qr->c[1].q.status, 0);
	device_stream_release(qr->r.d, &a);
	device_stream_release(qr->r.d, &b);
	rig_close(&qr->r);
	free(qr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_registry),
		cmocka_unit_test(test_fill_stubs),
		cmocka_unit_test(test_cpu_props),
		cmocka_unit_test(test_cpu_stream_inline),
		cmocka_unit_test(test_cpu_queue_sticky),
		cmocka_unit_test(test_cpu_wait_in_queue),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
