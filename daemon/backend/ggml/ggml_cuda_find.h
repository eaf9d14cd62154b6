/*
 * daemon/backend/ggml/ggml_cuda_find.h — which CUDA device of pprpcd's own
 * runtime a ggml-cuda device is.  pprpcd links its own CUDA runtime
 * (static) and ggml-cuda links another (shared); both run on the device's
 * primary context, so what one placed the other may use, once the two
 * ordinals are matched by PCI bus id.  Free of ggml and CUDA types.
 */
#ifndef PPRPC_DAEMON_GGML_CUDA_FIND_H
#define PPRPC_DAEMON_GGML_CUDA_FIND_H

#include <stddef.h>

/* The CUDA device of pprpc's runtime whose PCI bus id is pci (ggml-cuda's
 * device_id, lower case, maybe with a "-vN" suffix for a virtual device).
 * 0 and *ret_ordinal, or PPRPC_EUNSUPP with the reason (a build without
 * CUDA, no such device). */
int gge_cuda_find(const char *pci, int *ret_ordinal, char *why, size_t whylen);

#endif
