/* daemon/device/device.c — device registry and vtable dispatch (see device.h). */
#include "daemon/device/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/device/device_impl.h"
#include "daemon/exec/queue.h"
#include "daemon/exec/staging.h"
#include "daemon/exec/stream.h"
#include "pprpc/types.h"

#define MIB (1024.0 * 1024.0)

int device_open(uv_loop_t *loop, const char *spec, uint32_t index, uint64_t floor, int threads,
		int cuda_graphs, struct device **ret_dev, char *err, size_t errlen)
{
	struct device *d = NULL;
	char qname[16];
	int rc;

	if (strcmp(spec, "cpu") == 0) {
		rc = cpu_device_create(&d, threads, err, errlen);
	} else if (strncmp(spec, "cuda:", 5) == 0 && spec[5] >= '0' && spec[5] <= '9') {
		rc = cuda_device_create(&d, atoi(spec + 5), cuda_graphs, err, errlen);
	} else if (strncmp(spec, "ggml:", 5) == 0 && spec[5]) {
		rc = ggml_device_create(&d, spec + 5, threads, err, errlen);
	} else {
		snprintf(err, errlen, "unknown device '%s' (cpu, cuda:N, ggml:NAME)", spec);
		return PPRPC_EINVAL;
	}
	if (rc < 0)
		return rc;
	d->index = index;
	d->floor = floor;
	snprintf(qname, sizeof(qname), "q-%s", spec);
	rc = queue_create(loop, qname, &d->q);
	if (rc < 0) {
		snprintf(err, errlen, "cannot start the queue of %s", spec);
		d->ops->destroy(d);
		return rc;
	}
	*ret_dev = d;
	return 0;
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
		d->ops->free(d, d->ipc_mem, bytes);
	}
	d->ops->destroy(d);
}

const char *device_kind(const struct device *d) { return d->ops->kind; }
bool device_is_ggml(const struct device *d) { return strcmp(d->ops->kind, "ggml") == 0; }
bool device_host_visible(const struct device *d) { return d->ops->host_visible; }

int device_mem_info(struct device *d, uint64_t *ret_free, uint64_t *ret_total)
{
	return d->ops->mem_info(d, ret_free, ret_total);
}

int device_alloc(struct device *d, uint64_t size, void **ret_ptr, char *err, size_t errlen)
{
	uint64_t fr = 0, total = 0;
	int rc = d->ops->mem_info(d, &fr, &total);

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
	rc = d->ops->alloc(d, size, ret_ptr);
	if (rc < 0) {
		snprintf(err, errlen, "%s: allocation of %.1f MiB failed", d->name, size / MIB);
		return rc;
	}
	d->allocated += size;
	return 0;
}

void device_free(struct device *d, void *ptr, uint64_t size)
{
	if (!ptr)
		return;
	d->ops->free(d, ptr, size);
	d->allocated -= size;
}

int device_fill(struct device *d, void *dst, int value, uint64_t n) { return d->ops->fill(d, dst, value, n); }
int device_copy(struct device *d, void *dst, const void *src, uint64_t n) { return d->ops->copy(d, dst, src, n); }
int device_upload(struct device *d, void *dst, const void *src, uint64_t n) { return d->ops->upload(d, dst, src, n); }
int device_download(struct device *d, void *dst, const void *src, uint64_t n) { return d->ops->download(d, dst, src, n); }

bool device_has_ipc(const struct device *d)
{
	return d->ipc_enabled && d->ops->ipc_pool && d->ops->ipc_copy && d->ops->ipc_wait;
}

int device_ipc_pool(struct device *d, uint64_t bytes, void **ret_ptr, uint8_t *handle, char *err, size_t errlen)
{
	if (!device_has_ipc(d)) {
		snprintf(err, errlen, "%s: no CUDA IPC", d->name);
		return PPRPC_EUNSUPP;
	}
	return d->ops->ipc_pool(d, bytes, ret_ptr, handle, err, errlen);
}

int device_ipc_copy(struct device *d, void *dst, const uint8_t *handle, uint64_t off, uint64_t n, char *err,
		    size_t errlen)
{
	if (!device_has_ipc(d)) {
		snprintf(err, errlen, "%s: no CUDA IPC", d->name);
		return PPRPC_EUNSUPP;
	}
	return d->ops->ipc_copy(d, dst, handle, off, n, err, errlen);
}

int device_pin_host(struct device *d, void *ptr, uint64_t bytes, int on)
{
	return d->ops->pin_host ? d->ops->pin_host(d, ptr, bytes, on) : PPRPC_EUNSUPP;
}

int device_ipc_wait(struct device *d, char *err, size_t errlen)
{
	return device_has_ipc(d) ? d->ops->ipc_wait(d, err, errlen) : PPRPC_EUNSUPP;
}

int device_graph_run(struct device *d, struct graph *g, char *err, size_t errlen)
{
	return d->ops->graph_run(d, g, err, errlen);
}

void device_graph_release_none(struct device *d, struct graph *g)
{
	(void)d;
	(void)g;
}

void device_graph_release(struct device *d, struct graph *g)
{
	(d->ops->graph_release ? d->ops->graph_release : device_graph_release_none)(d, g);
}

/* ---- asynchronous devices -------------------------------------------------- */

int device_stream(struct device *d, struct stream *s, void **ret_ds, char *err, size_t errlen)
{
	int rc;

	if (!d->async) {
		snprintf(err, errlen, "%s: no asynchronous execution", d->name);
		return PPRPC_EUNSUPP;
	}
	if (!s->dev_stream) {
		rc = d->ops->stream_open(d, &s->dev_stream, err, errlen);
		if (rc < 0)
			return rc;
	}
	*ret_ds = s->dev_stream;
	return 0;
}

void device_stream_release(struct device *d, struct stream *s)
{
	if (s->dev_stream && d && d->ops->stream_close)
		d->ops->stream_close(d, s->dev_stream);
	s->dev_stream = NULL;
}

int device_graph_submit(struct device *d, struct stream *s, struct graph *g, device_done_fn done, void *arg,
			char *err, size_t errlen)
{
	void *ds;
	int rc = device_stream(d, s, &ds, err, errlen);

	return rc < 0 ? rc : d->ops->graph_submit(d, ds, g, done, arg, err, errlen);
}

int device_wait_submit(struct device *d, struct stream *s, volatile uint64_t *slot, device_done_fn done, void *arg,
		       char *err, size_t errlen)
{
	void *ds;
	int rc = device_stream(d, s, &ds, err, errlen);

	return rc < 0 ? rc : d->ops->wait_submit(d, ds, slot, done, arg, err, errlen);
}

int device_write_submit(struct device *d, struct stream *s, volatile uint64_t *slot, uint64_t value,
			device_done_fn done, void *arg, char *err, size_t errlen)
{
	void *ds;
	int rc = device_stream(d, s, &ds, err, errlen);

	return rc < 0 ? rc : d->ops->write_submit(d, ds, slot, value, done, arg, err, errlen);
}

int device_slot_alloc(struct device *d, volatile uint64_t **ret_slot)
{
	return d->async ? d->ops->slot_alloc(d, ret_slot) : PPRPC_EUNSUPP;
}

void device_slot_free(struct device *d, volatile uint64_t *slot)
{
	if (slot)
		d->ops->slot_free(d, slot);
}
