/*
 * pprpc_weights.h — weights from the rank's own storage (libpprpc).
 *
 * A client that loads a model onto ranks need not send the weight bytes
 * when a rank has them: it names what the bytes are and the rank fills the
 * tensor from its copy of the model file (pprpcd model-dir) or from its
 * weights cache (weights-cache), and only otherwise receives them.  Nothing
 * is trusted by name: a file is named by its identity (size, a hash of its
 * head, a hash of its whole content, computed once per host and kept beside
 * the file), a cached range by a key derived from that identity, or from
 * the bytes themselves.
 *
 * The usual sequence for one weight tensor whose bytes are at file offset
 * off of a model file:
 *
 *   pprpc_file_identify(path, NULL, 0, &id, ...);          once per file
 *   pprpc_range_key(&id, off, size, key);
 *   pprpc_fill f = { .file = &id, .file_offset = off, .hint = "model.gguf", .cache_key = key };
 *   if (pprpc_tensor_fill(c, buf, toff, size, &f, &res) < 0)    the rank has not got them
 *           pprpc_tensor_set_cached_async(c, buf, toff, bytes, size, key);  send, and keep
 *
 * Only weights go this way: the rank's cache keeps what it is given under
 * the given key, so a client must never send activations with a key.
 */
#ifndef PPRPC_WEIGHTS_H
#define PPRPC_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "pprpc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the rank of c can fill from, as it said at HELLO: a mask of
 * PPRPC_WEIGHTS_FILES (its model-dir) and PPRPC_WEIGHTS_CACHE (its
 * weights-cache); 0: neither (send the bytes). */
enum { PPRPC_WEIGHTS_FILES = 1, PPRPC_WEIGHTS_CACHE = 2 };
PPRPC_API int pprpc_weights_sources(const pprpc_client *c);

/* A file's identity: its size, SHA-256 of its first min(size, 4 MiB) bytes,
 * and its content hash (SHA-256 over the SHA-256s of its 64 MiB chunks,
 * then the size as 8 little-endian bytes). */
typedef struct pprpc_file_id {
	uint64_t size;
	uint8_t head_sha256[32];
	uint8_t content_sha256[32];
} pprpc_file_id;

/* The identity of the file at path: from its sidecar (PATH.pprpc-sum, or a
 * file in fallback_dir named after the file's device and inode) when that
 * matches the file's size, mtime and inode, else computed with up to
 * threads threads (0: 4) and the sidecar written (beside the file when the
 * folder is writable, else in fallback_dir when not NULL; failing to write
 * it is no error).  *ret_computed (may be NULL) says whether the file was
 * read.  Errors: PPRPC_EIO (unreadable; err says why), PPRPC_EINVAL (not a
 * regular file). */
PPRPC_API int pprpc_file_identify(const char *path, const char *fallback_dir, int threads, pprpc_file_id *out,
				  int *ret_computed, char *err, size_t errlen);
/* The cache key of size bytes at offset of the file id. */
PPRPC_API void pprpc_range_key(const pprpc_file_id *id, uint64_t offset, uint64_t size, uint8_t out[32]);
/* The cache key of bytes that come from no file (their content hash). */
PPRPC_API void pprpc_bytes_key(const void *data, uint64_t size, uint8_t out[32]);

/* Where a fill may take the bytes from: a file range, a cache key, or
 * both (the file is tried first). */
typedef struct pprpc_fill {
	const pprpc_file_id *file;   /* NULL: no file */
	uint64_t file_offset;
	const char *hint;            /* the file's name relative to the rank's model-dir; a hint, may be NULL */
	const uint8_t *cache_key;    /* 32 bytes, or NULL */
} pprpc_fill;

enum pprpc_fill_source { PPRPC_FILL_FILE = 1, PPRPC_FILL_CACHE = 2 };

typedef struct pprpc_fill_result {
	int source;                  /* enum pprpc_fill_source */
	char file[256];              /* the rank's file, relative to its model-dir (source FILE) */
	uint64_t read_ns;            /* the rank's time reading and checking */
} pprpc_fill_result;

/* Fill size bytes at buf+offset from the rank's storage, in order with the
 * client's earlier commands on the buffer's device, and wait until they are
 * there.  0 with *out (may be NULL); or an error whose message
 * (pprpc_last_error) says why the rank could not (no such file, a hash
 * that differs, a file changed under it, a cache miss, no model-dir nor
 * cache): then send the bytes.  A failed fill leaves nothing sticky on the
 * queue.  Errors also: PPRPC_EHANDLE, PPRPC_ERANGE (the region),
 * PPRPC_EUNSUPP (the rank has neither source). */
PPRPC_API int pprpc_tensor_fill(pprpc_client *c, pprpc_buffer buf, uint64_t offset, uint64_t size,
				const pprpc_fill *src, pprpc_fill_result *out);
/* A buffer of size bytes on device that is the rank's own mapping of its
 * copy of src->file from src->file_offset (src->cache_key unused): the
 * bytes are there without being read or sent, and pages are read when
 * first used.  Only a device whose DeviceInfo says maps_files (host memory,
 * and the rank has a model-dir; STATS devices info.maps_files) serves it; the
 * rank's writes into the buffer, if any, stay its own.  0 with *out and
 * the file's name under the rank's model-dir in mapped (may be NULL); or
 * an error saying why not (no such file, a hash that differs, a device of
 * its own memory, an offset it cannot address): then allocate and send or
 * fill.  Errors also PPRPC_EINVAL, PPRPC_ERANGE, PPRPC_ELIMIT. */
PPRPC_API int pprpc_buffer_map_file(pprpc_client *c, uint32_t device, uint64_t size, const pprpc_fill *src,
				    pprpc_buffer *out, char *mapped, size_t mappedlen);
/* pprpc_tensor_set_async, and the rank keeps the bytes in its weights cache
 * under key (when it has one) for a later pprpc_tensor_fill. */
PPRPC_API int pprpc_tensor_set_cached_async(pprpc_client *c, pprpc_buffer buf, uint64_t offset, const void *data,
					    uint64_t size, const uint8_t key[32]);

#ifdef __cplusplus
}
#endif
#endif
