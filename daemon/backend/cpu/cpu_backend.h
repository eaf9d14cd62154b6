/*
 * daemon/backend/cpu/cpu_backend.h — the CPU backend's insides, shared by its
 * device (cpu_device.c), buffers (cpu_buffer.c) and stream (cpu_stream.c).
 */
#ifndef PPRPC_DAEMON_CPU_BACKEND_H
#define PPRPC_DAEMON_CPU_BACKEND_H

#include "daemon/device/backend_impl.h"
#include "daemon/core/hostmem.h"

/* The device context; it is also the buffer type's and every stream's: the
 * CPU has one memory and one place to run, the device's worker thread. */
struct cpu_dev {
	struct device *dev;         /* the daemon's device: name, statistics */
	struct kern_cpu_ctx kctx;   /* kernel threads; kctx.gdn_stats -> dev->gdn_stats */
	struct hostmem *hostmem;    /* the daemon's host memory accounting, or NULL */
};

extern const struct buffer_i cpu_buffer_i;
/* The same, with cross-memory attach for boundaries between CPU daemons of
 * one host (cpu-ipc). */
extern const struct buffer_i cpu_buffer_ipc_i;
extern const struct stream_i cpu_stream_i;

#endif
