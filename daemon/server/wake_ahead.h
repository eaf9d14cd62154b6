/*
 * daemon/server/wake_ahead.h — the event loop and the devices' workers
 * awake when a client's next requests are due (setting wake-ahead).
 *
 * A decoding client sends a rank its requests in bursts at a steady pace
 * (a token's WAIT, inputs, GRAPH_RUN every few ms); between bursts the
 * loop and the workers sleep, and on some hosts a thread woken from sleep
 * takes 20 to 160 us to run (bench/wake-probe.c), twice on the token's
 * path (the loop that reads, the worker that runs).  The loop learns the
 * pace (util/expect.h) and, around the time the next burst is due, it and
 * the workers look for work without sleeping.
 */
#ifndef PPRPC_DAEMON_SERVER_WAKE_AHEAD_H
#define PPRPC_DAEMON_SERVER_WAKE_AHEAD_H

#include <stdint.h>

struct pprpcd;

/* Windows opened, bursts that came inside one (STATS, the log at exit). */
struct wake_ahead_stats {
	uint64_t windows;
	uint64_t hits;
};

/* At start, after the devices: d->wake, or NULL when the setting is off
 * or no timer could be made (logged; the daemon runs without). */
void wake_ahead_start(struct pprpcd *d);
/* A client's frame arrived (the loop; not a peer's). */
void wake_ahead_frame(struct pprpcd *d);
void wake_ahead_stats_get(const struct pprpcd *d, struct wake_ahead_stats *ret);
/* At stop: the handles closed, freed in their close callbacks. */
void wake_ahead_stop(struct pprpcd *d);

#endif
