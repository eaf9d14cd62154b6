/*
 * daemon/backend/ggml/ggml_cuda_stream.c — a ggml-cuda device's streams: WAITs
 * held on the GPU, runs enqueued behind them (ggml_cuda_stream.h).
 *
 * Streams of closed connections are kept and reused, as the native CUDA
 * device keeps its own: freeing a ggml backend frees its memory pool, and
 * freeing device memory may wait for the whole device, which can be held
 * by a timeline wait that only this thread would release.
 */
#include "daemon/backend/ggml/ggml_cuda_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"

#ifdef PPRPC_HAVE_CUDA

#include <pthread.h>

#include <cuda_runtime_api.h>

#include "daemon/backend/cuda/cuda_memops.h"
#include "daemon/core/trace.h"
#include "daemon/objects/graph.h"
#include "ggml-backend-impl.h"
#include "kernels/cuda/cuda_ops.h"

struct gge_cuda_stream;

struct gge_cuda_streams {
	struct gge_dev *g;
	int ordinal;               /* of pprpcd's runtime */
	char name[48];             /* "ggml:CUDA0", for messages */
	struct cuda_slots slots;
	pthread_mutex_t lock;      /* idle */
	struct gge_cuda_stream *idle;
};

struct gge_cuda_stream {
	struct gge_cuda_stream *next;   /* the idle list */
	struct gge_cuda_streams *cs;
	cudaStream_t stream;            /* pprpcd's: waits, signals, checks, completions */
	ggml_backend_t be;              /* ggml's: the graphs */
	/* in: recorded on stream, waited for by be; out: the other way */
	ggml_backend_event_t ev_in, ev_out;
	/* stream has work since be last waited for it (a WAIT, checks) */
	bool ahead;
	/* completions queued on stream and not run yet (pend_done) */
	int inflight;
	struct kern_index_fault *fault;      /* host-mapped */
	struct kern_index_fault *fault_dev;  /* its device address */
	unsigned *claim;                     /* device memory: elects the reporter */
	unsigned gen;                        /* of the last check launch */
};

static int cuda_fail(const struct gge_cuda_streams *cs, cudaError_t e, const char *what, char *err, size_t errlen)
{
	cudaGetLastError();
	snprintf(err, errlen, "%s: %s: %s", cs->name, what, cudaGetErrorString(e));
	return PPRPC_EDEVICE;
}

static int use(const struct gge_cuda_streams *cs, char *err, size_t errlen)
{
	cudaError_t e = cudaSetDevice(cs->ordinal);

	return e == cudaSuccess ? 0 : cuda_fail(cs, e, "cannot make the device current", err, errlen);
}

/* ---- streams -------------------------------------------------------------------- */

static void stream_destroy(struct gge_cuda_stream *s)
{
	if (s->ev_in)
		ggml_backend_event_free(s->ev_in);
	if (s->ev_out)
		ggml_backend_event_free(s->ev_out);
	if (s->be)
		ggml_backend_free(s->be);
	if (s->fault)
		cudaFreeHost(s->fault);
	if (s->claim)
		cudaFree(s->claim);
	if (s->stream)
		cudaStreamDestroy(s->stream);
	cudaGetLastError();
	free(s);
}

static int stream_create(struct gge_cuda_streams *cs, struct gge_cuda_stream **ret, char *err, size_t errlen)
{
	struct gge_cuda_stream *s = calloc(1, sizeof(*s));
	cudaError_t e;
	int rc;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	s->cs = cs;
	if ((rc = use(cs, err, errlen)) < 0)
		goto fail;
	if ((e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaHostAlloc((void **)&s->fault, sizeof(*s->fault), cudaHostAllocMapped)) != cudaSuccess ||
	    (e = cudaHostGetDevicePointer((void **)&s->fault_dev, s->fault, 0)) != cudaSuccess ||
	    (e = cudaMalloc((void **)&s->claim, sizeof(*s->claim))) != cudaSuccess ||
	    (e = cudaMemset(s->claim, 0, sizeof(*s->claim))) != cudaSuccess) {
		rc = cuda_fail(cs, e, "a stream and its fault word", err, errlen);
		goto fail;
	}
	memset(s->fault, 0, sizeof(*s->fault));
	s->be = ggml_backend_dev_init(cs->g->dev, NULL);
	s->ev_in = s->be ? ggml_backend_event_new(cs->g->dev) : NULL;
	s->ev_out = s->ev_in ? ggml_backend_event_new(cs->g->dev) : NULL;
	if (!s->ev_out) {
		snprintf(err, errlen, "%s: no ggml backend with two events for the connection's stream", cs->name);
		rc = PPRPC_EDEVICE;
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	stream_destroy(s);
	return rc;
}

int gge_cuda_stream_open(struct gge_cuda_streams *cs, void **ret_sctx, char *err, size_t errlen)
{
	struct gge_cuda_stream *s;
	int rc = 0;

	pthread_mutex_lock(&cs->lock);
	s = cs->idle;
	if (s)
		cs->idle = s->next;
	pthread_mutex_unlock(&cs->lock);
	if (!s)
		rc = stream_create(cs, &s, err, errlen);
	if (rc < 0)
		return rc;
	s->next = NULL;
	*ret_sctx = s;
	return 0;
}

/* Back to the idle list: its work may still run, which is harmless (the
 * next user's work queues behind it on the same streams). */
void gge_cuda_stream_close(struct gge_cuda_streams *cs, void *sctx)
{
	struct gge_cuda_stream *s = sctx;

	pthread_mutex_lock(&cs->lock);
	s->next = cs->idle;
	cs->idle = s;
	pthread_mutex_unlock(&cs->lock);
}

int gge_cuda_slot_alloc(struct gge_cuda_streams *cs, volatile uint64_t **ret_slot)
{
	return cuda_slots_alloc(&cs->slots, ret_slot);
}

void gge_cuda_slot_free(struct gge_cuda_streams *cs, volatile uint64_t *slot)
{
	cuda_slots_free(&cs->slots, slot);
}

int gge_cuda_streams_open(struct gge_dev *g, struct gge_cuda_streams **ret, char *why, size_t whylen)
{
	const char *env = getenv("PPRPC_GGML_GPU_WAITS");
	struct gge_cuda_streams *cs;
	ggml_backend_event_t probe;
	char kwhy[200] = "";
	int rc;

	if (g->cuda_ordinal < 0) {
		snprintf(why, whylen, "pprpcd's CUDA runtime does not see the device (%s)", g->cuda_why);
		return PPRPC_EUNSUPP;
	}
	if (env && !strcmp(env, "0")) {
		snprintf(why, whylen, "PPRPC_GGML_GPU_WAITS=0");
		return PPRPC_EUNSUPP;
	}
	/* ggml's events are what orders its stream with pprpc's. */
	probe = ggml_backend_event_new(g->dev);
	if (!probe) {
		snprintf(why, whylen, "ggml's backend for the device has no events");
		return PPRPC_EUNSUPP;
	}
	ggml_backend_event_free(probe);
	cs = calloc(1, sizeof(*cs));
	if (!cs) {
		snprintf(why, whylen, "out of memory");
		return PPRPC_ENOMEM;
	}
	cs->g = g;
	cs->ordinal = g->cuda_ordinal;
	snprintf(cs->name, sizeof(cs->name), "ggml:%.40s", g->name);
	if ((rc = use(cs, why, whylen)) < 0) {
		free(cs);
		return rc;
	}
	/* Every kernel loaded now (the index checks among them): a lazy load
	 * behind a held stream would hang (doc/gpu-wait.md). */
	if ((rc = kern_cuda_preload(kwhy, sizeof(kwhy))) < 0) {
		snprintf(why, whylen, "%s", kwhy);
		free(cs);
		return rc;
	}
	cuda_slots_init(&cs->slots, cs->ordinal);
	if (!cs->slots.memops) {
		snprintf(why, whylen, "%s", cs->slots.waits_why);
		cuda_slots_fini(&cs->slots);
		free(cs);
		return PPRPC_EUNSUPP;
	}
	pthread_mutex_init(&cs->lock, NULL);
	*ret = cs;
	return 0;
}

void gge_cuda_streams_close(struct gge_cuda_streams *cs)
{
	if (!cs)
		return;
	cudaSetDevice(cs->ordinal);
	while (cs->idle) {
		struct gge_cuda_stream *s = cs->idle;

		cs->idle = s->next;
		cudaStreamSynchronize(s->stream);
		ggml_backend_synchronize(s->be);
		stream_destroy(s);
	}
	cuda_slots_fini(&cs->slots);
	pthread_mutex_destroy(&cs->lock);
	free(cs);
}

/* ---- submissions ---------------------------------------------------------------- */

/*
 * Work goes to the GPU only behind work still there (a held WAIT, a run
 * enqueued behind one): with nothing of the stream in flight a run is
 * waited for on this thread and a SIGNAL stored from it, as on a CPU
 * device.  A completion from CUDA's callback thread costs more than this
 * thread's synchronize, at every command that waits for the run (SEND,
 * TENSOR_GET): the 0.95 B llama decoding through two ranks on one H200
 * gave 402 and 424 tok/s with every run completed by a callback (ggml-rpc
 * 473, 479), 525 and 538 so (ggml-rpc 480, 481), 517 with host-side waits
 * (ggml-rpc 455; bench/llama-vs-rpc, doc/results/h200-llama.md).
 */

/* One submission in flight on the GPU: what its completion needs. */
struct pend {
	struct gge_cuda_stream *s;
	const struct gge_graph *gg;  /* a run: its checks' report (held by the command until done ran) */
	bool drop_fault;             /* behind a run that failed to enqueue: its checks' report goes */
	device_done_fn done;         /* NULL: nobody waits */
	void *arg;
};

static bool quiet(struct gge_cuda_stream *s)
{
	return __atomic_load_n(&s->inflight, __ATOMIC_ACQUIRE) == 0;
}

/* The checks of gg ran (and nothing wrote the fault word since): their
 * report, if any, fails a run that went well. */
static int take_fault(struct gge_cuda_stream *s, const struct gge_graph *gg, int status, const char **why, char *msg,
		      size_t msglen)
{
	volatile struct kern_index_fault *f = s->fault;

	if (f->hit) {
		const int64_t at[4] = { f->at[0], f->at[1], f->at[2], f->at[3] };
		char what[256];

		gge_guard_describe(gg, f->id, f->value, at, what, sizeof(what));
		f->hit = 0;
		if (status == 0) {
			snprintf(msg, msglen, "%s: %s", s->cs->name, what);
			status = PPRPC_ERANGE;
			*why = msg;
		}
	}
	return status;
}

/* CUDA's callback thread, in stream order: a run's checks are the last
 * that wrote the fault word (the next run's are enqueued behind this
 * callback, which holds the stream until it returns). */
static void pend_done(void *p, int status, const char *why)
{
	struct pend *pd = p;
	struct gge_cuda_stream *s = pd->s;
	device_done_fn done = pd->done;
	void *arg = pd->arg;
	char msg[320];

	if (pd->gg)
		status = take_fault(s, pd->gg, status, &why, msg, sizeof(msg));
	else if (pd->drop_fault)
		s->fault->hit = 0;
	free(pd);
	/* Before done: the command after it may find the stream quiet (what
	 * it enqueues runs after this callback returns). */
	__atomic_fetch_sub(&s->inflight, 1, __ATOMIC_RELEASE);
	if (done)
		done(arg, status, why);
}

static struct pend *pend_new(struct gge_cuda_stream *s, const struct gge_graph *gg, device_done_fn done, void *arg,
			     char *err, size_t errlen)
{
	struct pend *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	*pd = (struct pend){ s, gg, false, done, arg };
	return pd;
}

enum pend_kind { PEND_AFTER, PEND_WAIT, PEND_WRITE };

/* Queue pd behind what the stream holds: its completion alone, or a WAIT
 * on slot or a write of value into it first; in flight until the
 * completion ran.  On failure pd is freed. */
static int pend_submit(struct gge_cuda_stream *s, struct pend *pd, enum pend_kind kind, volatile uint64_t *slot,
		       uint64_t value, char *err, size_t errlen)
{
	const struct cuda_slots *sl = &s->cs->slots;
	const char *name = s->cs->name;
	int rc;

	__atomic_fetch_add(&s->inflight, 1, __ATOMIC_ACQ_REL);
	if (kind == PEND_WAIT)
		rc = cuda_memop_wait(sl, s->stream, name, slot, pend_done, pd, err, errlen);
	else if (kind == PEND_WRITE)
		rc = cuda_memop_write(sl, s->stream, name, slot, value, pend_done, pd, err, errlen);
	else
		rc = cuda_completion_add(s->stream, name, NULL, NULL, pend_done, pd, err, errlen);
	if (rc < 0) {
		__atomic_fetch_sub(&s->inflight, 1, __ATOMIC_RELEASE);
		free(pd);
	}
	return rc;
}

/* A WAIT or a write of the stream, to the GPU behind what it holds. */
static int memop_submit(struct gge_cuda_stream *s, enum pend_kind kind, volatile uint64_t *slot, uint64_t value,
			device_done_fn done, void *arg, char *err, size_t errlen)
{
	struct pend *pd;
	int rc = use(s->cs, err, errlen);

	if (rc < 0)
		return rc;
	pd = pend_new(s, NULL, done, arg, err, errlen);
	return pd ? pend_submit(s, pd, kind, slot, value, err, errlen) : PPRPC_ENOMEM;
}

/* The client's indices, checked into the graph's copies on pprpc's stream
 * before the run (gge_graph_shadow). */
static int enqueue_checks(struct gge_cuda_stream *s, const struct gge_graph *gg, char *err, size_t errlen)
{
	char why[200] = "";
	int n = gg->ngpu_checks;

	if (!gg->gpu_ready) {
		snprintf(err, errlen, "%s: the graph's index checks are not set up for the GPU", s->cs->name);
		return PPRPC_EINTERNAL;
	}
	if (!n)
		return 0;
	/* (0 is the claim word's first value: never a generation) */
	if (++s->gen == 0)
		s->gen = 1;
	if (kern_cuda_index_check(s->stream, gg->gpu_checks, n, s->fault_dev, s->claim, s->gen, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: %s", s->cs->name, why);
		return PPRPC_EDEVICE;
	}
	s->ahead = true;
	return 0;
}

static int gcs_graph_submit(void *sctx, struct graph *g, device_done_fn done, void *arg, char *err, size_t errlen)
{
	struct gge_cuda_stream *s = sctx;
	struct gge_cuda_streams *cs = s->cs;
	struct gge_graph *gg = g->dev_priv;
	ggml_backend_event_t up;
	const char *w = NULL;
	enum ggml_status st;
	struct pend *pd;
	cudaError_t e;
	char why[512];
	int rc;

	if (g->kind != GRAPH_GGML || !gg) {
		snprintf(err, errlen, "a ggml device runs ggml graphs only");
		return PPRPC_EINTERNAL;
	}
	if (g->sync_run) {
		/* The queue handed it over with nothing of its stream pending:
		 * it runs to its end here, reading what it must on the way. */
		rc = gge_graph_compute_on(cs->g, s->be, gg, why, sizeof(why));
		done(arg, rc, rc < 0 ? why : NULL);
		return 0;
	}
	if ((rc = use(cs, err, errlen)) < 0 || (rc = gge_graph_prepare_async(cs->g, gg, &up, err, errlen)) < 0)
		return rc;
	/* The inputs' uploads before the checks and the run, on the GPU (the
	 * run waits for this stream when it is ahead). */
	if (up) {
		if ((e = cudaStreamWaitEvent(s->stream, (cudaEvent_t)up->context, 0)) != cudaSuccess)
			return cuda_fail(cs, e, "event wait (uploads)", err, errlen);
		s->ahead = true;
	}
	if ((rc = enqueue_checks(s, gg, err, errlen)) < 0)
		goto fail;
	trace_mark(TRACE_MARK_READY);
	if (s->ahead) {
		if ((e = cudaEventRecord((cudaEvent_t)s->ev_in->context, s->stream)) != cudaSuccess) {
			rc = cuda_fail(cs, e, "event record", err, errlen);
			goto fail;
		}
		ggml_backend_event_wait(s->be, s->ev_in);
		s->ahead = false;
	}
	st = ggml_backend_graph_compute_async(s->be, gg->cg);
	if (st != GGML_STATUS_SUCCESS) {
		snprintf(err, errlen, "%s: graph compute failed (%s)", cs->name, ggml_status_to_string(st));
		rc = st == GGML_STATUS_ALLOC_FAILED ? PPRPC_ENOMEM : PPRPC_EDEVICE;
		goto fail;
	}
	gge_ops_count_ggml(gg, 0, gg->nnodes);
	trace_mark(TRACE_MARK_LAUNCHED);
	if (quiet(s)) {
		/* The checks ran before the graph (it waited for them). */
		ggml_backend_synchronize(s->be);
		rc = take_fault(s, gg, 0, &w, why, sizeof(why));
		done(arg, rc, w);
		return 0;
	}
	ggml_backend_event_record(s->ev_out, s->be);
	if ((e = cudaStreamWaitEvent(s->stream, (cudaEvent_t)s->ev_out->context, 0)) != cudaSuccess) {
		rc = cuda_fail(cs, e, "event wait", err, errlen);
		goto fail;
	}
	pd = pend_new(s, gg, done, arg, err, errlen);
	if (!pd) {
		rc = PPRPC_ENOMEM;
		goto fail;
	}
	rc = pend_submit(s, pd, PEND_AFTER, NULL, 0, err, errlen);
	if (rc < 0)
		goto fail;
	return 0;
fail:
	/* The checks may have run: what they report belongs to no run. */
	pd = pend_new(s, NULL, NULL, NULL, why, sizeof(why));
	if (pd)
		pd->drop_fault = true;
	if (!pd || pend_submit(s, pd, PEND_AFTER, NULL, 0, why, sizeof(why)) < 0)
		s->fault->hit = 0;
	return rc;
}

static int gcs_wait_submit(void *sctx, volatile uint64_t *slot, device_done_fn done, void *arg, char *err,
			   size_t errlen)
{
	struct gge_cuda_stream *s = sctx;
	int rc;

	if (!slot && quiet(s)) {
		done(arg, 0, NULL);
		return 0;
	}
	rc = memop_submit(s, PEND_WAIT, slot, 0, done, arg, err, errlen);
	s->ahead |= rc == 0 && slot;
	return rc;
}

static int gcs_write_submit(void *sctx, volatile uint64_t *slot, uint64_t value, device_done_fn done, void *arg,
			    char *err, size_t errlen)
{
	struct gge_cuda_stream *s = sctx;

	if (quiet(s)) {
		/* the stream's work is done: what the GPU would store */
		__atomic_store_n(slot, value, __ATOMIC_RELEASE);
		done(arg, 0, NULL);
		return 0;
	}
	return memop_submit(s, PEND_WRITE, slot, value, done, arg, err, errlen);
}

const struct stream_i gge_cuda_stream_i = {
	.graph_submit = gcs_graph_submit,
	.wait_submit = gcs_wait_submit,
	.write_submit = gcs_write_submit,
};

#endif /* PPRPC_HAVE_CUDA */
