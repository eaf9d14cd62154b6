/*
 * pprpc_pipeline.h — optional: a fill-drain pipeline of micro-batches over
 * stages (one graph per stage and rank), issued asynchronously and ordered
 * with timelines (libclient/pipeline.c).
 */
#ifndef PPRPC_PIPELINE_H
#define PPRPC_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "pprpc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A pipeline of S stages, each a graph on one rank, fed M micro-batches.
 * Each stage has two slots (double-buffered boundaries): slot k's graph
 * reads in_buf[k] and writes out_buf[k] (offset 0, in_bytes / out_bytes).
 * Stage s's output of micro-batch m becomes stage s+1's input of
 * micro-batch m, so stage s's out_bytes must equal stage s+1's in_bytes.
 *
 * Schedule (fill-drain, forward only): micro-batch m uses slot m % 2.  On
 * the p2p path (the default), per micro-batch on stage s's queue: [WAIT]
 * RECV(in slot, from stage s-1; SET of the input on stage 0) RUN(slot)
 * SIGNAL(done_s = m+1) SEND(out slot, to stage s+1; GET on the last
 * stage): boundaries go daemon to daemon, everything is queued at once and
 * the caller blocks only for the last stage's outputs.  On the client path
 * the boundary travels through the caller: stage s's GET(out slot) is
 * relayed by a SET(in slot) on stage s+1.  The caller then blocks only where
 * it needs those bytes, so every stage has its next micro-batch queued
 * while the previous one's boundary is in flight.  Before blocking on stage
 * s-1's GET of m (queued behind a WAIT on stage s), the caller first takes
 * stage s's output of m-2, which is complete by then in a healthy run; if
 * stage s failed, that GET reports it, instead of the caller hanging behind
 * a WAIT whose SIGNAL was skipped.
 *
 * Micro-batches may differ: opts.plan can give each (stage, micro-batch)
 * its own graph and boundary sizes up to the stage's in_bytes / out_bytes —
 * a prompt's ragged last ubatch, or attention graphs built per n_past.
 *
 * Write-after-read ordering: before stage s (not the last) runs micro-batch
 * m >= 2 into slot m % 2, its queue WAITs until stage s+1's done timeline
 * says micro-batch m-2 was consumed (a cross-rank WAIT when the two stages
 * live on different daemons).  Together with the in-order queues (the GET
 * of m precedes the RUN of m+2 on stage s; the RUN of m-2 precedes the SET
 * of m on stage s+1) no slot is overwritten while it is still read, and no
 * stage runs more than two micro-batches ahead of the next one (which also
 * bounds the daemons' staging memory). */
typedef struct pprpc_stage {
	pprpc_client *client;      /* connection to the stage's rank */
	const char *rank;          /* that rank's HOST:PORT (for cross-rank waits) */
	uint32_t device;
	pprpc_graph graph[2];      /* graph of slot k: in_buf[k] -> out_buf[k] */
	pprpc_buffer in_buf[2];
	pprpc_buffer out_buf[2];
	uint64_t in_bytes;         /* boundary sizes (input of this stage / output); */
	uint64_t out_bytes;        /* with opts.plan: the largest of any micro-batch */
} pprpc_stage;

typedef struct pprpc_pipeline pprpc_pipeline;

/* What an observer learns when a stage finished one micro-batch (times:
 * CLOCK_MONOTONIC nanoseconds, measured by the client). */
typedef struct pprpc_pipeline_event {
	int stage, micro, slot;
	uint64_t issue_ns;         /* the stage's commands for the micro-batch were issued */
	uint64_t done_ns;          /* its output bytes had arrived, or (data NULL) the
				    * poll saw the stage's run done */
	const void *data;          /* those bytes (a relay buffer, or outputs[m] for the
				    * last stage); valid during the callback only; NULL
				    * for a boundary that never reached the caller */
	uint64_t bytes;
} pprpc_pipeline_event;

/* What stage `stage` runs for micro-batch `micro`: pprpc_pipeline_run fills
 * it with the stage's defaults (graph[slot], in_bytes, out_bytes), then
 * opts.plan may change it. */
typedef struct pprpc_micro_plan {
	pprpc_graph graph;         /* must read in_buf[slot] and write out_buf[slot] */
	uint64_t in_bytes;         /* 1 .. the stage's in_bytes */
	uint64_t out_bytes;        /* 1 .. the stage's out_bytes */
} pprpc_micro_plan;

/* How boundary tensors travel between stages. */
enum pprpc_transfer {
	PPRPC_TRANSFER_P2P = 0,     /* SEND/RECV daemon to daemon (default) */
	PPRPC_TRANSFER_CLIENT = 1,  /* through the client: GET then SET (exact fallback) */
};

typedef struct pprpc_pipeline_opts {
	/* PPRPC_TRANSFER_P2P unless the environment says PPRPC_P2P=0.  P2P
	 * falls back to the client path automatically when a stage's daemon
	 * cannot reach the previous stage's (probed at create); the reason is
	 * given by pprpc_pipeline_transfer. */
	int transfer;
	/* Optional: called by pprpc_pipeline_run for every (stage, micro-batch)
	 * before anything is issued, with slot = the slot the micro-batch uses;
	 * returns 0, or a negative code that refuses the run.  The sizes must
	 * chain (stage s's out_bytes = stage s+1's in_bytes of the same
	 * micro-batch).  May be NULL: every micro-batch is the default. */
	int (*plan)(void *arg, int stage, int micro, int slot, pprpc_micro_plan *plan);
	void *plan_arg;
	/* Optional: called from pprpc_pipeline_run, in the caller's thread, once
	 * per (stage, micro-batch) when that output arrived — for traces and
	 * for checking every boundary.  May be NULL.  On the p2p path only the
	 * last stage's outputs arrive, unless observe_poll_us > 0. */
	void (*observe)(void *arg, const pprpc_pipeline_event *ev);
	void *observe_arg;
	/* p2p path, with observe: > 0 makes pprpc_pipeline_run poll every
	 * stage's done timeline this often (microseconds) while it waits, so
	 * the observer also hears when the other stages finished each
	 * micro-batch (data NULL).  For traces: it costs client CPU and one
	 * request per stage per poll.  0: no polling. */
	int observe_poll_us;
} pprpc_pipeline_opts;

/* Check the stages and create one "done" timeline per stage (on the stage's
 * device); stages and opts are copied (rank strings too).  opts may be NULL.
 * Errors: PPRPC_EINVAL (no stages, NULL client, zero sizes, boundary sizes
 * that do not chain, a missing rank where a cross-rank wait is needed),
 * PPRPC_ENOMEM, or a timeline_create failure (message in that stage's
 * pprpc_last_error). */
PPRPC_API int pprpc_pipeline_create(const pprpc_stage *stages, int nstages,
				    const pprpc_pipeline_opts *opts, pprpc_pipeline **out);
/* Destroy the timelines (the clients stay open; the caller owns them).
 * NULL is accepted. */
PPRPC_API void pprpc_pipeline_free(pprpc_pipeline *p);
/* Run M micro-batches through the stages with the fill-drain schedule:
 * inputs[m] (stage 0's in_bytes of micro-batch m) go in, outputs[m] (the
 * last stage's out_bytes of m) come back.  A plan that does not fit or
 * chain refuses the run with PPRPC_EINVAL before anything is issued.  Returns 0 when all are done and every queue
 * finished without error.  On a failure it stops issuing, releases every
 * queued WAIT (by destroying the timelines, which are then created again),
 * drains and synchronizes every stage (clearing their sticky errors), and
 * returns the first failure's code; pprpc_pipeline_error says which stage
 * and call (for a failed queued command: the daemon's report of it).
 * outputs are then unspecified.  The pipeline may be run again. */
PPRPC_API int pprpc_pipeline_run(pprpc_pipeline *p, int nmicro, const void *const *inputs,
				 void *const *outputs);
/* The path boundaries take ("p2p" or "client"); when p2p was asked for and
 * not used, *ret_reason says why (else it is set to ""). */
PPRPC_API const char *pprpc_pipeline_transfer(const pprpc_pipeline *p, const char **ret_reason);
/* Bytes of boundary tensors that passed through this process so far (0 on
 * the p2p path). */
PPRPC_API uint64_t pprpc_pipeline_client_bytes(const pprpc_pipeline *p);
/* Message for the pipeline's last failure (which stage, which call); "" if
 * none. */
PPRPC_API const char *pprpc_pipeline_error(const pprpc_pipeline *p);

#ifdef __cplusplus
}
#endif
#endif
