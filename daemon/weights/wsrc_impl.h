/*
 * daemon/weights/wsrc_impl.h — the inside of struct wsrc, shared by the
 * files of daemon/weights/ only: the folders, the lock and what it guards
 * (the index of model files, the cache's entries, the counters).
 */
#ifndef PPRPC_DAEMON_WEIGHTS_IMPL_H
#define PPRPC_DAEMON_WEIGHTS_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "daemon/weights/weights.h"

/* A cache entry's file: magic, payload size (u64 LE), payload hash. */
#define WCACHE_MAGIC "PPRPCWC1"
#define WCACHE_HDR 48

/* A model file's identity as far as it was computed, under the key that
 * says it is still the same file (dev, ino, size, mtime). */
struct fent {
	dev_t dev;
	ino_t ino;
	uint64_t size;
	int64_t mtime_ns, ctime_ns;
	int have_head, have_content;
	uint8_t head[32], content[32];
};

/* A cache entry the rank knows of: in a hash chain by key and in the LRU
 * list (head: least recently used). */
struct centry {
	uint8_t key[32];
	uint64_t bytes; /* the file's size, header included */
	struct centry *hnext, *prev, *next;
};

struct cindex {
	struct centry **buckets;
	size_t nbuckets, count;
	struct centry *lru_head, *lru_tail;
};

struct wsrc {
	int threads;
	uint64_t cache_max;
	char *model_dir;  /* NULL: no model files */
	int model_fd;     /* -1 when none */
	char *cache_dir;  /* NULL: no cache */
	int cache_fd, tmp_fd;
	char *sums_dir;   /* CACHE/sums: sidecars of files whose folder is read-only */

	/* Guards everything below.  Never held across reading or hashing a
	 * file: only around the index, the accounting and unlinking entries. */
	pthread_mutex_t lock;
	struct wsrc_stats st;
	struct fent *fents;
	size_t nfents, capfents;
	struct cindex cache;
	uint64_t cache_reserved; /* bytes of puts being written */

	/* wahead.c: mappings read ahead (map_ahead: on), its threads running
	 * (counted under the lock; wsrc_close waits for none) */
	int map_ahead;
	uint64_t (*mem_available)(void);
	_Atomic int ahead_stop;
	int ahead_threads;
	pthread_cond_t ahead_done;

	/* wrecall.c (under the lock): the last load's record, and whether a
	 * client's connection has read it ahead since it was made */
	int recall_on;
	struct wrecord *recall;
	int recalled;
};

/* wrecall.c: what a mapping's graphs asked for, kept for the next load. */
#define WRECORD_NAME 256
#define WRECORD_MAX_REGIONS 1024
struct wrecord {
	char name[WRECORD_NAME]; /* under model-dir */
	uint64_t size, ino;
	int64_t mtime_ns;
	size_t n;
	struct {
		uint64_t off, len;
	} r[WRECORD_MAX_REGIONS];
};

struct wfile {
	int fd;
	char *name;
	dev_t dev;
	ino_t ino;
	uint64_t size;
	int64_t mtime_ns, ctime_ns;
};

/* wfile.c (wfile_check: weights.h) */
/* A read or mapping refused: counted (file_refused); returns rc. */
int wfile_refused(struct wsrc *w, int rc);

/* wio.c */
uint64_t wio_now_ns(void);
int64_t wio_mtime_ns(const struct stat *st);
/* ctime: a write, a truncate, a utime that set mtime back all move it, and
 * no caller can set it, so (size, mtime, ctime, inode) is what "the same
 * file as verified" means. */
int64_t wio_ctime_ns(const struct stat *st);
/* openat2(dirfd, rel, flags, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): an fd
 * or -errno (ENOSYS where the kernel has no openat2: the caller refuses). */
int wio_open_beneath(int dirfd, const char *rel, int flags);
/* Read size bytes at off into dst with up to threads threads (pieces of
 * at least 4 MiB; one thread below a few pieces).  0, or PPRPC_EIO with
 * "truncated" (the file ended early) or the error in err. */
int wio_pread(int fd, void *dst, uint64_t off, uint64_t size, int threads, char *err, size_t errlen);

/* cache_dir.c: the cache folder at open (created, tmp/ emptied of what
 * killed writers left, entries counted, bound enforced). */
int wcache_open(struct wsrc *w, const char *dir, char *err, size_t errlen);
void wcache_close(struct wsrc *w);
/* Evict least recently used entries until need more bytes fit (lock held). */
void wcache_evict_locked(struct wsrc *w, uint64_t need);
/* "xx/HEX" of a key */
void wcache_relpath(const uint8_t key[32], char out[68]);

/* cache_index.c (all under the lock) */
struct centry *cidx_find(struct cindex *c, const uint8_t key[32]);
/* a new entry, most recently used; NULL when out of memory */
struct centry *cidx_add(struct cindex *c, const uint8_t key[32], uint64_t bytes);
void cidx_touch(struct cindex *c, struct centry *e);
void cidx_remove(struct cindex *c, struct centry *e);
void cidx_free(struct cindex *c);

/* wrecall.c: the record read back (wsrc_open) and freed (wsrc_close);
 * wrecall_note takes a mapping's record (owned; NULL accepted) as the last
 * load's; wrecord_parse: the record file's text, or NULL when it is not
 * one (strict; tests/fuzz). */
void wrecall_open(struct wsrc *w);
void wrecall_close(struct wsrc *w);
void wrecall_note(struct wsrc *w, struct wrecord *r);
struct wrecord *wrecord_parse(const char *text, size_t len);
/* wahead.c: the mapping's file, for the record made when it ends; and
 * letting go of a read-ahead that should read all it was asked (no stop) */
void wahead_identify(struct wahead *a, const struct wfile *f);
void wahead_release(struct wahead *a);

/* files.c */
void wfiles_free(struct wsrc *w);

#endif
