/*
 * daemon/server/metrics.h — Prometheus text exposition over plain HTTP
 * (--metrics-listen HOST:PORT): per-device memory, queue depth, commands,
 * errors, graph creates/runs, per-boundary transfers, per-connection
 * transport and bytes.
 */
#ifndef PPRPC_DAEMON_METRICS_H
#define PPRPC_DAEMON_METRICS_H

#include <stddef.h>

struct pprpcd;

int metrics_start(struct pprpcd *d, char *err, size_t errlen);
void metrics_stop(struct pprpcd *d);
/* The exposition text (malloc'd, NUL-terminated) or NULL. */
char *metrics_render(struct pprpcd *d);

#endif
