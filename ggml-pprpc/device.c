/*
 * ggml-pprpc/device.c — one ggml device per served ggml device of a rank.
 *
 * The device is of GPU type whatever the rank runs it on (ggml-cpu or
 * ggml-cuda): it is memory that is not this process's, reached through a
 * queue, which is what ggml means by a GPU.  So `-ngl` offloads layers to
 * it, and with several such devices, every layer offloaded and `-sm layer`,
 * llama.cpp turns on pipeline parallelism — given async and events, which
 * are reported exactly when the rank offers them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

static struct pg_device *dev_of(ggml_backend_dev_t dev)
{
	return dev->context;
}

static const char *dev_get_name(ggml_backend_dev_t dev)
{
	return dev_of(dev)->name;
}

static const char *dev_get_description(ggml_backend_dev_t dev)
{
	return dev_of(dev)->desc;
}

/* Free and total memory as the rank sees them now (STATS). */
static void dev_get_memory(ggml_backend_dev_t dev, size_t *free_b, size_t *total_b)
{
	struct pg_device *d = dev_of(dev);
	struct pg_rank *r = d->rank;
	pprpc_stats *s = NULL;
	int rc, n;

	/* Never throws: llama.cpp asks for memory when it prints its breakdown
	 * at exit too.  A rank that cannot answer has nothing free. */
	*free_b = 0;
	*total_b = 0;
	if (pg_fault_failed(r->fault))
		return;
	pg_lock(r);
	rc = r->dead ? PPRPC_ECONN : pg_rank_stats(r, &s);
	if (rc < 0) {
		char line[1200];

		snprintf(line, sizeof(line), "rank %d %s (%s) device %s: STATS: %s", r->index, r->name, r->addr,
			 d->name, r->dead ? r->dead_why : pprpc_last_error(r->c));
		pg_unlock(r);
		if (r->dead)
			pg_fault_raise(r->fault, "%s", line);
		else
			PG_LOG_ERROR("pprpc: %s\n", line);
		return;
	}
	n = pprpc_stats_count(s, "devices");
	for (int i = 0; i < n; i++) {
		uint64_t fr = pprpc_stats_u64(s, "devices", i, "info.free_bytes");
		uint64_t fl = pprpc_stats_u64(s, "devices", i, "info.floor_bytes");

		if (pprpc_stats_u64(s, "devices", i, "info.index") == d->index) {
			/* what may still be allocated: above the rank's memory floor */
			*free_b = fr > fl ? (size_t)(fr - fl) : 0;
			*total_b = (size_t)pprpc_stats_u64(s, "devices", i, "info.total_bytes");
		}
	}
	pprpc_stats_free(s);
	pg_unlock(r);
}

static enum ggml_backend_dev_type dev_get_type(ggml_backend_dev_t dev)
{
	(void)dev;
	return GGML_BACKEND_DEVICE_TYPE_GPU;
}

static void dev_get_props(ggml_backend_dev_t dev, struct ggml_backend_dev_props *props)
{
	struct pg_device *d = dev_of(dev);

	props->name = d->name;
	props->description = d->desc;
	props->type = GGML_BACKEND_DEVICE_TYPE_GPU;
	props->device_id = NULL;
	dev_get_memory(dev, &props->memory_free, &props->memory_total);
	props->caps.async = d->async;
	props->caps.host_buffer = pg_host_buft(d) != NULL;
	/* llama.cpp's weights over its mapped model, where the rank can map
	 * its own copy of it (weights.c) */
	props->caps.buffer_from_host_ptr = pg_weights_rank_has_model(d);
	props->caps.events = d->async;
	/* weights are read from the mapped file and sent: mmap is fine */
	props->caps.mmap_support = true;
}

static ggml_backend_t dev_init_backend(ggml_backend_dev_t dev, const char *params)
{
	(void)params;
	return pg_backend_new(dev_of(dev));
}

static ggml_backend_buffer_type_t dev_get_buffer_type(ggml_backend_dev_t dev)
{
	return &dev_of(dev)->buft;
}

static ggml_backend_buffer_type_t dev_get_host_buffer_type(ggml_backend_dev_t dev)
{
	return pg_host_buft(dev_of(dev));
}

static bool dev_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor *op)
{
	struct pg_device *d = dev_of(dev);
	int ok;

	pg_lock(d->rank);
	pg_check_alive(d->rank, d->name, "GGML_SUPPORTS");
	ok = pg_supports_op(d, op);
	pg_unlock(d->rank);
	return ok;
}

static bool dev_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft)
{
	/* only its own buffers: a graph runs on one device's memory */
	return buft == &dev_of(dev)->buft;
}

const struct ggml_backend_device_i pg_device_iface = {
	.get_name = dev_get_name,
	.get_description = dev_get_description,
	.get_memory = dev_get_memory,
	.get_type = dev_get_type,
	.get_props = dev_get_props,
	.init_backend = dev_init_backend,
	.get_buffer_type = dev_get_buffer_type,
	.get_host_buffer_type = dev_get_host_buffer_type,
	.buffer_from_host_ptr = pg_buffer_from_host_ptr,
	.supports_op = dev_supports_op,
	.supports_buft = dev_supports_buft,
	.offload_op = NULL,
	.event_new = pg_event_new,
	.event_free = pg_event_free,
	.event_synchronize = pg_event_synchronize,
};

void pg_dev_info_get(const pprpc_stats *s, int i, struct pg_dev_info *di)
{
	di->index = (uint32_t)pprpc_stats_u64(s, "devices", i, "info.index");
	di->name = pprpc_stats_str(s, "devices", i, "info.name");
	di->kind = pprpc_stats_str(s, "devices", i, "info.kind");
	di->description = pprpc_stats_str(s, "devices", i, "info.description");
	di->ggml_version = pprpc_stats_str(s, "devices", i, "info.ggml_version");
	di->ggml_alignment = pprpc_stats_u64(s, "devices", i, "info.ggml_alignment");
	di->ggml_max_size = pprpc_stats_u64(s, "devices", i, "info.ggml_max_size");
	di->maps_files = pprpc_stats_u64(s, "devices", i, "info.maps_files") != 0;
}

int pg_device_create(struct pg_registry *reg, struct pg_rank *r, const struct pg_dev_info *di, int ggml_index,
		     struct pg_device **ret_dev, char *err, size_t errlen)
{
	struct pg_device *d = calloc(1, sizeof(*d));
	pprpc_caps caps;

	if (!d) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	d->rank = r;
	d->index = di->index;
	snprintf(d->name, sizeof(d->name), "PPRPC%d", ggml_index);
	snprintf(d->rdev, sizeof(d->rdev), "%s", di->name);
	/* "pprpc rank0 10.0.0.1:50052 ggml:CUDA0 (NVIDIA H200)": which rank, which device */
	if (*di->description)
		snprintf(d->desc, sizeof(d->desc), "pprpc %s %s %s (%s)", r->name, r->addr, d->rdev, di->description);
	else
		snprintf(d->desc, sizeof(d->desc), "pprpc %s %s %s", r->name, r->addr, d->rdev);
	d->alignment = di->ggml_alignment ? di->ggml_alignment : 32;
	d->max_size = di->ggml_max_size;
	d->maps_files = di->maps_files;
	pprpc_get_caps(r->c, &caps);
	d->async = caps.async && caps.events;
	d->create_run = caps.ggml_create_run;
	if (di->ggml_alignment & (di->ggml_alignment - 1)) {
		snprintf(err, errlen, "device %s reports alignment %llu, not a power of two", d->rdev,
			 (unsigned long long)di->ggml_alignment);
		free(d);
		return PPRPC_EPROTO;
	}
	if (pg_caches_init(d) < 0) {
		pg_caches_fini(d);
		free(d);
		snprintf(err, errlen, "cannot make the device's caches");
		return PPRPC_ENOMEM;
	}
	d->buft.iface = pg_buft_iface;
	d->buft.device = &d->gdev;
	d->buft.context = d;
	pg_host_buft_init(d);
	d->gdev.iface = pg_device_iface;
	d->gdev.reg = &reg->reg;
	d->gdev.context = d;
	*ret_dev = d;
	return 0;
}

void pg_device_destroy(struct pg_device *d)
{
	if (!d)
		return;
	pg_caches_fini(d);
	free(d);
}
