/*
 * daemon/exec/stream.h — one connection's view of one device queue.
 *
 * Errors are sticky per stream: once a queued command of this connection
 * fails on this device, its later commands there are skipped (not run on bad
 * state) until a FENCE reports the first failure and clears it.  Keeping the
 * state per connection means one client's failure never poisons another
 * client sharing the device.
 *
 * Ownership: err* fields are written under the device queue's lock, by the
 * worker (a command failed, FENCE reports and clears) or by the thread that
 * completes a pending device command; the loop reads them only while
 * inflight == 0, when that lock has ordered every write before the last
 * completion.  inflight is
 * loop-only; canceled is set by the loop and read by the worker.
 */
#ifndef PPRPC_DAEMON_STREAM_H
#define PPRPC_DAEMON_STREAM_H

#include <stdatomic.h>
#include <stdint.h>

struct qreq;

struct stream {
	int err;
	char errmsg[200];
	uint64_t err_cmd;
	uint16_t err_type;
	uint64_t inflight;
	atomic_int canceled;
	uint64_t blocked_scan;   /* worker: scan in which this stream's head was not ready */
	/* commands handed to the device and not completed (queue lock; read
	 * atomically by exec) */
	atomic_int pending;
	/* of them, RECVs held on the GPU (qcmd.held) and the memory they
	 * write, [held_lo, held_hi) (queue lock) */
	int held;
	uintptr_t held_lo, held_hi;
	/* SENDs queued that may take a run's output on the device (a landing
	 * slot filled and rung by the GPU, xfer/source.c): counted on the loop
	 * from their push to their release; a run's submit reads it after its
	 * launch (graph.h: run_follow) */
	atomic_int follow;
	/* the backend's stream context (backend_impl.h: a CUDA stream with its
	 * workspace; the CPU's kernel context), opened by the worker on first
	 * use, closed when the connection is freed */
	void *dev_stream;
	/* A FENCE waiting on the loop for the commands in flight before it
	 * (qreq.c; counted in inflight): it is settled on the loop when they
	 * have completed, or pushed behind them when a command follows it. */
	struct qreq *fence;
};

/* Nothing of this stream is queued or failed: a command may take a fast
 * path around the queue (loop thread). */
static inline int stream_idle(const struct stream *s)
{
	return s->inflight == 0 && s->err == 0;
}

#endif
