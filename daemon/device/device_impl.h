/*
 * daemon/device/device_impl.h — the device backend vtable (ggml_backend_i-like).
 * Optional operations are marked; absent ones point to a stub returning
 * PPRPC_EUNSUPP so callers never test for NULL.
 */
#ifndef PPRPC_DAEMON_DEVICE_IMPL_H
#define PPRPC_DAEMON_DEVICE_IMPL_H

#include "daemon/device/device.h"

struct device_ops {
	const char *kind;
	bool host_visible;
	int (*mem_info)(struct device *d, uint64_t *ret_free, uint64_t *ret_total);
	int (*alloc)(struct device *d, uint64_t size, void **ret_ptr);
	void (*free)(struct device *d, void *ptr, uint64_t size);
	int (*fill)(struct device *d, void *dst, int value, uint64_t n);
	int (*copy)(struct device *d, void *dst, const void *src, uint64_t n);
	/* host memory <-> device memory (the same memcpy on the CPU device) */
	int (*upload)(struct device *d, void *dst_dev, const void *src_host, uint64_t n);
	int (*download)(struct device *d, void *dst_host, const void *src_dev, uint64_t n);
	int (*graph_run)(struct device *d, struct graph *g, char *err, size_t errlen);
	/* optional: drop per-graph backend state (g->dev_priv) */
	void (*graph_release)(struct device *d, struct graph *g);
	/* optional (CUDA IPC, all or none): ipc_pool allocates device memory
	 * other processes of this host may read and exports it (handle:
	 * DEVICE_IPC_HANDLE bytes); ipc_copy starts copying n bytes at off of
	 * another process's exported pool into dst; ipc_wait waits for the
	 * copies started. */
	int (*ipc_pool)(struct device *d, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err, size_t errlen);
	int (*ipc_copy)(struct device *d, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
			size_t errlen);
	int (*ipc_wait)(struct device *d, char *err, size_t errlen);
	/*
	 * optional, asynchronous backends (all or none; device.async says
	 * whether they work here).  Each pprpc stream gets its own device
	 * stream (stream_open on first use, stream_close when its connection
	 * is gone; the backend may keep it for reuse).  The *_submit calls
	 * queue work on it and return at once: 0, and done(arg, status, why)
	 * runs exactly once on a backend thread when the device finished it
	 * (status < 0 when it failed there); or a negative code with err, and
	 * done never runs.  wait_submit holds the stream until *slot != 0
	 * (slot NULL: nothing to wait for, only done); write_submit stores
	 * value in *slot from the stream.  Slots are host memory the device
	 * reads and writes, from slot_alloc.
	 */
	int (*stream_open)(struct device *d, void **ret_ds, char *err, size_t errlen);
	void (*stream_close)(struct device *d, void *ds);
	int (*graph_submit)(struct device *d, void *ds, struct graph *g, device_done_fn done, void *arg, char *err,
			    size_t errlen);
	int (*wait_submit)(struct device *d, void *ds, volatile uint64_t *slot, device_done_fn done, void *arg,
			   char *err, size_t errlen);
	int (*write_submit)(struct device *d, void *ds, volatile uint64_t *slot, uint64_t value, device_done_fn done,
			    void *arg, char *err, size_t errlen);
	int (*slot_alloc)(struct device *d, volatile uint64_t **ret_slot);
	void (*slot_free)(struct device *d, volatile uint64_t *slot);
	/* optional: page-lock host memory for fast copies with every device
	 * of this kind (on = 0 undoes it); 0 or a negative code. */
	int (*pin_host)(struct device *d, void *ptr, uint64_t bytes, int on);
	void (*destroy)(struct device *d);
};

void device_graph_release_none(struct device *d, struct graph *g);

/* Backends. */
int cpu_device_create(struct device **ret_dev, int threads, char *err, size_t errlen);
/* Boundary transfers between CPU daemons of one host by cross-memory
 * attach (the IPC ops; dev_cpu.c). */
void cpu_device_enable_ipc(struct device *d);
/* CUDA device `ordinal`; PPRPC_EUNSUPP in a build without CUDA, PPRPC_EDEVICE
 * (with the CUDA reason) when it cannot run here. */
int cuda_device_create(struct device **ret_dev, int ordinal, int use_graphs, char *err, size_t errlen);
/* The ggml device called name (ggml_backend_dev_name, e.g. "CPU", "CUDA0"),
 * served by ggml's own backend with at most threads threads
 * (daemon/backend/ggml/dev_ggml.c).  PPRPC_EUNSUPP in a build without ggml,
 * PPRPC_EINVAL (listing the names there are) for an unknown name. */
int ggml_device_create(struct device **ret_dev, const char *name, int threads, char *err, size_t errlen);

#endif
