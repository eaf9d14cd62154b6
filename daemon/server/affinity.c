/*
 * daemon/server/affinity.c — CPU placement: parse "loop=0,device=1-3" and pin the
 * event-loop thread and device workers, so batch work and RPC progress do
 * not compete for a core.  Kernel helper threads are created by the worker
 * and inherit its mask; OpenBLAS's pool is pinned explicitly.
 */
#include "daemon/server/affinity.h"

#include <ctype.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "pprpc/types.h"

static int parse_set(const char *s, size_t len, uint64_t *bits, char *err, size_t errlen)
{
	size_t i = 0;
	int any = 0;

	memset(bits, 0, AFFINITY_MAX_CPUS / 8);
	while (i < len) {
		unsigned long a, b;
		char *end;

		if (!isdigit((unsigned char)s[i]))
			goto bad;
		a = strtoul(s + i, &end, 10);
		i = (size_t)(end - s);
		b = a;
		if (i < len && s[i] == '-') {
			i++;
			if (i >= len || !isdigit((unsigned char)s[i]))
				goto bad;
			b = strtoul(s + i, &end, 10);
			i = (size_t)(end - s);
		}
		if (a > b || b >= AFFINITY_MAX_CPUS)
			goto bad;
		for (unsigned long c = a; c <= b; c++)
			bits[c / 64] |= 1ull << (c % 64);
		any = 1;
		if (i < len && s[i] == ':')
			i++;
		else if (i < len)
			goto bad;
	}
	if (any)
		return 0;
bad:
	snprintf(err, errlen, "bad CPU list '%.*s' (expected e.g. 0, 1-3 or 0:2-3, CPUs < %d)", (int)len, s,
		 AFFINITY_MAX_CPUS);
	return PPRPC_EINVAL;
}

int affinity_parse(const char *s, struct cpu_affinity *out, char *err, size_t errlen)
{
	struct cpu_affinity a;
	const char *p = s;

	memset(&a, 0, sizeof(a));
	if (!strcmp(s, "none")) {
		*out = a;
		return 0;
	}
	while (*p) {
		size_t n = strcspn(p, ",");
		const char *eq = memchr(p, '=', n);
		int rc;

		if (!eq) {
			snprintf(err, errlen, "expected loop=CPUS or device=CPUS in '%s'", s);
			return PPRPC_EINVAL;
		}
		if ((size_t)(eq - p) == 4 && !strncmp(p, "loop", 4)) {
			rc = parse_set(eq + 1, n - 5, a.loop, err, errlen);
			a.has_loop = 1;
		} else if ((size_t)(eq - p) == 6 && !strncmp(p, "device", 6)) {
			rc = parse_set(eq + 1, n - 7, a.device, err, errlen);
			a.has_device = 1;
		} else {
			snprintf(err, errlen, "unknown part '%.*s' (loop or device)", (int)(eq - p), p);
			return PPRPC_EINVAL;
		}
		if (rc < 0)
			return rc;
		p += n;
		if (*p == ',')
			p++;
	}
	*out = a;
	return 0;
}

static void format_set(const uint64_t *bits, char *buf, size_t len)
{
	size_t o = 0;
	int c = 0, first = 1;

	buf[0] = '\0';
	while (c < AFFINITY_MAX_CPUS) {
		int e;

		if (!(bits[c / 64] & (1ull << (c % 64)))) {
			c++;
			continue;
		}
		for (e = c; e + 1 < AFFINITY_MAX_CPUS && (bits[(e + 1) / 64] & (1ull << ((e + 1) % 64))); e++)
			;
		if (o < len)
			o += (size_t)snprintf(buf + o, len - o, e > c ? "%s%d-%d" : "%s%d", first ? "" : ":", c, e);
		first = 0;
		c = e + 1;
	}
}

void affinity_format(const struct cpu_affinity *a, char *buf, size_t len)
{
	char l[256], d[256];

	if (!a->has_loop && !a->has_device) {
		snprintf(buf, len, "none");
		return;
	}
	format_set(a->loop, l, sizeof(l));
	format_set(a->device, d, sizeof(d));
	if (a->has_loop && a->has_device)
		snprintf(buf, len, "loop=%s,device=%s", l, d);
	else if (a->has_loop)
		snprintf(buf, len, "loop=%s", l);
	else
		snprintf(buf, len, "device=%s", d);
}

static void to_cpuset(const uint64_t *bits, cpu_set_t *set)
{
	CPU_ZERO(set);
	for (int c = 0; c < AFFINITY_MAX_CPUS && c < CPU_SETSIZE; c++)
		if (bits[c / 64] & (1ull << (c % 64)))
			CPU_SET(c, set);
}

int affinity_apply_loop(const struct cpu_affinity *a, char *err, size_t errlen)
{
	cpu_set_t set;
	int rc;

	if (!a->has_loop)
		return 0;
	to_cpuset(a->loop, &set);
	rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (rc) {
		snprintf(err, errlen, "cannot pin the event loop: %s", strerror(rc));
		return PPRPC_EINVAL;
	}
	return 0;
}

int affinity_apply_worker(const struct cpu_affinity *a, pthread_t t, char *err, size_t errlen)
{
	cpu_set_t set;
	int rc;

	if (!a->has_device)
		return 0;
	to_cpuset(a->device, &set);
	rc = pthread_setaffinity_np(t, sizeof(set), &set);
	if (rc) {
		snprintf(err, errlen, "cannot pin a device worker: %s", strerror(rc));
		return PPRPC_EINVAL;
	}
	/* OpenBLAS's pool was created at load time with the process's mask.
	 * Its last index means "the calling thread" (here the loop, which must
	 * keep its own mask), so only the pool's threads 0..n-2 are pinned;
	 * the worker that calls BLAS was pinned above. */
	for (int i = 0; i + 1 < openblas_get_num_threads(); i++)
		openblas_setaffinity(i, sizeof(set), &set);
	return 0;
}

static void describe_thread(pthread_t t, char *buf, size_t len)
{
	cpu_set_t set;
	uint64_t bits[AFFINITY_MAX_CPUS / 64];

	memset(bits, 0, sizeof(bits));
	if (pthread_getaffinity_np(t, sizeof(set), &set) != 0) {
		snprintf(buf, len, "?");
		return;
	}
	for (int c = 0; c < AFFINITY_MAX_CPUS && c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			bits[c / 64] |= 1ull << (c % 64);
	format_set(bits, buf, len);
}

void affinity_describe(pthread_t loop, const pthread_t *workers, const char *const *names, int n, char *buf,
		       size_t len)
{
	char s[256];
	size_t o;

	describe_thread(loop, s, sizeof(s));
	o = (size_t)snprintf(buf, len, "loop=%s", s);
	for (int i = 0; i < n && o < len; i++) {
		describe_thread(workers[i], s, sizeof(s));
		o += (size_t)snprintf(buf + o, len - o, " %s=%s", names[i], s);
	}
}
