/*
 * daemon/backend/ggml/ggml_cuda_stream.h — the streams of a ggml-cuda device:
 * timeline WAITs held on the GPU and graph runs enqueued behind them, as
 * the native cuda:N device does (daemon/backend/cuda/cuda_stream.c).
 *
 * Each pprpc stream gets a ggml backend of its own (so one held by a WAIT
 * holds nobody else: ggml-cuda gives every backend its own CUDA stream) and
 * a CUDA stream of pprpcd's runtime that carries what ggml's interface has
 * no entry for: the stream memory operations of WAIT and SIGNAL
 * (cuda_memops.h), the index checks (cuda_index_check.cu) and the
 * completions.  The two are ordered with ggml's events, whose context is a
 * cudaEvent_t (a driver handle, so valid in both runtimes of the process):
 *
 *   pprpc stream:  [WAIT: wait value] [index checks] record E1 ....... wait E2 [completion]
 *   ggml backend:                                    wait E1 [graph] record E2
 *
 * A graph that must read something on the host in the middle of its run
 * (gge_graph_async_ok false) is not enqueued so: the queue hands it over
 * only when its stream has nothing pending (graph.h: sync_run), and it
 * runs to its end on the stream's backend before the submit returns.
 * Only in builds with CUDA; ggml_device.c uses it for ggml-cuda devices.
 */
#ifndef PPRPC_DAEMON_GGML_CUDA_STREAM_H
#define PPRPC_DAEMON_GGML_CUDA_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "daemon/device/backend_impl.h"

struct gge_cuda_streams;

/* The device's streams (the device's slots, the idle list), on CUDA device
 * ordinal of pprpcd's runtime.  0, or PPRPC_EUNSUPP with the reason when
 * the device cannot hold waits (the caller keeps host-side waits), or
 * PPRPC_ENOMEM / PPRPC_EDEVICE. */
int gge_cuda_streams_open(struct gge_dev *g, struct gge_cuda_streams **ret, char *why, size_t whylen);
/* After the queue stopped: every stream, its backend and the slots. */
void gge_cuda_streams_close(struct gge_cuda_streams *cs);

/* Whether the streams hold RECVs on a landing slot (stream_i.land_submit):
 * the device reads page-locked host memory at its host address. */
bool gge_cuda_streams_lands(const struct gge_cuda_streams *cs);

/* device_i's entries, ctx = the streams */
int gge_cuda_stream_open(struct gge_cuda_streams *cs, void **ret_sctx, char *err, size_t errlen);
void gge_cuda_stream_close(struct gge_cuda_streams *cs, void *sctx);
int gge_cuda_slot_alloc(struct gge_cuda_streams *cs, volatile uint64_t **ret_slot);
void gge_cuda_slot_free(struct gge_cuda_streams *cs, volatile uint64_t *slot);

/* stream_i, sctx = one stream */
extern const struct stream_i gge_cuda_stream_i;

#endif
