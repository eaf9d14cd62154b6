/* ggml-pprpc/env.c — settings from the environment (the plugin has no other
 * way in: llama.cpp tools load it unmodified). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pg.h"

int pg_env_int(const char *name, long def, long min, long max, long *ret, char *err, size_t errlen)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s) {
		*ret = def;
		return 0;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max) {
		snprintf(err, errlen, "%s=%s: expected an integer in %ld..%ld", name, s, min, max);
		return PPRPC_EINVAL;
	}
	*ret = v;
	return 0;
}

int pg_env_trace(pprpc_trace **ret_t, char *err, size_t errlen)
{
	const char *path = getenv("PPRPC_TRACE");
	int rc;

	*ret_t = NULL;
	if (!path || !*path)
		return 0;
	rc = pprpc_trace_open(path, ret_t);
	if (rc < 0)
		snprintf(err, errlen, "PPRPC_TRACE=%s: cannot create %s.%ld", path, path, (long)getpid());
	return rc;
}
