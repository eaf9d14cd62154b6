/*
 * daemon/exec/queue.h — a device's command queue.
 *
 * One worker thread owns the device's execution (memcached-style: work
 * reaches it through a locked list plus a condition variable).  Completed
 * commands go back to the event loop through uv_async_send; the loop drains
 * every completed command on each wake-up, because async sends coalesce.
 * The one exception: small work the loop runs itself while the device is
 * idle (queue_run_inline), with the worker kept out meanwhile, because two
 * thread hand-offs cost more than the work.
 *
 * Order is kept per stream (one connection on one device), not across the
 * whole device: commands of different connections arrive on different
 * sockets, in no defined order, so a device-wide order would let one
 * connection's WAIT sit in front of the SIGNAL of another connection that
 * it waits for — a deadlock.  A command that cannot run yet (a WAIT whose
 * value is not reached, a RECV with no new bytes) says so through ready();
 * the worker then runs other streams' commands and sleeps only when no
 * stream can move.  Whoever makes a command ready (a SIGNAL, a peer's
 * notification, arriving bytes, a cancellation) kicks the queue.
 */
#ifndef PPRPC_DAEMON_QUEUE_H
#define PPRPC_DAEMON_QUEUE_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/core/trace.h"

struct stream;

struct qcmd {
	struct qcmd *next;
	/* Runs on the worker thread (or the loop: queue_run_inline); returns 0
	 * or a negative code and may fill
	 * err, or QCMD_AGAIN after partial progress (it is run again when
	 * ready).  NULL for a pure marker. */
	int (*exec)(struct qcmd *c);
	/* optional, worker thread, under the queue lock: can exec make
	 * progress now?  NULL = always. */
	int (*ready)(struct qcmd *c);
	/* Runs on the loop thread after exec, with status set. */
	void (*done)(struct qcmd *c);
	struct stream *stream;   /* sticky-error scope; NULL: none */
	uint64_t req_id;         /* for error reports */
	uint16_t type;
	uint8_t sticky;          /* a failure marks the stream failed */
	uint8_t fence;           /* report and clear the stream's failure */
	/* May run while earlier commands of its stream are still pending on
	 * the device (pure device work queued behind them on the same device
	 * stream).  Every other command waits until its stream has nothing
	 * pending, so host-side work never overtakes device-side work. */
	uint8_t async_ok;
	uint8_t state;           /* queue.c: where the command is (under the lock) */
	/* Order within a stream may give way where it cannot be seen: a
	 * command that waits for bytes from elsewhere (a RECV: QPASS_LETS)
	 * lets later commands of its stream that only write other memory
	 * (TENSOR_SETs: QPASS_GOES) run first, so a decoded token's inputs are
	 * in place before its boundary's bytes come, not after.  The memory
	 * each writes: [rgn_lo, rgn_hi). */
	uint8_t pass;
	uintptr_t rgn_lo, rgn_hi;
	/* Set by exec before it returns QCMD_PENDING: a RECV whose bytes the
	 * device waits for on its stream (daemon/xfer/dest.c).  The writes
	 * that may pass a waiting RECV (QPASS_GOES, other memory) may run
	 * while it is pending, and while nothing else of the stream is. */
	uint8_t held;
	uint8_t load;            /* a loading client's (core/request.h): exec time counts as load too */
	int status;
	/* CLOCK_MONOTONIC ns of the first exec's start and the last one's end
	 * (0: never executed), for the request trace (core/trace.h): written
	 * by the executing thread, read on the loop in done() */
	uint64_t t_start, t_end;
	uint64_t t_mark[TRACE_MARKS]; /* the last exec's phase marks (core/trace.h), 0: none */
	uint64_t fail_cmd;       /* fence: the command that failed */
	uint16_t fail_type;
	char err[256];
};

enum { QPASS_NONE, QPASS_LETS, QPASS_GOES };

#define QCMD_AGAIN 1
/* exec handed the command to its device stream: it completes through
 * queue_complete(), from any thread — later (CUDA's callback thread), or
 * before exec even returned (a stream that completes inline: the CPU).
 * Only for async_ok commands. */
#define QCMD_PENDING 2

struct queue;

int queue_create(uv_loop_t *loop, const char *name, struct queue **ret_q);
/* Enqueue (loop thread).  done() is always called, also at shutdown. */
void queue_push(struct queue *q, struct qcmd *c);
/*
 * Run c now on the calling thread (the loop) instead of pushing it, when
 * the device is idle: nothing waiting or pending, the worker not running a
 * command (a marker, with no exec, is always taken).  Returns 1 when c was taken — done() has run already, unless c
 * was left pending on the device or turned out not ready (it then completes
 * as a pushed command would) — or 0: the caller pushes it.  For small work
 * only: the loop serves every connection meanwhile.  The caller ensures
 * nothing of c's stream is in flight (completions keep issue order).
 */
int queue_run_inline(struct queue *q, struct qcmd *c);
/* Nothing of s waits in the queue or runs on the worker (its commands in
 * flight, if any, are pending on the device or completed, their done()
 * not run yet).  A command that waits may depend on what follows it in
 * the queue (a SEND streams in place while nothing does): loop thread. */
int queue_stream_quiet(struct queue *q, const struct stream *s);
/* Time spent inside exec, by command type (qcmd.type; types past the
 * table count under 0): on the worker or inline on the loop, so for a
 * device that completes inline (the CPU, ggml devices) a command's whole
 * execution, for one that queues on the GPU only the enqueueing.  A WAIT
 * or RECV that is not ready is not executed: its wait is not in here. */
#define QUEUE_EXEC_TYPES 40
struct queue_exec_time {
	uint64_t execs;   /* exec calls (QCMD_AGAIN ones included) */
	uint64_t ns;
	uint64_t load_execs;  /* of them, commands with qcmd.load */
	uint64_t load_ns;
};
void queue_exec_times(const struct queue *q, struct queue_exec_time *ret);
/* A count that changes with every push and kick (any thread): a command
 * that polls in its exec goes back to the queue when it moves. */
uint64_t queue_activity(const struct queue *q);
/* Until until_ns (util_now_ns), an idle worker looks for work instead of
 * sleeping: a client's next requests are due (server/wake_ahead.c).  Any
 * thread; replaces the last setting. */
void queue_spin_until(struct queue *q, uint64_t until_ns);
/* How many turns an idle worker took looking for work so far (one per 64
 * checks): moves only inside such a window, however loaded the host. */
uint64_t queue_spin_turns(const struct queue *q);
/* A command that sleeps in its exec on a futex word (a landing page's,
 * daemon/xfer/land.h: another process wakes it too) names it here while
 * it sleeps: every push and kick then adds 1 to it and wakes it, so the
 * worker comes back for other work.  NULL when it is done sleeping. */
void queue_set_wake_word(struct queue *q, _Atomic uint32_t *word);
/* Commands pushed and not yet completed on the loop. */
uint64_t queue_depth(const struct queue *q);
pthread_t queue_thread(const struct queue *q);
/* Completion of a QCMD_PENDING command (any thread, exactly once): status
 * 0 or a negative code, why (may be NULL) its reason.  Completions of one
 * stream must arrive in the order the commands were issued (one device
 * stream runs them in order). */
void queue_complete(struct queue *q, struct qcmd *c, int status, const char *why);
/* Commands of s handed to the device and not completed (any thread). */
int queue_stream_pending(const struct stream *s);
/* Something a waiting command depends on changed: re-check (any thread). */
void queue_kick(struct queue *q);
/* Stop the worker after it finished what is queued and every pending
 * command completed; join it, run the
 * remaining completions and close the async handle. */
void queue_destroy(struct queue *q);

#endif
