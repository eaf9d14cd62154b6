/*
 * daemon/backend/ggml_none.c — a pprpcd built without ggml (GGML=0, or the
 * pinned llama.cpp not built): no ggml devices, and the ggml requests say
 * why.  Replaced by daemon/backend/ggml/ when the build finds ggml.
 */
#include <stdio.h>

#include "daemon/backend/ggml/ggml_serve.h"
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

int ggml_serve_graph_create(struct pprpcd *d, struct owner *o, const Pprpc__GgmlGraphCreate *m,
			    struct graph **ret_g, char *err, size_t errlen)
{
	(void)d, (void)o, (void)m, (void)ret_g;
	snprintf(err, errlen, "%s", WHY);
	return PPRPC_EUNSUPP;
}

int ggml_serve_create_begin(struct pprpcd *d, struct owner *o, const Pprpc__GgmlGraphCreate *m,
			    struct ggml_create **ret_j, char *err, size_t errlen)
{
	(void)d, (void)o, (void)m, (void)ret_j;
	snprintf(err, errlen, "%s", WHY);
	return PPRPC_EUNSUPP;
}

/* begin never makes a job here: nothing reaches these */
void ggml_serve_create_build(struct ggml_create *j)
{
	(void)j;
}

int ggml_serve_create_finish(struct ggml_create *j, struct graph **ret_g, char *err, size_t errlen)
{
	(void)j, (void)ret_g;
	snprintf(err, errlen, "%s", WHY);
	return PPRPC_EUNSUPP;
}

void ggml_serve_create_drop(struct ggml_create *j)
{
	(void)j;
}

int ggml_serve_supports(struct pprpcd *d, struct owner *o, const Pprpc__GgmlSupports *m, bool *ret_ok, char *why,
			size_t whylen)
{
	(void)d, (void)o, (void)m, (void)ret_ok;
	snprintf(why, whylen, "%s", WHY);
	return PPRPC_EUNSUPP;
}

int ggml_serve_alloc_size(struct pprpcd *d, struct owner *o, const Pprpc__GgmlAllocSize *m, uint64_t *ret_size,
			  char *err, size_t errlen)
{
	(void)d, (void)o, (void)m, (void)ret_size;
	snprintf(err, errlen, "%s", WHY);
	return PPRPC_EUNSUPP;
}
