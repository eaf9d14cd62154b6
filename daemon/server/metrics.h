/*
 * daemon/server/metrics.h — Prometheus text exposition over plain HTTP
 * (--metrics-listen HOST:PORT): per-device memory, queue depth, commands,
 * errors, graph creates/runs, per-boundary transfers, per-connection
 * transport and bytes.  At most 16 requests are served at once, each
 * closed after hello-timeout-ms at the latest.
 */
#ifndef PPRPC_DAEMON_METRICS_H
#define PPRPC_DAEMON_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct pprpcd;

/* Listen on metrics-listen.  A non-loopback address needs insecure-listen
 * (HTTP requests carry no proof of the key). */
int metrics_start(struct pprpcd *d, char *err, size_t errlen);
/* The same policy alone, before the devices are opened (start-up order:
 * a daemon that may not listen stops at once). */
int metrics_check(struct pprpcd *d, char *err, size_t errlen);
void metrics_stop(struct pprpcd *d);
/* Close requests older than hello-timeout-ms (the periodic tick). */
void metrics_expire(struct pprpcd *d, uint64_t now_ms);
/* The exposition text (malloc'd, NUL-terminated) or NULL. */
char *metrics_render(struct pprpcd *d);

#endif
