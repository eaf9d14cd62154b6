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
#include <time.h>

#include <cuda_runtime_api.h>

#include "daemon/backend/cuda/cuda_memops.h"
#include "daemon/core/trace.h"
#include "daemon/objects/graph.h"
#include "ggml-backend-impl.h"
#include "kernels/cuda/cuda_ops.h"
#include "util/clock.h"
#include "util/expect.h"

struct gge_cuda_stream;
struct pend;

struct gge_cuda_streams {
	struct gge_dev *g;
	int ordinal;               /* of pprpcd's runtime */
	char name[48];             /* "ggml:CUDA0", for messages */
	struct cuda_slots slots;
	/* the device reads page-locked host memory at its host address (a
	 * landing page's bell and bytes): RECVs may be held (land_submit) */
	bool lands;
	pthread_mutex_t lock;      /* idle */
	struct gge_cuda_stream *idle;
};

/* Check reports in flight at once before a launch waits for the oldest's
 * reader (enqueue_checks): runs queued on one connection's stream rarely
 * number more than two or three. */
#define FAULT_RING 16

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
	/* plock: those completions in stream order, not yet run or claimed,
	 * and how many of them are timeline WAITs and held RECVs */
	pthread_mutex_t plock;
	struct pend *phead, *ptail;
	int nwaits, nlands;
	/* The completions of a landing slot's part (a held RECV's copy, a
	 * SEND's bell) and of the runs around one run from this stream, behind
	 * cb_ev recorded on stream: a callback holds its stream until CUDA's
	 * callback thread ran it (tens of microseconds or more), and on stream
	 * the next stage's graph, or the SEND's copy behind a run, would wait
	 * for that.  The others stay on stream (pend_enqueue says why). */
	cudaStream_t cb_stream;
	cudaEvent_t cb_ev;
	/* recorded on stream behind a run enqueued behind a held RECV, before
	 * its completion: the worker sees the run end without the callback */
	cudaEvent_t ev_done;
	struct expect held_us;          /* how long such runs took from their launch */
	/* One report per check launch in flight, by its generation
	 * (FAULT_RING): a run's completion may come from cb_stream after the
	 * next run's checks ran, so each reads its own. */
	struct kern_index_fault *fault;      /* host-mapped, FAULT_RING of them */
	struct kern_index_fault *fault_dev;  /* their device address */
	int fault_users[FAULT_RING];         /* plock: launches whose report is not read yet */
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
	if (s->ev_done)
		cudaEventDestroy(s->ev_done);
	if (s->cb_ev)
		cudaEventDestroy(s->cb_ev);
	if (s->cb_stream)
		cudaStreamDestroy(s->cb_stream);
	if (s->stream)
		cudaStreamDestroy(s->stream);
	cudaGetLastError();
	pthread_mutex_destroy(&s->plock);
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
	pthread_mutex_init(&s->plock, NULL);
	if ((rc = use(cs, err, errlen)) < 0)
		goto fail;
	if ((e = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&s->ev_done, cudaEventDisableTiming)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&s->cb_stream, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&s->cb_ev, cudaEventDisableTiming)) != cudaSuccess ||
	    (e = cudaHostAlloc((void **)&s->fault, FAULT_RING * sizeof(*s->fault), cudaHostAllocMapped)) != cudaSuccess ||
	    (e = cudaHostGetDevicePointer((void **)&s->fault_dev, s->fault, 0)) != cudaSuccess ||
	    (e = cudaMalloc((void **)&s->claim, sizeof(*s->claim))) != cudaSuccess ||
	    (e = cudaMemset(s->claim, 0, sizeof(*s->claim))) != cudaSuccess) {
		rc = cuda_fail(cs, e, "a stream and its fault word", err, errlen);
		goto fail;
	}
	memset(s->fault, 0, FAULT_RING * sizeof(*s->fault));
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
	{
		int v = 0;

		/* bell and bytes are handed over as host pointers */
		cs->lands = cudaDeviceGetAttribute(&v, cudaDevAttrCanUseHostPointerForRegisteredMem, cs->ordinal) ==
				    cudaSuccess &&
			    v;
		cudaGetLastError();
	}
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

bool gge_cuda_streams_lands(const struct gge_cuda_streams *cs)
{
	return cs->lands;
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
		cudaStreamSynchronize(s->cb_stream);
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

enum pend_kind { PEND_AFTER, PEND_WAIT, PEND_WRITE, PEND_LAND, PEND_PUT };

/* One submission in flight on the GPU: what its completion needs. */
struct pend {
	struct pend *next;           /* plock: the stream's list */
	struct gge_cuda_stream *s;
	enum pend_kind kind;
	bool claimed;                /* plock: its completion ran (callback or worker) */
	const struct gge_graph *gg;  /* a run (held by the command until done ran) */
	/* the report its run's checks write (NULL: none ran); without gg, a
	 * run that failed to enqueue: the report goes */
	struct kern_index_fault *fault;
	bool aside;                  /* PEND_AFTER: its completion from cb_stream */
	device_done_fn done;         /* NULL: nobody waits */
	void *arg;
	/* PEND_LAND, PEND_PUT: the bell, its generation, the copy */
	struct {
		volatile uint64_t *bell;
		uint64_t gen;
		void *dst;
		const void *src;
		uint64_t n;
	} land;
};

static bool quiet(struct gge_cuda_stream *s)
{
	return __atomic_load_n(&s->inflight, __ATOMIC_ACQUIRE) == 0;
}

/* Under plock.  The checks of gg ran and wrote what they found into fault
 * (its own, enqueue_checks): that report, if any, fails a run that went
 * well; the record is free again.  A NULL fault: no checks, no report. */
static int take_fault(struct gge_cuda_stream *s, struct kern_index_fault *fault, const struct gge_graph *gg,
		      int status, const char **why, char *msg, size_t msglen)
{
	volatile struct kern_index_fault *f = fault;

	if (!f)
		return status;
	s->fault_users[fault - s->fault]--;
	if (!gg) {
		f->hit = 0;
		return status;
	}
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

static void pend_unlink(struct gge_cuda_stream *s, struct pend *pd)
{
	struct pend *prev = NULL;

	for (struct pend *q = s->phead; q; prev = q, q = q->next)
		if (q == pd) {
			if (prev)
				prev->next = pd->next;
			else
				s->phead = pd->next;
			if (s->ptail == pd)
				s->ptail = prev;
			break;
		}
	s->nwaits -= pd->kind == PEND_WAIT;
	s->nlands -= pd->kind == PEND_LAND;
}

/* Under plock, in stream order: pd's completion (with its run's own check
 * report).  The pend itself stays: its callback frees it. */
static void pend_finish(struct gge_cuda_stream *s, struct pend *pd, int status, const char *why)
{
	char msg[320];

	pend_unlink(s, pd);
	pd->claimed = true;
	status = take_fault(s, pd->fault, pd->gg, status, &why, msg, sizeof(msg));
	/* Before done: the command after it may find the stream quiet (what
	 * it enqueues runs after this completion). */
	__atomic_fetch_sub(&s->inflight, 1, __ATOMIC_RELEASE);
	if (pd->done)
		pd->done(pd->arg, status, why);
}

/* CUDA's callback thread: the completion, unless the worker claimed it
 * first (finish_early).  Completions come from two streams (cb_stream), so
 * one may come before an earlier pend's: everything enqueued on stream
 * before pd is done on the GPU by now (pd's work follows it), and is
 * completed first, in stream order, as finish_early does; its own callback
 * then finds it claimed. */
static void pend_done(void *p, int status, const char *why)
{
	struct pend *pd = p;
	struct gge_cuda_stream *s = pd->s;

	pthread_mutex_lock(&s->plock);
	if (!pd->claimed) {
		while (s->phead && s->phead != pd)
			pend_finish(s, s->phead, 0, NULL);
		pend_finish(s, pd, status, why);
	}
	pthread_mutex_unlock(&s->plock);
	free(pd);
}

static struct pend *pend_new(struct gge_cuda_stream *s, enum pend_kind kind, const struct gge_graph *gg,
			     device_done_fn done, void *arg, char *err, size_t errlen)
{
	struct pend *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pd->s = s;
	pd->kind = kind;
	pd->gg = gg;
	pd->done = done;
	pd->arg = arg;
	return pd;
}

/* pd's completion from cb_stream, behind what stream holds now. */
static int pend_aside(struct gge_cuda_stream *s, struct pend *pd, char *err, size_t errlen)
{
	cudaError_t e;

	if ((e = cudaEventRecord(s->cb_ev, s->stream)) != cudaSuccess ||
	    (e = cudaStreamWaitEvent(s->cb_stream, s->cb_ev, 0)) != cudaSuccess)
		return cuda_fail(s->cs, e, "a completion's event", err, errlen);
	return cuda_completion_add(s->cb_stream, s->cs->name, NULL, NULL, pend_done, pd, err, errlen);
}

/* What pd's kind puts on the stream before its completion. */
static int pend_enqueue(struct gge_cuda_stream *s, struct pend *pd, volatile uint64_t *slot, uint64_t value,
			char *err, size_t errlen)
{
	const struct cuda_slots *sl = &s->cs->slots;
	const char *name = s->cs->name;
	cudaError_t e;
	int rc;

	switch (pd->kind) {
	case PEND_WAIT:
		/* A timeline WAIT's and a SIGNAL's completions stay on the
		 * stream: the way tested on GPUs for every run that holds them;
		 * a landing slot's part (land-hold, land-gpu-send, both opt-in)
		 * is where one sat in front of the next stage's graph. */
		return cuda_memop_wait(sl, s->stream, name, slot, pend_done, pd, err, errlen);
	case PEND_WRITE:
		return cuda_memop_write(sl, s->stream, name, slot, value, pend_done, pd, err, errlen);
	case PEND_LAND:
		/* Refused, nothing is on the stream: the caller may wait
		 * another way (PPRPC_EUNSUPP). */
		if (cuda_memop_wait_geq(sl, s->stream, name, pd->land.bell, pd->land.gen, err, errlen) < 0)
			return PPRPC_EUNSUPP;
		e = cudaMemcpyAsync(pd->land.dst, pd->land.src, (size_t)pd->land.n, cudaMemcpyHostToDevice, s->stream);
		if (e != cudaSuccess)
			return cuda_fail(s->cs, e, "the copy out of the landing slot", err, errlen);
		return pend_aside(s, pd, err, errlen);
	case PEND_PUT:
		/* The bell after the bytes: a stream write orders itself behind
		 * the stream's earlier work and its memory (no NO_MEMORY_BARRIER). */
		e = cudaMemcpyAsync(pd->land.dst, pd->land.src, (size_t)pd->land.n, cudaMemcpyDeviceToHost, s->stream);
		if (e != cudaSuccess)
			return cuda_fail(s->cs, e, "the copy into the landing slot", err, errlen);
		if ((rc = cuda_memop_store(sl, s->stream, name, pd->land.bell, pd->land.gen, err, errlen)) < 0)
			return rc;
		return pend_aside(s, pd, err, errlen);
	case PEND_AFTER:
		/* A run's completion goes aside where a landing slot's part
		 * is around it (gcs_graph_submit): on the chain's source it
		 * would stand between the run and the SEND's copy and bell.
		 * It reads its own check report (FAULT_RING), which the next
		 * run's checks leave alone. */
		if (pd->aside)
			return pend_aside(s, pd, err, errlen);
		break;
	}
	return cuda_completion_add(s->stream, name, NULL, NULL, pend_done, pd, err, errlen);
}

/* Queue pd behind what the stream holds: its completion alone, or what its
 * kind does first; in flight until the completion ran.  On failure pd is
 * freed. */
static int pend_submit(struct gge_cuda_stream *s, struct pend *pd, volatile uint64_t *slot, uint64_t value, char *err,
		       size_t errlen)
{
	int rc;

	__atomic_fetch_add(&s->inflight, 1, __ATOMIC_ACQ_REL);
	pthread_mutex_lock(&s->plock);
	if (s->ptail)
		s->ptail->next = pd;
	else
		s->phead = pd;
	s->ptail = pd;
	s->nwaits += pd->kind == PEND_WAIT;
	s->nlands += pd->kind == PEND_LAND;
	pthread_mutex_unlock(&s->plock);
	rc = pend_enqueue(s, pd, slot, value, err, errlen);
	if (rc < 0) {
		pthread_mutex_lock(&s->plock);
		pend_unlink(s, pd);
		pthread_mutex_unlock(&s->plock);
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
	pd = pend_new(s, kind, NULL, done, arg, err, errlen);
	return pd ? pend_submit(s, pd, slot, value, err, errlen) : PPRPC_ENOMEM;
}

/*
 * A run enqueued behind a held RECV (its bytes come from another process,
 * or the daemon's loop rings the bell: nothing this thread must do first):
 * the worker looks for its end itself rather than leave it to CUDA's
 * callback thread, whose wake-up would come before the stream's next
 * command (the SEND to the next stage) on every token.  Asleep until
 * shortly before the end is expected (how long the last such runs took),
 * then polling ev_done; past a bound the callbacks complete it as any run.
 * When it ended, every completion queued so far runs here, in order.
 */
#define HELD_FIRST_US 3000u     /* no estimate yet: poll this long */

static void finish_early(struct gge_cuda_stream *s)
{
	uint64_t t0 = util_now_ns(), est = expect_us(&s->held_us);
	uint64_t spin_from = est ? expect_spin_from_us(est) : 0;
	uint64_t until = est ? est + 4 * expect_margin_us(est) : HELD_FIRST_US;

	for (unsigned i = 0;; i++) {
		uint64_t now = (util_now_ns() - t0) / 1000;
		cudaError_t e;

		if (i & 31) {
			cpu_relax();
			continue;
		}
		e = cudaEventQuery(s->ev_done);
		if (e == cudaSuccess) {
			expect_note(&s->held_us, now);
			pthread_mutex_lock(&s->plock);
			while (s->phead)
				pend_finish(s, s->phead, 0, NULL);
			pthread_mutex_unlock(&s->plock);
			return;
		}
		if (e != cudaErrorNotReady) {
			/* a fault: the callbacks carry it */
			cudaGetLastError();
			return;
		}
		if (now >= until) {
			expect_note(&s->held_us, now);
			return;
		}
		if (now + 20 < spin_from) {
			uint64_t us = spin_from - now - 10;
			struct timespec ts = { 0, (long)(us > 200 ? 200 : us) * 1000 };

			nanosleep(&ts, NULL);
		}
	}
}

/* The client's indices, checked into the graph's copies on pprpc's stream
 * before the run (gge_graph_shadow), their report into *fault (NULL: no
 * checks).  The record is the generation's in FAULT_RING; if its last
 * reader has not run, the checks wait for cb_stream's completions so far
 * (the reader is among them or ahead on stream). */
static int enqueue_checks(struct gge_cuda_stream *s, const struct gge_graph *gg, struct kern_index_fault **fault,
			  char *err, size_t errlen)
{
	char why[200] = "";
	int n = gg->ngpu_checks;
	unsigned k;
	bool busy;
	cudaError_t e;

	*fault = NULL;
	if (!gg->gpu_ready) {
		snprintf(err, errlen, "%s: the graph's index checks are not set up for the GPU", s->cs->name);
		return PPRPC_EINTERNAL;
	}
	if (!n)
		return 0;
	/* (0 is the claim word's first value: never a generation) */
	if (++s->gen == 0)
		s->gen = 1;
	k = s->gen % FAULT_RING;
	pthread_mutex_lock(&s->plock);
	busy = s->fault_users[k]++ > 0;
	pthread_mutex_unlock(&s->plock);
	/* from here the caller gives the record back (take_fault) */
	*fault = &s->fault[k];
	if (busy && ((e = cudaEventRecord(s->cb_ev, s->cb_stream)) != cudaSuccess ||
		     (e = cudaStreamWaitEvent(s->stream, s->cb_ev, 0)) != cudaSuccess))
		return cuda_fail(s->cs, e, "an event (a check report's reader)", err, errlen);
	if (kern_cuda_index_check(s->stream, gg->gpu_checks, n, s->fault_dev + k, s->claim, s->gen, why,
				  sizeof(why)) < 0) {
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
	struct kern_index_fault *fault = NULL;
	struct pend *pd;
	bool early, followed, aside;
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
	if ((rc = enqueue_checks(s, gg, &fault, err, errlen)) < 0)
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
	/* A SEND queued behind the run puts its output into the next stage's
	 * slot from the stream: this thread must be free to enqueue it now,
	 * not after the run (the completion then comes from the callbacks). */
	followed = g->run_follow && atomic_load(g->run_follow) > 0;
	if (quiet(s) && !followed) {
		/* The checks ran before the graph (it waited for them). */
		ggml_backend_synchronize(s->be);
		pthread_mutex_lock(&s->plock);
		rc = take_fault(s, fault, gg, 0, &w, why, sizeof(why));
		pthread_mutex_unlock(&s->plock);
		done(arg, rc, w);
		return 0;
	}
	ggml_backend_event_record(s->ev_out, s->be);
	if ((e = cudaStreamWaitEvent(s->stream, (cudaEvent_t)s->ev_out->context, 0)) != cudaSuccess) {
		rc = cuda_fail(cs, e, "event wait", err, errlen);
		goto fail;
	}
	/* Behind a held RECV and no timeline WAIT: nothing here must act for
	 * the run to end, so the worker may look for its end (finish_early). */
	pthread_mutex_lock(&s->plock);
	early = s->nlands > 0 && s->nwaits == 0 && !followed;
	aside = s->nlands > 0 || followed;
	pthread_mutex_unlock(&s->plock);
	if (early && cudaEventRecord(s->ev_done, s->stream) != cudaSuccess) {
		cudaGetLastError();
		early = false;
	}
	pd = pend_new(s, PEND_AFTER, gg, done, arg, err, errlen);
	if (!pd) {
		rc = PPRPC_ENOMEM;
		goto fail;
	}
	pd->fault = fault;
	pd->aside = aside;
	rc = pend_submit(s, pd, NULL, 0, err, errlen);
	if (rc < 0)
		goto fail;
	if (early)
		finish_early(s);
	return 0;
fail:
	/* The checks may have run: what they report belongs to no run.  Their
	 * record's last reader may be on cb_stream still: the drop goes behind
	 * it there. */
	if (!fault)
		return rc;
	pd = pend_new(s, PEND_AFTER, NULL, NULL, NULL, why, sizeof(why));
	if (pd)
		pd->fault = fault, pd->aside = true;
	if (!pd || pend_submit(s, pd, NULL, 0, why, sizeof(why)) < 0) {
		pthread_mutex_lock(&s->plock);
		take_fault(s, fault, NULL, 0, NULL, NULL, 0);
		pthread_mutex_unlock(&s->plock);
	}
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

/* A landing slot's part on the stream (kind PEND_LAND or PEND_PUT): the
 * bell and the slot are in a landing page, page-locked and mapped for this
 * device.  PPRPC_EUNSUPP: nothing enqueued. */
static int land_pend_submit(struct gge_cuda_stream *s, enum pend_kind kind, volatile uint64_t *bell, uint64_t gen,
			    void *dst, const void *src, uint64_t n, device_done_fn done, void *arg, char *err,
			    size_t errlen)
{
	struct pend *pd;
	int rc;

	if (!s->cs->lands) {
		snprintf(err, errlen, "%s: the device does not use page-locked memory at its host address",
			 s->cs->name);
		return PPRPC_EUNSUPP;
	}
	if ((rc = use(s->cs, err, errlen)) < 0)
		return rc;
	pd = pend_new(s, kind, NULL, done, arg, err, errlen);
	if (!pd)
		return PPRPC_ENOMEM;
	pd->land.bell = bell, pd->land.gen = gen, pd->land.dst = dst, pd->land.src = src, pd->land.n = n;
	return pend_submit(s, pd, NULL, 0, err, errlen);
}

/* A RECV held on the GPU (daemon/xfer/dest.c): the stream waits for the
 * landing slot's bell, copies the slot into the region and completes; the
 * run behind it waits for this stream (ahead).  The bell and the slot are
 * in the destination's landing page; another process rings the bell, or
 * the daemon's loop when the bytes do not come. */
static int gcs_land_submit(void *sctx, const volatile uint64_t *bell, uint64_t gen, void *dst, const void *src,
			   uint64_t n, device_done_fn done, void *arg, char *err, size_t errlen)
{
	struct gge_cuda_stream *s = sctx;
	/* (the stream only reads the bell: the cast serves PEND_PUT's field) */
	int rc = land_pend_submit(s, PEND_LAND, (volatile uint64_t *)bell, gen, dst, src, n, done, arg, err, errlen);

	/* Unless refused outright the stream may hold on the bell (on a
	 * failure before anything was enqueued the extra order costs nothing). */
	if (rc != PPRPC_EUNSUPP)
		s->ahead = true;
	return rc;
}

/* A SEND into a landing slot behind a run (daemon/xfer/source.c): the
 * stream copies the run's output into the destination's slot and rings its
 * bell itself, so neither this daemon's threads nor CUDA's callback are on
 * the path from the run's end to the next stage.  The slot and the bell are
 * in the destination's page, page-locked and mapped here (land_open). */
static int gcs_land_put_submit(void *sctx, volatile uint64_t *bell, uint64_t gen, void *dst, const void *src,
			       uint64_t n, device_done_fn done, void *arg, char *err, size_t errlen)
{
	return land_pend_submit(sctx, PEND_PUT, bell, gen, dst, src, n, done, arg, err, errlen);
}

const struct stream_i gge_cuda_stream_i = {
	.graph_submit = gcs_graph_submit,
	.wait_submit = gcs_wait_submit,
	.write_submit = gcs_write_submit,
	.land_submit = gcs_land_submit,
	.land_put_submit = gcs_land_put_submit,
};

#endif /* PPRPC_HAVE_CUDA */
