/*
 * daemon/core/hostmem.h — host memory that requests take outside buffers,
 * under the memory floor.
 *
 * Buffers and graph arenas are allocated through the device, which refuses
 * what would leave less than the floor free.  Requests also make the
 * daemon copy into host memory of its own: a queued TENSOR_SET's bulk, a
 * queued TENSOR_GET's copy, a RECV's landing stage, the CPU kernels'
 * workspaces (packed MUL_MAT operands and the like), ggml graph contexts.
 * Each of those is reserved here first: refused with PPRPC_EFLOOR when
 * what is free (below) less the request would fall under the floor
 * (issue 19.14: they allocated past it).
 *
 * What is free counts what the daemon has committed, not what the kernel
 * has faulted in (issue 27.10: an untouched 448 MiB buffer did not lower
 * MemAvailable, so a 256 MiB packing temporary passed a floor 512 MiB away;
 * and MemAvailable rises when other processes free memory, which the
 * daemon's commitments do not).  Two figures, the smaller one wins:
 *   MemAvailable now - reserved
 *     (what the host has; other processes' use counts here), and
 *   baseline - committed - reserved
 *     (MemAvailable when the daemon held nothing, less all the daemon has
 *     committed: host buffers and arenas, touched or not, and reservations).
 * Touched memory is in both figures' deductions at once, never summed, so a
 * buffer is counted once whether or not its pages are resident: no load is
 * refused for double counting.  The baseline is read at start and again
 * whenever the daemon holds nothing (nothing committed or reserved), so
 * memory other processes freed is seen once the daemon's own is gone.  We
 * chose this over faulting buffers in at allocation (MAP_POPULATE): that
 * took 256 ms on the event loop for 448 MiB on the development VM, does
 * not cover ggml's host buffers or malloc'ed contexts, and still trusts a
 * MemAvailable that other processes move.  Reservations whose pages are
 * already touched are in MemAvailable and in reserved both, which errs
 * towards refusing, for the short life of a copy.  The host devices' free
 * memory (and so their buffer allocations, the metrics' and DEVICE_INFO's
 * free figure) is hostmem_free_now.  Any thread.
 */
#ifndef PPRPC_DAEMON_HOSTMEM_H
#define PPRPC_DAEMON_HOSTMEM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct hostmem {
	uint64_t floor;                 /* bytes of MemAvailable that must stay free */
	atomic_uint_least64_t reserved; /* bytes reserved now */
	atomic_uint_least64_t committed; /* bytes of host buffers and arenas held */
	/* MemAvailable when the daemon last held nothing; 0: unknown (only
	 * MemAvailable counts) */
	atomic_uint_least64_t baseline;
	/* MemAvailable as last read, and when (CLOCK_MONOTONIC ms): reads of
	 * /proc/meminfo cost tens of microseconds, so a small reservation
	 * uses a reading up to HOSTMEM_STALE_MS old; a large one reads anew */
	atomic_uint_least64_t avail;
	atomic_uint_least64_t read_ms;
};

/* A zeroed struct is a valid one with floor 0. */
void hostmem_init(struct hostmem *h, uint64_t floor);

/* Reserve n bytes: 0, or PPRPC_EFLOOR with a message naming the floor.
 * hostmem_release gives them back. */
int hostmem_reserve(struct hostmem *h, uint64_t n, char *err, size_t errlen);
void hostmem_release(struct hostmem *h, uint64_t n);
/* Reserve and malloc n bytes (n > 0): the memory, or NULL with *ret_code
 * PPRPC_EFLOOR / PPRPC_ENOMEM and a message. */
void *hostmem_alloc(struct hostmem *h, uint64_t n, int *ret_code, char *err, size_t errlen);
void hostmem_free(struct hostmem *h, void *p, uint64_t n);
uint64_t hostmem_reserved(struct hostmem *h);

/* Host buffers and arenas, committed once allocated (touched or not) until
 * freed.  The caller checks the floor first (device_alloc, through
 * hostmem_free_now); these only count. */
void hostmem_commit(struct hostmem *h, uint64_t n);
void hostmem_uncommit(struct hostmem *h, uint64_t n);
uint64_t hostmem_committed(struct hostmem *h);

/* What is free given MemAvailable avail (the smaller figure above); a NULL
 * h gives avail. */
uint64_t hostmem_free_now(struct hostmem *h, uint64_t avail);

/* MemAvailable and MemTotal from /proc/meminfo: 0 or PPRPC_EDEVICE. */
int hostmem_meminfo(uint64_t *ret_avail, uint64_t *ret_total);

#endif
