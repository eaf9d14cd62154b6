/*
 * util/filesum.h — what a model file is, without trusting its name: its
 * size, a hash of its head and a hash of its whole content, computed once
 * and kept beside it.  Shared by the ggml plugin (the client's copy of a
 * model) and pprpcd (the rank's copy under model-dir), so both compute the
 * same identity the same way.
 *
 * The content hash is SHA-256 over the SHA-256s of the file's 64 MiB chunks
 * in order, followed by the file size as 8 little-endian bytes: the chunks
 * hash in parallel (a 500 GB file is read once at disk speed, not at one
 * core's SHA-256 speed).  The head hash is SHA-256 of the first
 * min(size, FILESUM_HEAD) bytes: a cheap first filter, never a proof.
 *
 * The sidecar ("kept beside it") is the text file NAME.pprpc-sum next to the
 * file when that folder is writable, else a file named after the file's
 * device and inode in a fallback folder; it holds the identity with the
 * size, mtime (ns) and inode it was computed for, and is used only while
 * those still match.  It is written atomically (a temporary file renamed),
 * so a process killed while writing leaves the old sidecar or none.
 */
#ifndef PPRPC_UTIL_FILESUM_H
#define PPRPC_UTIL_FILESUM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define FILESUM_CHUNK ((uint64_t)64 << 20)
#define FILESUM_HEAD ((uint64_t)4 << 20)
#define FILESUM_SUFFIX ".pprpc-sum"

struct filesum {
	uint64_t size;
	uint8_t head[32];        /* SHA-256 of the first min(size, FILESUM_HEAD) bytes */
	uint8_t content[32];     /* the content hash above */
};

/* Called now and then while hashing: bytes done of total.  May be NULL. */
typedef void (*filesum_progress_fn)(void *arg, uint64_t done, uint64_t total);

/* The head hash of an open file (pread; fd's position is not used).  0 or
 * a negative PPRPC_E* code with the reason in err. */
int filesum_head(int fd, uint64_t size, uint8_t out[32], char *err, size_t errlen);
/* The content hash of an open file of size bytes, with up to threads
 * threads (>= 1) reading and hashing chunks.  A short read (the file
 * shrank) is an error. */
int filesum_content(int fd, uint64_t size, int threads, filesum_progress_fn progress, void *arg, uint8_t out[32],
		    char *err, size_t errlen);
/* The content hash of bytes in memory (same definition: chunks, size),
 * with up to threads threads. */
int filesum_memory(const void *p, uint64_t size, int threads, uint8_t out[32]);

/* The identity of the file open as fd at path (st: its fstat): from the
 * sidecar when it matches st, else computed (and the sidecar written:
 * beside the file, else in fallback_dir when not NULL; failures to write it
 * are not errors).  *ret_computed says whether the content was read. */
int filesum_get(int fd, const char *path, const struct stat *st, const char *fallback_dir, int threads,
		filesum_progress_fn progress, void *arg, struct filesum *out, int *ret_computed, char *err,
		size_t errlen);

/* hex (65 bytes with the NUL) of a 32-byte hash */
void filesum_hex(const uint8_t h[32], char out[65]);

#endif
