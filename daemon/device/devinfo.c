/* daemon/device/devinfo.c — see devinfo.h. */
#include "daemon/device/devinfo.h"

#include "daemon/device/device.h"

void devinfo_fill(struct pprpcd *d, struct devinfo_set *set)
{
	set->n = d->ndev;
	for (unsigned i = 0; i < d->ndev; i++) {
		struct device *dev = d->dev[i];
		Pprpc__DeviceInfo *di = &set->info[i];
		const struct device_info *inf = device_info(dev);
		uint64_t fr = 0, total = 0;

		pprpc__device_info__init(di);
		device_mem_info(dev, &fr, &total);
		di->index = dev->index;
		di->name = dev->name;
		di->kind = (char *)device_kind(dev);
		di->total_bytes = total;
		di->free_bytes = fr;
		di->floor_bytes = dev->floor;
		di->description = dev->desc;
		di->ggml_alignment = inf->ggml_alignment;
		di->ggml_max_size = inf->ggml_max_size;
		di->ggml_dev_type = inf->ggml_dev_type;
		/* h_buffer.c: BufferAlloc.file (a model-dir, and host memory the
		 * device computes on) */
		di->maps_files = d->opts.model_dir[0] && d->opts.map_model_files && device_adopts(dev);
		if (inf->ggml_version)
			di->ggml_version = (char *)inf->ggml_version;
		set->ptrs[i] = di;
	}
}
