/*
 * daemon/backend/ggml/dev_ggml.h — the ggml engine as a daemon device
 * (dev_ggml.c: the backend_impl.h interfaces, registry.c's "ggml:" row).
 */
#ifndef PPRPC_DAEMON_DEV_GGML_H
#define PPRPC_DAEMON_DEV_GGML_H

#include <stdbool.h>

#include "daemon/backend/ggml/ggml_engine.h"

struct device;

/* The engine behind a device of kind "ggml". */
struct gge_dev *dev_ggml_engine(struct device *d);
/* The ggml buffer whose memory starts at base (a buffer's ptr); NULL when
 * the device allocated none there. */
ggml_backend_buffer_t dev_ggml_buffer(struct device *d, const void *base);
/* Do the device's streams enqueue runs behind WAITs held on the GPU
 * (stream_cuda.h)?  Their graphs then check indices there. */
bool dev_ggml_gpu_streams(struct device *d);

#endif
