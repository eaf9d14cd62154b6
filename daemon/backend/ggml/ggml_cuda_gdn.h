/*
 * daemon/backend/ggml/ggml_cuda_gdn.h — pprpc's CUDA GATED_DELTA_NET run on the
 * memory of a ggml-cuda device (ggml_cuda_gdn.c), for the ggml engine
 * (ggml_gdn.c).  Free of ggml and CUDA types: ggml_gdn.c sees ggml's
 * headers, ggml_cuda_gdn.c sees CUDA's.
 *
 * pprpcd links its own CUDA runtime (static) and ggml-cuda links another
 * (shared); both run on the device's primary context, so the device
 * pointers ggml-cuda placed are valid for pprpc's kernels.  Streams are not
 * shared between the two runtimes: pprpc's kernel runs on a stream of its
 * own, after ggml's backend synchronized (every ggml segment of a run
 * ends with ggml_backend_graph_compute's synchronize), and is waited for
 * before the next segment starts.
 */
#ifndef PPRPC_DAEMON_GGML_CUDA_GDN_H
#define PPRPC_DAEMON_GGML_CUDA_GDN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"

struct gge_gdn_cuda;

/* A stream and a status word on device ordinal (the worker thread, at the
 * first native run).  0 or PPRPC_EDEVICE with CUDA's text. */
int gdn_cuda_open(int ordinal, struct gge_gdn_cuda **ret, char *err, size_t errlen);
void gdn_cuda_close(struct gge_gdn_cuda *c);

enum gdn_cuda_outcome {
	GDN_CUDA_RAN = 0,    /* pprpc's kernel wrote dst; counted in *native */
	GDN_CUDA_GATE = 1,   /* a gate outside the shared domain: run ggml's kernel */
	GDN_CUDA_NOMEM = 2,  /* no workspace for the chunked form: run ggml's kernel */
};

/* Run GATED_DELTA_NET (descriptors on device memory, passed
 * kern_op_check_dst; g contiguous) and wait for it.  The workspace grows
 * to what the chunked form wants for this node (at most 1 GiB, leaving
 * floor bytes of the device free; with less it runs the (b, h) in groups).
 * 0 with *ret_outcome, or PPRPC_EDEVICE with CUDA's text. */
int gdn_cuda_run(struct gge_gdn_cuda *c, uint64_t floor, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, struct kern_tensor *dst, struct kern_gdn_stats *native,
		 int *ret_outcome, char *err, size_t errlen);

#endif
