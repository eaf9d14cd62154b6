/* daemon/core/hostmem.c — host memory under the floor (see hostmem.h). */
#include "daemon/core/hostmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pprpc/types.h"

#define MIB (1024.0 * 1024.0)
/* Below this a reservation may use a reading up to HOSTMEM_STALE_MS old. */
#define HOSTMEM_FRESH_BYTES (1ull << 20)
#define HOSTMEM_STALE_MS 20

void hostmem_init(struct hostmem *h, uint64_t floor)
{
	h->floor = floor;
	uint64_t avail = 0, total;

	atomic_store(&h->reserved, 0);
	atomic_store(&h->committed, 0);
	atomic_store(&h->baseline, hostmem_meminfo(&avail, &total) < 0 ? 0 : avail);
	atomic_store(&h->avail, 0);
	atomic_store(&h->read_ms, 0);
}

int hostmem_meminfo(uint64_t *ret_avail, uint64_t *ret_total)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long v, avail = 0, total = 0;

	if (!f)
		return PPRPC_EDEVICE;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
			avail = v * 1024;
		else if (sscanf(line, "MemTotal: %llu kB", &v) == 1)
			total = v * 1024;
	}
	fclose(f);
	if (!total)
		return PPRPC_EDEVICE;
	*ret_avail = avail;
	*ret_total = total;
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* MemAvailable, read anew when n is large or the reading is stale. */
static int available(struct hostmem *h, uint64_t n, uint64_t *ret)
{
	uint64_t t = now_ms(), avail, total;

	if (n < HOSTMEM_FRESH_BYTES && atomic_load(&h->read_ms) && t - atomic_load(&h->read_ms) <= HOSTMEM_STALE_MS) {
		*ret = atomic_load(&h->avail);
		return 0;
	}
	if (hostmem_meminfo(&avail, &total) < 0)
		return PPRPC_EDEVICE;
	atomic_store(&h->avail, avail);
	atomic_store(&h->read_ms, t ? t : 1);
	*ret = avail;
	return 0;
}

/* The baseline less what the daemon committed, or avail when that is
 * unknown; and the baseline read anew when the daemon holds nothing. */
static uint64_t committed_free(struct hostmem *h, uint64_t avail, uint64_t res)
{
	uint64_t com = atomic_load(&h->committed), base;

	if (!com && !res)
		atomic_store(&h->baseline, avail);
	base = atomic_load(&h->baseline);
	if (!base)
		return avail;
	return base > com ? base - com : 0;
}

uint64_t hostmem_free_now(struct hostmem *h, uint64_t avail)
{
	uint64_t res, a, b;

	if (!h)
		return avail;
	res = atomic_load(&h->reserved);
	a = avail > res ? avail - res : 0;
	b = committed_free(h, avail, res);
	b = b > res ? b - res : 0;
	return a < b ? a : b;
}

int hostmem_reserve(struct hostmem *h, uint64_t n, char *err, size_t errlen)
{
	uint64_t avail, res, fr, com;

	if (available(h, n, &avail) < 0) {
		snprintf(err, errlen, "cannot read the host's available memory (/proc/meminfo)");
		return PPRPC_EDEVICE;
	}
	res = atomic_load(&h->reserved);
	do {
		uint64_t a = avail > res ? avail - res : 0, b = committed_free(h, avail, res);

		b = b > res ? b - res : 0;
		fr = a < b ? a : b;
		/* fr >= n + floor, without overflow */
		if (n > fr || fr - n < h->floor) {
			com = atomic_load(&h->committed);
			snprintf(err, errlen,
				 "host memory: %.1f MiB more for this request would leave %.1f MiB free "
				 "(%.1f MiB reserved by requests in flight, %.1f MiB committed to buffers), "
				 "below the memory floor of %.1f MiB",
				 n / MIB, n > fr ? 0.0 : (fr - n) / MIB, res / MIB, com / MIB, h->floor / MIB);
			return PPRPC_EFLOOR;
		}
	} while (!atomic_compare_exchange_weak(&h->reserved, &res, res + n));
	return 0;
}

void hostmem_commit(struct hostmem *h, uint64_t n)
{
	if (h)
		atomic_fetch_add(&h->committed, n);
}

void hostmem_uncommit(struct hostmem *h, uint64_t n)
{
	if (h)
		atomic_fetch_sub(&h->committed, n);
}

uint64_t hostmem_committed(struct hostmem *h)
{
	return h ? atomic_load(&h->committed) : 0;
}

void hostmem_release(struct hostmem *h, uint64_t n)
{
	atomic_fetch_sub(&h->reserved, n);
}

void *hostmem_alloc(struct hostmem *h, uint64_t n, int *ret_code, char *err, size_t errlen)
{
	void *p;
	int rc = hostmem_reserve(h, n, err, errlen);

	if (rc < 0) {
		*ret_code = rc;
		return NULL;
	}
	p = n <= SIZE_MAX ? malloc((size_t)n) : NULL;
	if (!p) {
		hostmem_release(h, n);
		snprintf(err, errlen, "cannot allocate %.1f MiB of host memory", n / MIB);
		*ret_code = PPRPC_ENOMEM;
	}
	return p;
}

void hostmem_free(struct hostmem *h, void *p, uint64_t n)
{
	if (!p)
		return;
	free(p);
	hostmem_release(h, n);
}

uint64_t hostmem_reserved(struct hostmem *h)
{
	return atomic_load(&h->reserved);
}
