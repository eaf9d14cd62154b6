/*
 * daemon/device/device.c — a device: its backend (opened through the
 * registry), its queue, and the calls into the backend's interfaces
 * (see device.h, backend_impl.h).
 */
#include "daemon/device/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/device/backend_impl.h"
#include "daemon/core/hostmem.h"
#include "daemon/exec/queue.h"
#include "daemon/core/staging.h"
#include "daemon/exec/stream.h"
#include "pprpc/types.h"

#define MIB (1024.0 * 1024.0)

/* The backend's tables with stubs for absent optional ops (stubs.c). */
struct device_backend {
	struct device_i dev;
	void *dev_ctx;
	struct buffer_i buf;
	void *buf_ctx;
	struct stream_i stream;
	struct device_props props;
	bool ipc;                 /* the buffers have the IPC ops */
	bool adopts;              /* the buffers have the adopt op */
};

bool device_spec_known(const char *spec)
{
	const char *arg;

	return backend_find(spec, &arg) != NULL;
}

bool device_spec_may_be_absent(const char *spec)
{
	const char *arg;
	const struct backend_reg *r = backend_find(spec, &arg);

	return r && r->may_be_absent;
}

const char *device_spec_names(void)
{
	return backend_names();
}

int device_open(uv_loop_t *loop, const char *spec, uint32_t index, const struct device_conf *conf,
		struct device **ret_dev, char *err, size_t errlen)
{
	const struct backend_reg *reg;
	struct backend_dev bd = { 0 };
	struct device *d = NULL;
	const char *arg;
	char qname[16];
	int rc;

	reg = backend_find(spec, &arg);
	if (!reg) {
		snprintf(err, errlen, "unknown device '%s' (%s)", spec, backend_names());
		return PPRPC_EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d || !(d->be = calloc(1, sizeof(*d->be)))) {
		free(d);
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	d->index = index;
	d->floor = conf->floor;
	rc = reg->open(d, arg, conf, &bd, err, errlen);
	if (rc < 0) {
		free(d->be);
		free(d);
		return rc;
	}
	/* The backend exists from here: its destroy cleans up. */
	d->be->dev_ctx = bd.dev_ctx;
	d->be->buf_ctx = bd.buf_ctx;
	d->be->ipc = bd.buf->ipc_export != NULL;
	d->be->adopts = bd.buf->adopt != NULL;
	rc = backend_fill(&bd, &d->be->dev, &d->be->buf, &d->be->stream, err, errlen);
	if (rc < 0) {
		bd.dev->destroy(bd.dev_ctx);
		goto fail;
	}
	d->be->dev.get_props(d->be->dev_ctx, &d->be->props);
	snprintf(d->name, sizeof(d->name), "%s", d->be->props.name);
	/* Host-visible memory is host memory: its buffers are committed under
	 * the one host floor (issue 27.10). */
	d->hostmem = d->be->props.host_visible ? conf->hostmem : NULL;
	snprintf(d->desc, sizeof(d->desc), "%s", d->be->props.desc);
	/* a thread name: 15 characters at most */
	snprintf(qname, sizeof(qname), "q-%.13s", d->name);
	rc = queue_create(loop, qname, &d->q);
	if (rc < 0) {
		snprintf(err, errlen, "cannot start the queue of %s", spec);
		d->be->dev.destroy(d->be->dev_ctx);
		goto fail;
	}
	*ret_dev = d;
	return 0;
fail:
	free(d->be);
	free(d);
	return rc;
}

void device_stop(struct device *d)
{
	if (d && d->q) {
		queue_destroy(d->q);
		d->q = NULL;
	}
}

void device_close(struct device *d)
{
	if (!d)
		return;
	device_stop(d);
	if (d->ipc_staging) {
		uint64_t bytes = d->ipc_staging->bytes;

		staging_fini(d->ipc_staging);
		free(d->ipc_staging);
		d->be->buf.free(d->be->buf_ctx, d->ipc_mem, bytes);
	}
	d->be->dev.destroy(d->be->dev_ctx);
	free(d->be);
	free(d);
}

/* ---- properties ------------------------------------------------------------------ */

const char *device_kind(const struct device *d) { return d->be->props.kind; }
const struct device_info *device_info(const struct device *d) { return &d->be->props.info; }

int device_gdn_report(const struct device *d, struct device_gdn_report *ret)
{
	return d->be->dev.gdn_report(d->be->dev_ctx, ret);
}
bool device_host_visible(const struct device *d) { return d->be->props.host_visible; }
bool device_adopts(const struct device *d) { return d->be->adopts && d->be->props.host_visible; }
bool device_holds_waits(const struct device *d) { return d->be->props.holds_waits; }
bool device_completes_inline(const struct device *d) { return d->be->props.completes_inline; }
bool device_holds_lands(const struct device *d) { return d->be->props.holds_lands; }

uint64_t device_graph_flop_max(const struct device *d, int64_t setting)
{
	uint64_t g = setting > 0 ? (uint64_t)setting : d->be->props.graph_gflop_auto;

	if (setting == 0)
		return 0;
	if (!g)
		g = DEVICE_GRAPH_GFLOP_FALLBACK;
	return g > UINT64_MAX / 1000000000ull ? UINT64_MAX : g * 1000000000ull;
}

void device_waits_status(const struct device *d, char *buf, size_t len)
{
	const struct device_props *p = &d->be->props;

	if (p->holds_waits)
		snprintf(buf, len, "on");
	else if (p->waits_why[0])
		snprintf(buf, len, "off: %.180s", p->waits_why);
	else
		snprintf(buf, len, "%s", "");
}

int device_mem_info(struct device *d, uint64_t *ret_free, uint64_t *ret_total)
{
	return d->be->dev.mem_info(d->be->dev_ctx, ret_free, ret_total);
}

/* ---- buffers ------------------------------------------------------------------------ */

int device_alloc_reserve(struct device *d, uint64_t size, char *err, size_t errlen)
{
	uint64_t fr = 0, total = 0;
	int rc = device_mem_info(d, &fr, &total);

	if (rc < 0) {
		snprintf(err, errlen, "%s: cannot read free memory", d->name);
		return rc;
	}
	if (size > fr || fr - size < d->floor) {
		snprintf(err, errlen,
			 "%s: allocating %.1f MiB would leave %.1f MiB free, below the memory floor of %.1f MiB (free now %.1f MiB)",
			 d->name, size / MIB, size > fr ? 0.0 : (fr - size) / MIB, d->floor / MIB, fr / MIB);
		return PPRPC_EFLOOR;
	}
	/* counted now: the next check, before the memory exists, sees it */
	d->allocated += size;
	hostmem_commit(d->hostmem, size);
	return 0;
}

void device_alloc_unreserve(struct device *d, uint64_t size)
{
	d->allocated -= size;
	hostmem_uncommit(d->hostmem, size);
}

int device_alloc_raw(struct device *d, uint64_t size, void **ret_ptr)
{
	return d->be->buf.alloc(d->be->buf_ctx, size, ret_ptr);
}

int device_alloc(struct device *d, uint64_t size, void **ret_ptr, char *err, size_t errlen)
{
	int rc = device_alloc_reserve(d, size, err, errlen);

	if (rc < 0)
		return rc;
	rc = device_alloc_raw(d, size, ret_ptr);
	if (rc < 0) {
		device_alloc_unreserve(d, size);
		snprintf(err, errlen, "%s: allocation of %.1f MiB failed", d->name, size / MIB);
	}
	return rc;
}

void device_free(struct device *d, void *ptr, uint64_t size)
{
	if (!ptr)
		return;
	d->be->buf.free(d->be->buf_ctx, ptr, size);
	d->allocated -= size;
	hostmem_uncommit(d->hostmem, size);
}

int device_fill(struct device *d, void *dst, int value, uint64_t n)
{
	return d->be->buf.fill(d->be->buf_ctx, dst, value, n);
}

int device_copy(struct device *d, void *dst, const void *src, uint64_t n)
{
	return d->be->buf.copy(d->be->buf_ctx, dst, src, n);
}

int device_upload(struct device *d, void *dst, const void *src, uint64_t n)
{
	return d->be->buf.upload(d->be->buf_ctx, dst, src, n);
}

int device_download(struct device *d, void *dst, const void *src, uint64_t n)
{
	return d->be->buf.download(d->be->buf_ctx, dst, src, n);
}

int device_download_lend(struct device *d, const void *src, uint64_t n, void **ret_host)
{
	return d->be->buf.download_lend(d->be->buf_ctx, src, n, ret_host);
}

void device_download_return(struct device *d, void *host)
{
	d->be->buf.download_return(d->be->buf_ctx, host);
}

bool device_has_ipc(const struct device *d)
{
	return d->be->ipc;
}

int device_ipc_pool(struct device *d, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err, size_t errlen)
{
	return d->be->buf.ipc_export(d->be->buf_ctx, bytes, ret_ptr, handle, err, errlen);
}

int device_ipc_copy(struct device *d, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
		    size_t errlen)
{
	return d->be->buf.ipc_copy(d->be->buf_ctx, dst, handle, off, n, err, errlen);
}

int device_ipc_wait(struct device *d, char *err, size_t errlen)
{
	return d->be->buf.ipc_wait(d->be->buf_ctx, err, errlen);
}

int device_adopt(struct device *d, void *ptr, uint64_t size, char *err, size_t errlen)
{
	if (!device_adopts(d)) {
		snprintf(err, errlen, "%s cannot take mapped host memory as a buffer", d->name);
		return PPRPC_EUNSUPP;
	}
	return d->be->buf.adopt(d->be->buf_ctx, ptr, size, err, errlen);
}

/* Nothing was reserved for it (device_adopt): the hold alone goes. */
void device_unadopt(struct device *d, void *ptr, uint64_t size)
{
	d->be->buf.free(d->be->buf_ctx, ptr, size);
}

int device_pin_host(struct device *d, void *ptr, uint64_t bytes, int on)
{
	return d->be->buf.pin_host(d->be->buf_ctx, ptr, bytes, on);
}

/* ---- streams and events ------------------------------------------------------------------ */

/* The device stream of s, opened on first use (worker thread). */
static int stream_ctx(struct device *d, struct stream *s, void **ret_sctx, char *err, size_t errlen)
{
	if (!s->dev_stream) {
		int rc = d->be->dev.stream_open(d->be->dev_ctx, &s->dev_stream, err, errlen);

		if (rc < 0)
			return rc;
	}
	*ret_sctx = s->dev_stream;
	return 0;
}

void device_stream_release(struct device *d, struct stream *s)
{
	if (s->dev_stream && d)
		d->be->dev.stream_close(d->be->dev_ctx, s->dev_stream);
	s->dev_stream = NULL;
}

int device_graph_submit(struct device *d, struct stream *s, struct graph *g, device_done_fn done, void *arg,
			char *err, size_t errlen)
{
	void *sctx;
	int rc = stream_ctx(d, s, &sctx, err, errlen);

	return rc < 0 ? rc : d->be->stream.graph_submit(sctx, g, done, arg, err, errlen);
}

int device_wait_submit(struct device *d, struct stream *s, volatile uint64_t *slot, device_done_fn done, void *arg,
		       char *err, size_t errlen)
{
	void *sctx;
	int rc = stream_ctx(d, s, &sctx, err, errlen);

	return rc < 0 ? rc : d->be->stream.wait_submit(sctx, slot, done, arg, err, errlen);
}

int device_write_submit(struct device *d, struct stream *s, volatile uint64_t *slot, uint64_t value,
			device_done_fn done, void *arg, char *err, size_t errlen)
{
	void *sctx;
	int rc = stream_ctx(d, s, &sctx, err, errlen);

	return rc < 0 ? rc : d->be->stream.write_submit(sctx, slot, value, done, arg, err, errlen);
}

int device_land_submit(struct device *d, struct stream *s, const volatile uint64_t *bell, uint64_t gen, void *dst,
		       const void *src, uint64_t n, device_done_fn done, void *arg, char *err, size_t errlen)
{
	void *sctx;
	int rc = stream_ctx(d, s, &sctx, err, errlen);

	return rc < 0 ? rc : d->be->stream.land_submit(sctx, bell, gen, dst, src, n, done, arg, err, errlen);
}

int device_land_put_submit(struct device *d, struct stream *s, volatile uint64_t *bell, uint64_t gen, void *dst,
			   const void *src, uint64_t n, device_done_fn done, void *arg, char *err, size_t errlen)
{
	void *sctx;
	int rc = stream_ctx(d, s, &sctx, err, errlen);

	return rc < 0 ? rc : d->be->stream.land_put_submit(sctx, bell, gen, dst, src, n, done, arg, err, errlen);
}

int device_slot_alloc(struct device *d, volatile uint64_t **ret_slot)
{
	return d->be->dev.slot_alloc(d->be->dev_ctx, ret_slot);
}

void device_slot_free(struct device *d, volatile uint64_t *slot)
{
	if (slot)
		d->be->dev.slot_free(d->be->dev_ctx, slot);
}

/* ---- graphs ------------------------------------------------------------------------ */

bool device_takes_wire(const struct device *d, int wire, char *err, size_t errlen)
{
	unsigned w = d->be->props.graph_wires;

	if (wire >= 0 && wire < DEVICE_WIRES && (w & (1u << wire)))
		return true;
	/* what the client should have sent, or where */
	if (wire == DEVICE_WIRE_GGML)
		snprintf(err, errlen, "device %u (%s) is not a ggml device (serve one with --devices ggml:NAME)", d->index,
			 d->name);
	else if (w & (1u << DEVICE_WIRE_GGML))
		snprintf(err, errlen, "%s runs ggml graphs (GGML_GRAPH_CREATE), not native ones", d->name);
	else
		snprintf(err, errlen, "%s runs no native graphs", d->name);
	return false;
}

int device_graph_begin(struct device *d, int wire, const void *msg, const struct device_graph_env *env,
		       struct graph *g, void **ret_job, char *err, size_t errlen)
{
	if (!device_takes_wire(d, wire, err, errlen))
		return PPRPC_EUNSUPP;
	return d->be->dev.graph_begin(d->be->dev_ctx, wire, msg, env, g, ret_job, err, errlen);
}

void device_graph_build(struct device *d, void *job)
{
	d->be->dev.graph_build(d->be->dev_ctx, job);
}

int device_graph_finish(struct device *d, void *job, char *err, size_t errlen)
{
	return d->be->dev.graph_finish(d->be->dev_ctx, job, err, errlen);
}

void device_graph_drop(struct device *d, void *job)
{
	d->be->dev.graph_drop(d->be->dev_ctx, job);
}

int device_graph_supports(struct device *d, int wire, const void *msg, const struct device_graph_env *env,
			  bool *ret_ok, char *why, size_t whylen)
{
	if (!device_takes_wire(d, wire, why, whylen))
		return PPRPC_EUNSUPP;
	return d->be->dev.graph_supports(d->be->dev_ctx, wire, msg, env, ret_ok, why, whylen);
}

int device_graph_alloc_size(struct device *d, int wire, const void *msg, const struct device_graph_env *env,
			    uint64_t *ret_size, char *err, size_t errlen)
{
	if (!device_takes_wire(d, wire, err, errlen))
		return PPRPC_EUNSUPP;
	return d->be->dev.graph_alloc_size(d->be->dev_ctx, wire, msg, env, ret_size, err, errlen);
}

void device_graph_release(struct device *d, struct graph *g)
{
	d->be->dev.graph_release(d->be->dev_ctx, g);
}

uint64_t device_graph_scratch(struct device *d, const struct graph *g)
{
	return d->be->dev.graph_scratch(d->be->dev_ctx, g);
}
