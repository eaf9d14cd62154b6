/*
 * daemon/device/registry.c — the device backends, one line each.
 *
 * A backend is a folder daemon/backend/<kind>/ (the Makefile compiles every
 * .c there) exporting one backend_open_fn, and a line here.  The list
 * expands twice: into declarations of the open functions and into the rows
 * of the table, so the line is all there is to add.
 */
#include <stdio.h>
#include <string.h>

#include "daemon/device/backend_impl.h"

/* X(prefix, how a spec is spelt, open function, may_be_absent) */
#define BACKENDS(X)                                          \
	X("cpu", "cpu", cpu_backend_open, false)             \
	X("cuda:", "cuda:N", cuda_backend_open, true)        \
	X("ggml:", "ggml:NAME", ggml_backend_open, true)

#define DECLARE(prefix, spelling, fn, absent) \
	int fn(struct device *d, const char *arg, const struct device_conf *conf, struct backend_dev *ret, \
	       char *err, size_t errlen);
BACKENDS(DECLARE)
#undef DECLARE

static const struct backend_reg backends[] = {
#define ROW(p, spelling, fn, absent) { .prefix = p, .may_be_absent = absent, .open = fn },
	BACKENDS(ROW)
#undef ROW
};

const struct backend_reg *backend_find(const char *spec, const char **ret_arg)
{
	const struct backend_reg *best = NULL;
	size_t best_len = 0;

	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		size_t n = strlen(backends[i].prefix);

		if (n >= best_len && strncmp(spec, backends[i].prefix, n) == 0) {
			best = &backends[i];
			best_len = n;
		}
	}
	if (best)
		*ret_arg = spec + best_len;
	return best;
}

const char *backend_names(void)
{
	static const char names[] =
#define NAME(p, spelling, fn, absent) ", " spelling
		BACKENDS(NAME)
#undef NAME
		;

	return names + 2; /* past the first ", " */
}
