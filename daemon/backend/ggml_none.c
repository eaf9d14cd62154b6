/*
 * daemon/backend/ggml_none.c — a pprpcd built without ggml (GGML=0, or the
 * pinned llama.cpp not built): no ggml devices, so no device takes the ggml
 * requests (device.h: device_takes_wire).  Replaced by daemon/backend/ggml/ when the build finds ggml.
 */
#include <stdio.h>

#include "daemon/device/backend_impl.h"
#include "pprpc/types.h"

#define WHY "this pprpcd was built without the ggml engine (build the pinned llama.cpp: make llama; then make)"

/* registry.c's "ggml:" row. */
int ggml_backend_open(struct device *d, const char *arg, const struct device_conf *conf, struct backend_dev *ret,
		      char *err, size_t errlen)
{
	(void)d, (void)conf, (void)ret;
	snprintf(err, errlen, "ggml:%s: %s", arg, WHY);
	return PPRPC_EUNSUPP;
}
