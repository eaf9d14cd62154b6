/*
 * daemon/device/stubs.c — the stand-ins for absent optional backend ops, and
 * the copy of a backend's tables that puts them in (rdma-core's dummy_ops.c
 * and verbs_set_ops(), in small).
 */
#include <stdio.h>

#include "daemon/device/backend_impl.h"
#include "pprpc/types.h"

static int slot_alloc_unsupp(void *ctx, volatile uint64_t **ret_slot)
{
	(void)ctx, (void)ret_slot;
	return PPRPC_EUNSUPP;
}

static void slot_free_none(void *ctx, volatile uint64_t *slot)
{
	(void)ctx, (void)slot;
}

static void graph_release_none(void *ctx, struct graph *g)
{
	(void)ctx, (void)g;
}

static uint64_t graph_scratch_none(void *ctx, const struct graph *g)
{
	(void)ctx, (void)g;
	return 0;
}

static int graph_begin_unsupp(void *ctx, int wire, const void *msg, const struct device_graph_env *env,
			      struct graph *g, void **ret_job, char *err, size_t errlen)
{
	(void)ctx, (void)wire, (void)msg, (void)env, (void)g, (void)ret_job;
	snprintf(err, errlen, "the device runs no graphs");
	return PPRPC_EUNSUPP;
}

static void graph_job_none(void *ctx, void *job)
{
	(void)ctx, (void)job;
}

static int graph_finish_unsupp(void *ctx, void *job, char *err, size_t errlen)
{
	(void)ctx, (void)job;
	snprintf(err, errlen, "the device runs no graphs");
	return PPRPC_EUNSUPP;
}

static int graph_supports_unsupp(void *ctx, int wire, const void *msg, const struct device_graph_env *env,
				 bool *ret_ok, char *why, size_t whylen)
{
	(void)ctx, (void)wire, (void)msg, (void)env, (void)ret_ok;
	snprintf(why, whylen, "the device answers no supports probe");
	return PPRPC_EUNSUPP;
}

static int graph_alloc_size_unsupp(void *ctx, int wire, const void *msg, const struct device_graph_env *env,
				   uint64_t *ret_size, char *err, size_t errlen)
{
	(void)ctx, (void)wire, (void)msg, (void)env, (void)ret_size;
	snprintf(err, errlen, "the device answers no alloc-size probe");
	return PPRPC_EUNSUPP;
}

static int gdn_report_unsupp(void *ctx, struct device_gdn_report *ret)
{
	(void)ctx, (void)ret;
	return PPRPC_EUNSUPP;
}

static int ipc_export_unsupp(void *ctx, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err, size_t errlen)
{
	(void)ctx, (void)bytes, (void)ret_ptr, (void)handle;
	snprintf(err, errlen, "the device has no IPC");
	return PPRPC_EUNSUPP;
}

static int ipc_copy_unsupp(void *ctx, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
			   size_t errlen)
{
	(void)ctx, (void)dst, (void)handle, (void)off, (void)n;
	snprintf(err, errlen, "the device has no IPC");
	return PPRPC_EUNSUPP;
}

static int ipc_wait_unsupp(void *ctx, char *err, size_t errlen)
{
	(void)ctx;
	snprintf(err, errlen, "the device has no IPC");
	return PPRPC_EUNSUPP;
}

static int adopt_unsupp(void *ctx, void *ptr, uint64_t size, char *err, size_t errlen)
{
	(void)ctx, (void)ptr, (void)size;
	snprintf(err, errlen, "the device cannot take mapped host memory as a buffer");
	return PPRPC_EUNSUPP;
}

static int pin_host_unsupp(void *ctx, void *ptr, uint64_t bytes, int on)
{
	(void)ctx, (void)ptr, (void)bytes, (void)on;
	return PPRPC_EUNSUPP;
}

static int download_lend_unsupp(void *ctx, const void *src, uint64_t n, void **ret_host)
{
	(void)ctx, (void)src, (void)n, (void)ret_host;
	return PPRPC_EUNSUPP;
}

static void download_return_none(void *ctx, void *host)
{
	(void)ctx, (void)host;
}

static int land_submit_unsupp(void *sctx, const volatile uint64_t *bell, uint64_t gen, void *dst, const void *src,
			      uint64_t n, device_done_fn done, void *arg, char *err, size_t errlen)
{
	(void)sctx, (void)bell, (void)gen, (void)dst, (void)src, (void)n, (void)done, (void)arg;
	snprintf(err, errlen, "the device's streams do not hold a RECV on its landing slot");
	return PPRPC_EUNSUPP;
}

static int land_put_submit_unsupp(void *sctx, volatile uint64_t *bell, uint64_t gen, void *dst, const void *src,
				  uint64_t n, device_done_fn done, void *arg, char *err, size_t errlen)
{
	(void)sctx, (void)bell, (void)gen, (void)dst, (void)src, (void)n, (void)done, (void)arg;
	snprintf(err, errlen, "the device's streams do not put a SEND into a landing slot");
	return PPRPC_EUNSUPP;
}

#define NEED(table, op)                                                             \
	do {                                                                        \
		if (!(table)->op) {                                                 \
			snprintf(err, errlen, "backend bug: no " #table "." #op); \
			return PPRPC_EINTERNAL;                                     \
		}                                                                   \
	} while (0)
#define STUB(table, op, stub)               \
	do {                                \
		if (!(table)->op)           \
			(table)->op = stub; \
	} while (0)

int backend_fill(const struct backend_dev *be, struct device_i *dev, struct buffer_i *buf, struct stream_i *stream,
		 char *err, size_t errlen)
{
	int nipc, ngraph;

	*dev = *be->dev;
	*buf = *be->buf;
	*stream = *be->stream;
	NEED(dev, get_props);
	NEED(dev, mem_info);
	NEED(dev, stream_open);
	NEED(dev, stream_close);
	NEED(dev, destroy);
	NEED(buf, alloc);
	NEED(buf, free);
	NEED(buf, fill);
	NEED(buf, copy);
	NEED(buf, upload);
	NEED(buf, download);
	NEED(stream, graph_submit);
	NEED(stream, wait_submit);
	NEED(stream, write_submit);
	/* Events come as a pair, IPC as a triple: half of either is a bug. */
	if (!dev->slot_alloc != !dev->slot_free) {
		snprintf(err, errlen, "backend bug: slot_alloc and slot_free go together");
		return PPRPC_EINTERNAL;
	}
	nipc = !!buf->ipc_export + !!buf->ipc_copy + !!buf->ipc_wait;
	if (nipc != 0 && nipc != 3) {
		snprintf(err, errlen, "backend bug: ipc_export, ipc_copy and ipc_wait go together");
		return PPRPC_EINTERNAL;
	}
	if (!buf->download_lend != !buf->download_return) {
		snprintf(err, errlen, "backend bug: download_lend and download_return go together");
		return PPRPC_EINTERNAL;
	}
	/* A create is all four steps or none. */
	ngraph = !!dev->graph_begin + !!dev->graph_build + !!dev->graph_finish + !!dev->graph_drop;
	if (ngraph != 0 && ngraph != 4) {
		snprintf(err, errlen, "backend bug: graph_begin, graph_build, graph_finish and graph_drop go together");
		return PPRPC_EINTERNAL;
	}
	STUB(dev, graph_begin, graph_begin_unsupp);
	STUB(dev, graph_build, graph_job_none);
	STUB(dev, graph_finish, graph_finish_unsupp);
	STUB(dev, graph_drop, graph_job_none);
	STUB(dev, graph_supports, graph_supports_unsupp);
	STUB(dev, graph_alloc_size, graph_alloc_size_unsupp);
	STUB(dev, slot_alloc, slot_alloc_unsupp);
	STUB(dev, slot_free, slot_free_none);
	STUB(dev, graph_release, graph_release_none);
	STUB(dev, graph_scratch, graph_scratch_none);
	STUB(dev, gdn_report, gdn_report_unsupp);
	STUB(buf, ipc_export, ipc_export_unsupp);
	STUB(buf, ipc_copy, ipc_copy_unsupp);
	STUB(buf, ipc_wait, ipc_wait_unsupp);
	STUB(buf, pin_host, pin_host_unsupp);
	STUB(buf, adopt, adopt_unsupp);
	STUB(buf, download_lend, download_lend_unsupp);
	STUB(buf, download_return, download_return_none);
	STUB(stream, land_submit, land_submit_unsupp);
	STUB(stream, land_put_submit, land_put_submit_unsupp);
	return 0;
}
