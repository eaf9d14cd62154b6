/*
 * tests/integration/slow_resolver.c — an LD_PRELOAD shim for
 * test_hostile.c:test_slow_resolution: getaddrinfo of a name ending in
 * ".slow.invalid" takes 400 ms and finds nothing (an unanswered DNS query,
 * without needing a network); every other name goes to the C library.
 */
#include <dlfcn.h>
#include <netdb.h>
#include <string.h>
#include <time.h>

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res)
{
	static const char slow[] = ".slow.invalid";
	size_t n = node ? strlen(node) : 0;
	gai_fn real;

	if (n >= sizeof(slow) - 1 && !strcmp(node + n - (sizeof(slow) - 1), slow)) {
		struct timespec ts = { 0, 400 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		return EAI_NONAME;
	}
	real = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
	return real ? real(node, service, hints, res) : EAI_FAIL;
}
