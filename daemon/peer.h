/*
 * daemon/peer.h — links to other ranks, and the remote timelines we wait on.
 *
 * A WAIT on a timeline of another rank is served by a mirror (struct rtl):
 * the daemon connects to that rank on first use (role peer), sends
 * SUBSCRIBE(timeline, value), and the owner answers once the value is
 * reached — a notification, never polling.  The answer raises the mirror's
 * value and wakes the waiting worker.  A lost link fails every mirror that
 * depended on it (their WAITs fail with PPRPC_ECONN instead of hanging); the
 * next WAIT on that rank connects again.
 */
#ifndef PPRPC_DAEMON_PEER_H
#define PPRPC_DAEMON_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/timeline.h"

struct pprpcd;
struct peer;

struct rtl {
	struct tl_cell cell;     /* guarded by the timeline lock */
	char rank[64];
	uint64_t handle;
	uint64_t requested;      /* highest value subscribed so far */
	int refs;                /* queued WAITs + outstanding subscriptions + the table */
	struct peer *peer;       /* NULL once the link failed */
	struct rtl *next;        /* d->mirrors */
};

/* A mirror of timeline handle at rank, subscribed up to at least value;
 * returns it referenced, or NULL with a reason in err. */
struct rtl *peer_mirror_get(struct pprpcd *d, const char *rank, uint64_t handle, uint64_t value,
			    char *err, size_t errlen);
void peer_mirror_unref(struct pprpcd *d, struct rtl *m);
/* Shutdown: close every link. */
void peer_close_all(struct pprpcd *d);

#endif
