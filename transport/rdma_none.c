/* transport/rdma_none.c — the RDMA entry points when built without
 * libibverbs / librdmacm: each says so, so --transport auto falls back to
 * TCP with that reason and --transport rdma refuses to start. */
#include <stdio.h>

#include "pprpc/types.h"
#include "transport/rdma.h"

#define NOT_BUILT "built without RDMA support (libibverbs/librdmacm not found at build time)"

int rdma_built(void)
{
	return 0;
}

int rdma_ctx_new(uv_loop_t *loop, const struct rdma_geom *req, struct rdma_ctx **ret_ctx, char *err,
		 size_t errlen)
{
	(void)loop;
	(void)req;
	(void)ret_ctx;
	snprintf(err, errlen, NOT_BUILT);
	return PPRPC_EUNSUPP;
}

int rdma_ctx_add_region(struct rdma_ctx *x, void *p, size_t len)
{
	(void)x;
	(void)p;
	(void)len;
	return PPRPC_EUNSUPP;
}

void rdma_ctx_free(struct rdma_ctx *x)
{
	(void)x;
}

int rdma_transport_listen(struct rdma_ctx *x, const char *host, uint16_t port, rdma_accept_cb cb, void *ctx,
		struct rdma_listener **ret_l, char *err, size_t errlen)
{
	(void)x, (void)host, (void)port, (void)cb, (void)ctx, (void)ret_l;
	snprintf(err, errlen, NOT_BUILT);
	return PPRPC_EUNSUPP;
}

void rdma_listener_close(struct rdma_listener *l)
{
	(void)l;
}

int rdma_transport_connect(struct rdma_ctx *x, const char *host, uint16_t port, rdma_connect_cb cb, void *ctx,
		 char *err, size_t errlen)
{
	(void)x, (void)host, (void)port, (void)cb, (void)ctx;
	snprintf(err, errlen, NOT_BUILT);
	return PPRPC_EUNSUPP;
}

uint64_t rdma_memlock_budget(char *desc, size_t desclen)
{
	snprintf(desc, desclen, "n/a");
	return 0;
}
