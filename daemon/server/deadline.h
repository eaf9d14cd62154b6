/*
 * daemon/server/deadline.h — drain-ms as a promise.
 *
 * Shutdown waits for the device workers, and a worker in the middle of a
 * kernel does not stop until the kernel returns (issue 19.9: with drain-ms
 * 2000 a SIGTERM took 53 s behind one ATTENTION).  So when shutdown
 * begins, a thread of its own is armed: if the process is still there
 * drain-ms plus a short grace for the teardown (DEADLINE_GRACE_MS) after
 * the signal, it logs and ends the process with _exit(0), whatever still
 * runs.  A kernel running then is abandoned mid-way: its output buffers
 * are left half written, which no client will see (every connection is
 * closed by then); the process's memory goes back to the system, and on a
 * GPU the driver tears the context down with the process.
 */
#ifndef PPRPC_DAEMON_DEADLINE_H
#define PPRPC_DAEMON_DEADLINE_H

#include <stdint.h>

struct pprpcd;

#define DEADLINE_GRACE_MS 500

/* The process ends at the latest ms from now (plus the grace).  Arming
 * again can only bring the deadline closer.  0, or a negative code when
 * no thread could be started (then shutdown waits as before). */
int deadline_arm(struct pprpcd *d, uint64_t ms);

#endif
