/*
 * daemon/core/trace.h — the request trace (setting trace-file): where the
 * time of each request goes, hop by hop, for one token's diagnosis
 * (bench/llama-vs-rpc/token-trace.py merges it with the client's).
 *
 * Off by default and then free: d->trace is NULL and every call site tests
 * that pointer first.  When on, events are fixed-size records appended to
 * an in-memory array on the loop thread only — the exec times measured on
 * worker threads travel in the command itself (qcmd.t_start/t_end) and are
 * recorded when its completion reaches the loop, so no lock is needed — and
 * the periodic tick (and exit) formats them into the file.  A full array
 * drops records and counts them; the file says how many.
 *
 * The file (one line per event, '#' lines are comments):
 *   # pprpcd trace v1 pid PID listen HOST:PORT
 *   T_NS PID CONN ROLE TYPE REQ_ID EVENT
 * T_NS: CLOCK_MONOTONIC in ns; CONN: the daemon's connection id (c12);
 * ROLE: client or peer (peer: another rank's link); TYPE: the message type
 * name (GRAPH_RUN); EVENT: arrive (the whole frame read), exec_start and
 * exec_end (on the device queue, for a queued request), done (its
 * completion back on the loop), reply (a reply frame handed to the
 * transport; a request may have several: parts).  Between exec_start and
 * exec_end a device may mark where its own phases ended (trace_mark):
 * exec_ready (what precedes the launch: uploads settled, index checks
 * queued) and exec_launched (the work is on the device; what follows is
 * the wait for it) — a graph run's host cost apart from its GPU time.
 */
#ifndef PPRPC_DAEMON_CORE_TRACE_H
#define PPRPC_DAEMON_CORE_TRACE_H

#include <stddef.h>
#include <stdint.h>

struct pprpcd;
struct conn;

enum trace_event {
	TRACE_ARRIVE,
	TRACE_EXEC_START,
	TRACE_EXEC_END,
	TRACE_DONE,
	TRACE_REPLY,
	TRACE_EXEC_READY,
	TRACE_EXEC_LAUNCHED,
	TRACE_EVENTS
};

/* Phase marks inside one exec, by the thread executing it: kept in that
 * thread's storage (no lock), taken by the queue after exec returns and
 * carried in the command like exec_start/end.  Free when tracing is off
 * (one load of a flag). */
enum trace_mark_kind { TRACE_MARK_READY, TRACE_MARK_LAUNCHED, TRACE_MARKS };
void trace_mark(int kind);
/* The marks the calling thread made since the last take (0: none), cleared. */
void trace_marks_take(uint64_t out[TRACE_MARKS]);

struct trace;

/* Open path for writing (truncated) and write its header.  0, or a
 * negative code with the reason in err. */
int trace_open(const char *path, const char *listen, struct trace **ret_t, char *err, size_t errlen);
/* Write the records kept so far (the tick; loop thread). */
void trace_flush(struct trace *t);
/* Flush, say how many records were dropped, close.  NULL is fine. */
void trace_close(struct trace *t);
uint64_t trace_now_ns(void);

/* Record an event of request (type, req_id) of connection c at t_ns
 * (loop thread).  Callers test d->trace first: nothing is done when off. */
void trace_req(struct pprpcd *d, const struct conn *c, uint16_t type, uint64_t req_id, int event,
	       uint64_t t_ns);

#endif
