/* daemon/server/affinity.h — pin threads to CPU sets (see affinity.c). */
#ifndef PPRPC_DAEMON_AFFINITY_H
#define PPRPC_DAEMON_AFFINITY_H

#include <pthread.h>
#include <stddef.h>

#include "daemon/server/options.h"

/* Pin the calling thread (the event loop). */
int affinity_apply_loop(const struct cpu_affinity *a, char *err, size_t errlen);
/* Pin a device worker thread and the BLAS pool. */
int affinity_apply_worker(const struct cpu_affinity *a, pthread_t t, char *err, size_t errlen);
/* "loop=0 cpu=1-3": the masks threads really have. */
void affinity_describe(pthread_t loop, const pthread_t *workers, const char *const *names, int n, char *buf,
		       size_t len);

#endif
