/*
 * libclient/weights.c — weights from the rank's own storage
 * (pprpc_weights.h): file identities, cache keys, TENSOR_FILL and the SET
 * that keeps its bytes.  The identity is util/filesum.h's, the one the
 * daemon computes of its copy, so both sides hash the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "libclient/client.h"
#include "pprpc_weights.h"
#include "proto/meta.h"
#include "proto/msgtype.h"
#include "util/filesum.h"

_Static_assert(sizeof(((pprpc_file_id *)0)->head_sha256) == sizeof(((struct filesum *)0)->head), "head hash");
_Static_assert(sizeof(((pprpc_file_id *)0)->content_sha256) == sizeof(((struct filesum *)0)->content),
	       "content hash");

PPRPC_API int pprpc_file_identify(const char *path, const char *fallback_dir, int threads, pprpc_file_id *out,
				  int *ret_computed, char *err, size_t errlen)
{
	struct filesum fs;
	struct stat st;
	int fd, rc, computed = 0;

	if (!path || !out)
		return PPRPC_EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return PPRPC_EIO;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		close(fd);
		return PPRPC_EINVAL;
	}
	rc = filesum_get(fd, path, &st, fallback_dir, threads > 0 ? threads : 4, NULL, NULL, &fs, &computed, err,
			 errlen);
	close(fd);
	if (rc < 0)
		return rc;
	out->size = fs.size;
	memcpy(out->head_sha256, fs.head, sizeof(out->head_sha256));
	memcpy(out->content_sha256, fs.content, sizeof(out->content_sha256));
	if (ret_computed)
		*ret_computed = computed;
	return 0;
}

/* SHA-256 of "pprpc-range-v1", the content hash, the offset and the size
 * (little-endian): a range of a file is named by what the file is. */
PPRPC_API void pprpc_range_key(const pprpc_file_id *id, uint64_t offset, uint64_t size, uint8_t out[32])
{
	static const char tag[] = "pprpc-range-v1";
	uint8_t le[16];
	unsigned int n = 32;

	for (int i = 0; i < 8; i++) {
		le[i] = (uint8_t)(offset >> (8 * i));
		le[8 + i] = (uint8_t)(size >> (8 * i));
	}
	{
		EVP_MD_CTX *ctx = EVP_MD_CTX_new();

		if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
		    EVP_DigestUpdate(ctx, tag, sizeof(tag) - 1) != 1 ||
		    EVP_DigestUpdate(ctx, id->content_sha256, sizeof(id->content_sha256)) != 1 ||
		    EVP_DigestUpdate(ctx, le, sizeof(le)) != 1 || EVP_DigestFinal_ex(ctx, out, &n) != 1)
			memset(out, 0, 32); /* an all-zero key finds nothing */
		EVP_MD_CTX_free(ctx);
	}
}

PPRPC_API void pprpc_bytes_key(const void *data, uint64_t size, uint8_t out[32])
{
	if (filesum_memory(data, size, 4, out) < 0)
		memset(out, 0, 32);
}

/* The wire's FileRange of src's file (pointers into src). */
static void file_range(const pprpc_fill *src, Pprpc__FileRange *fr)
{
	fr->file_size = src->file->size;
	fr->head_sha256.data = (uint8_t *)src->file->head_sha256;
	fr->head_sha256.len = sizeof(src->file->head_sha256);
	fr->content_sha256.data = (uint8_t *)src->file->content_sha256;
	fr->content_sha256.len = sizeof(src->file->content_sha256);
	fr->file_offset = src->file_offset;
	fr->hint = (char *)(src->hint ? src->hint : "");
}

PPRPC_API int pprpc_buffer_map_file(pprpc_client *c, uint32_t device, uint64_t size, const pprpc_fill *src,
				    pprpc_buffer *out, char *mapped, size_t mappedlen)
{
	Pprpc__BufferAlloc req = PPRPC__BUFFER_ALLOC__INIT;
	Pprpc__FileRange fr = PPRPC__FILE_RANGE__INIT;
	ProtobufCMessage *m = NULL;
	const Pprpc__BufferAllocReply *rep;
	int rc;

	if (!src || !src->file || !out)
		return client_fail(c, PPRPC_EINVAL, "buffer_map_file: no file");
	file_range(src, &fr);
	req.device = device;
	req.size = size;
	req.file = &fr;
	rc = rpc_call(c, MSG_BUFFER_ALLOC, &req.base, NULL, 0, &pprpc__buffer_alloc_reply__descriptor, &m, NULL, 0);
	if (rc < 0)
		return rc;
	rep = (const Pprpc__BufferAllocReply *)m;
	out->id = rep->buffer;
	if (mapped && mappedlen)
		snprintf(mapped, mappedlen, "%s", rep->mapped ? rep->mapped : "");
	meta_free(m);
	return 0;
}

PPRPC_API int pprpc_tensor_fill(pprpc_client *c, pprpc_buffer buf, uint64_t offset, uint64_t size,
				const pprpc_fill *src, pprpc_fill_result *out)
{
	Pprpc__TensorFill req = PPRPC__TENSOR_FILL__INIT;
	Pprpc__FileRange fr = PPRPC__FILE_RANGE__INIT;
	ProtobufCMessage *m = NULL;
	const Pprpc__TensorFillReply *rep;
	int rc;

	if (!src || (!src->file && !src->cache_key))
		return client_fail(c, PPRPC_EINVAL, "tensor_fill: neither a file nor a cache key");
	req.buffer = buf.id;
	req.offset = offset;
	req.size = size;
	if (src->file) {
		file_range(src, &fr);
		req.file = &fr;
	}
	if (src->cache_key) {
		req.cache_key.data = (uint8_t *)src->cache_key;
		req.cache_key.len = 32;
	}
	rc = rpc_call(c, MSG_TENSOR_FILL, &req.base, NULL, 0, &pprpc__tensor_fill_reply__descriptor, &m, NULL, 0);
	if (rc < 0)
		return rc;
	rep = (const Pprpc__TensorFillReply *)m;
	if (out) {
		out->source = (int)rep->source;
		snprintf(out->file, sizeof(out->file), "%s", rep->file ? rep->file : "");
		out->read_ns = rep->read_ns;
	}
	meta_free(m);
	return 0;
}

PPRPC_API int pprpc_tensor_set_cached_async(pprpc_client *c, pprpc_buffer buf, uint64_t offset, const void *data,
					    uint64_t size, const uint8_t key[32])
{
	if (!key)
		return client_fail(c, PPRPC_EINVAL, "tensor_set_cached_async: NULL key");
	return client_set_queued(c, buf, offset, data, size, key);
}

PPRPC_API int pprpc_weights_sources(const pprpc_client *c)
{
	return (c->weights_file ? PPRPC_WEIGHTS_FILES : 0) | (c->weights_cache ? PPRPC_WEIGHTS_CACHE : 0);
}
