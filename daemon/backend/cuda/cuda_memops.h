/*
 * daemon/backend/cuda/cuda_memops.h — what lets a CUDA stream hold a
 * timeline WAIT and write a SIGNAL without a CPU thread blocking: 64-bit
 * slots of host-mapped memory, the stream memory operations on them, and
 * the completion callback that ends a command.  Shared by the native CUDA
 * backend (cuda_stream.c) and the ggml engine's ggml-cuda devices
 * (daemon/backend/ggml/ggml_cuda_stream.c).  Only for builds with CUDA.
 *
 * A WAIT is cuStreamWaitValue64 on a slot: the GPU polls it and the stream
 * stays held until the host stores 1 (timeline.c).  A SIGNAL is
 * cuStreamWriteValue64 of the value into the timeline's slot.  Both entry
 * points come from the driver at run time (cudaGetDriverEntryPointByVersion),
 * so there is no link-time libcuda.
 *
 * Completion: cudaStreamAddCallback, not cudaLaunchHostFunc, because its
 * callback also runs (with the error) after a device fault; with a host
 * function a faulted context would leave the command pending forever.
 * Callbacks run on a CUDA thread in stream order and make no CUDA call.
 */
#ifndef PPRPC_DAEMON_CUDA_MEMOPS_H
#define PPRPC_DAEMON_CUDA_MEMOPS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "daemon/device/backend_impl.h"

struct slot_page;

/* A device's slots, and whether it has the memory operations at all. */
struct cuda_slots {
	pthread_mutex_t lock;
	struct slot_page *pages;
	/* 64-bit stream memory operations work: WAITs held on the GPU,
	 * SIGNALs written from the stream, slots for both */
	bool memops;
	char waits_why[160];       /* why not */
};

/* Find out whether device ordinal (current on the calling thread) has the
 * memory operations and make the first page of slots; memops and
 * waits_why say the outcome.  Never fails: without them a device runs with
 * host-side waits. */
void cuda_slots_init(struct cuda_slots *s, int ordinal);
void cuda_slots_fini(struct cuda_slots *s);
/* A cleared slot (PPRPC_EUNSUPP without memops, PPRPC_ENOMEM). */
int cuda_slots_alloc(struct cuda_slots *s, volatile uint64_t **ret_slot);
void cuda_slots_free(struct cuda_slots *s, volatile uint64_t *slot);

/* What a completion checks once the stream got there: 0, or a negative
 * code with the reason (a data-dependent failure the kernels reported in
 * mapped memory).  Runs on CUDA's callback thread: no CUDA call. */
typedef int (*cuda_check_fn)(void *ctx, char *why, size_t whylen);

/* Queue done(arg, status, why) behind what was enqueued on stream so far;
 * check (may be NULL) decides the status when the stream ran without a
 * fault.  name prefixes the reasons ("cuda:0"). */
int cuda_completion_add(cudaStream_t stream, const char *name, cuda_check_fn check, void *check_ctx,
			device_done_fn done, void *arg, char *err, size_t errlen);

/* Hold stream until *slot >= 1 (slot NULL: nothing to hold), then the
 * completion.  The device must be current and s->memops on. */
int cuda_memop_wait(const struct cuda_slots *s, cudaStream_t stream, const char *name, volatile uint64_t *slot,
		    device_done_fn done, void *arg, char *err, size_t errlen);
/* Hold stream until *word >= value, nothing else (no completion): word is
 * host memory page-locked and mapped for the device (a landing page's bell,
 * daemon/xfer/land.h) whose values only grow, so the cyclic comparison is
 * right for them. */
int cuda_memop_wait_geq(const struct cuda_slots *s, cudaStream_t stream, const char *name,
			const volatile uint64_t *word, uint64_t value, char *err, size_t errlen);
/* Store value in *slot once the stream gets there, nothing else. */
int cuda_memop_store(const struct cuda_slots *s, cudaStream_t stream, const char *name, volatile uint64_t *slot,
		     uint64_t value, char *err, size_t errlen);
/* Store value in *slot once the stream gets there, then the completion. */
int cuda_memop_write(const struct cuda_slots *s, cudaStream_t stream, const char *name, volatile uint64_t *slot,
		     uint64_t value, device_done_fn done, void *arg, char *err, size_t errlen);

#endif
