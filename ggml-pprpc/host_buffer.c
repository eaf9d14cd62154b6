/*
 * ggml-pprpc/host_buffer.c — the device's host buffer type: CPU memory
 * that a rank on this host writes reads into straight from its device
 * (libpprpc's host pages, pprpc_host_alloc).
 *
 * llama.cpp allocates its output buffer (the logits, the embeddings) from
 * the host buffer type of the device holding the output layer, and the
 * CPU backend's buffers from the first device's.  A decoded token's logits
 * (608 KB for qwen3's vocabulary) then go from the last rank's GPU by DMA
 * into the buffer llama.cpp reads them from: no bytes on the link, no copy
 * on either side — against 107 us of loopback TCP on an H100
 * (doc/llama-vs-rpc.md).  Offered only for a rank on this host
 * (pprpc_same_host) and with PPRPC_HOST_PAGES=1 (the default); a buffer
 * that cannot be a host page (no memfd, over its size bound) is a plain
 * CPU buffer, and reads into it go by the link as into any memory.
 */
#include <errno.h>
#include <string.h>

#include "ggml-backend.h"
#include "pg.h"

static const char *host_buft_name(ggml_backend_buffer_type_t buft)
{
	(void)buft;
	return "PPRPC_Host";
}

static void host_buffer_free(ggml_backend_buffer_t buffer)
{
	pprpc_host_free(buffer->context);
}

static ggml_backend_buffer_t host_buft_alloc(ggml_backend_buffer_type_t buft, size_t size)
{
	ggml_backend_buffer_t b;
	void *p = pprpc_host_alloc(size ? size : 1);

	if (!p) {
		PG_LOG_DEBUG("pprpc: no host page of %zu bytes (%s): a plain CPU buffer\n", size, strerror(errno));
		return ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), size);
	}
	b = ggml_backend_cpu_buffer_from_ptr(p, size);
	if (!b) {
		pprpc_host_free(p);
		return NULL;
	}
	b->buft = buft;
	b->iface.free_buffer = host_buffer_free;
	return b;
}

static size_t host_buft_alignment(ggml_backend_buffer_type_t buft)
{
	(void)buft;
	return 64;
}

static bool host_buft_is_host(ggml_backend_buffer_type_t buft)
{
	(void)buft;
	return true;
}

static const struct ggml_backend_buffer_type_i host_buft_iface = {
	.get_name = host_buft_name,
	.alloc_buffer = host_buft_alloc,
	.get_alignment = host_buft_alignment,
	.get_max_size = NULL,      /* a larger one is a plain CPU buffer */
	.get_alloc_size = NULL,
	.is_host = host_buft_is_host,
};

void pg_host_buft_init(struct pg_device *d)
{
	d->host_buft.iface = host_buft_iface;
	d->host_buft.device = &d->gdev;
	d->host_buft.context = d;
}

ggml_backend_buffer_type_t pg_host_buft(struct pg_device *d)
{
	return d->rank->host_pages ? &d->host_buft : NULL;
}
