/*
 * daemon/exec/hostmem.h — host memory that requests take outside buffers,
 * under the memory floor.
 *
 * Buffers and graph arenas are allocated through the device, which refuses
 * what would leave less than the floor free.  Requests also make the
 * daemon copy into host memory of its own: a queued TENSOR_SET's bulk, a
 * queued TENSOR_GET's copy, a RECV's landing stage, the CPU kernels'
 * workspaces (packed MUL_MAT operands and the like).  Each of those is
 * reserved here first: refused with PPRPC_EFLOOR when MemAvailable, less
 * what is reserved already, would fall below the floor (issue 19.14: they
 * allocated past it).  Reservations are counted because the memory they
 * stand for is touched later, when MemAvailable does not show it yet; a
 * reservation whose pages MemAvailable already counts is counted twice,
 * which errs towards refusing, for the short life of a copy.  The CPU
 * device's free memory (and so its buffer allocations) is MemAvailable
 * less the reservations.  Any thread.
 */
#ifndef PPRPC_DAEMON_HOSTMEM_H
#define PPRPC_DAEMON_HOSTMEM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct hostmem {
	uint64_t floor;                 /* bytes of MemAvailable that must stay free */
	atomic_uint_least64_t reserved; /* bytes reserved now */
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

/* MemAvailable and MemTotal from /proc/meminfo: 0 or PPRPC_EDEVICE. */
int hostmem_meminfo(uint64_t *ret_avail, uint64_t *ret_total);

#endif
