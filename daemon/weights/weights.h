/*
 * daemon/weights/weights.h — where a rank's weight bytes come from besides
 * the client's link: its own copy of the model (model-dir) and a
 * content-addressed cache (weights-cache).  Issue 30, doc/weights.md.
 *
 * Nothing is trusted by name.  The client names a file by its identity
 * (util/filesum.h: size, head hash, content hash); the rank looks for a
 * regular file under model-dir with that size and head hash and accepts it
 * only when its own content hash (computed once, kept in the sidecar) is
 * the same.  The client may give the file's name as a hint (a relative path
 * under model-dir, no "..", no symlink on the way: opened with openat2
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS); a hint that does not resolve
 * beneath model-dir is refused with a reason and the lookup scans instead.
 * Nothing outside model-dir and the cache folder is ever opened: the scan
 * skips symlinks and never leaves the folder.
 *
 * A read checks the file again around it (fstat before and after: size,
 * mtime, inode); a file changed, truncated or replaced under the rank fails
 * the read with a reason, and the client sends the bytes instead.
 *
 * The cache holds byte ranges under a 32-byte key the client computes
 * (SHA-256 of the model file's content hash, the range's offset and size;
 * or of the bytes themselves when they come from no file).  An entry is a
 * file CACHE/xx/HEX: a header (magic, size, the payload's content hash,
 * util/filesum.h's definition) and the payload.  It is written as a
 * temporary file in CACHE/tmp and renamed into place, so a rank killed
 * mid-write leaves only a temporary file (removed at the next open) and
 * never a torn entry; every read checks the payload's hash, and an entry
 * that fails (torn by a crash of the host, truncated, altered) is removed
 * and reported as a miss.  The cache is bounded (weights-cache-mib): a store
 * beyond it evicts the least recently used entries first (a hit touches its
 * entry's mtime).  Only what the client marks as weights is ever stored: the
 * client decides (it knows GGML_BACKEND_BUFFER_USAGE_WEIGHTS), the cache
 * stores what it is given under its key.
 *
 * Thread safety: wsrc_* may be called from any thread (the device workers
 * read, the loop looks up); the object locks what it shares.
 */
#ifndef PPRPC_DAEMON_WEIGHTS_H
#define PPRPC_DAEMON_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "util/filesum.h"

struct wsrc;
struct wahead;

struct wsrc_conf {
	const char *model_dir;      /* NULL or "": no model files */
	const char *cache_dir;      /* NULL or "": no cache */
	uint64_t cache_max_bytes;   /* the cache's bound (entries, headers included) */
	int threads;                /* parallel reads and hashing (>= 1) */
	int map_ahead;              /* a mapped range is read ahead (wahead.c) */
	int map_recall;             /* ... and the last load's again at a client's HELLO (wrecall.c) */
	/* the host's MemAvailable in bytes (the daemon's hostmem_meminfo);
	 * NULL: read-ahead unbounded */
	uint64_t (*mem_available)(void);
};

/* Counters (STATS): what was read from where. */
struct wsrc_stats {
	uint64_t file_reads, file_bytes, file_ns;       /* ranges read from model files */
	uint64_t file_refused;                          /* lookups or reads refused (mismatch, changed, ...) */
	uint64_t cache_hits, cache_hit_bytes, cache_ns; /* ranges read from the cache */
	uint64_t cache_misses;                          /* no entry, or one that failed its check */
	uint64_t cache_bad;                             /* entries removed because their check failed */
	uint64_t cache_stores, cache_store_bytes;       /* entries written */
	uint64_t cache_evictions;
	uint64_t cache_bytes, cache_entries;            /* in the cache now */
	uint64_t hash_bytes, hash_ns;                   /* model files hashed (sidecars computed) */
	uint64_t maps, map_bytes;                       /* ranges mapped as buffers (wfile_map) */
	uint64_t mapped_bytes;                          /* of those, mapped now */
	uint64_t ahead_asked, ahead_bytes, ahead_ns;    /* mapped bytes graphs read, asked ahead; read; reading time */
};

/* Open the sources: checks the folders (model-dir readable; the cache
 * folder created if missing, its temporary files of a killed rank removed,
 * its size counted).  0 or a negative PPRPC_E* code with the reason. */
int wsrc_open(const struct wsrc_conf *conf, struct wsrc **ret, char *err, size_t errlen);
void wsrc_close(struct wsrc *w);  /* NULL accepted */
int wsrc_has_files(const struct wsrc *w);
int wsrc_has_cache(const struct wsrc *w);

/* A model file found and verified: an open fd and what was checked. */
struct wfile;

/* The file under model-dir with identity id (hint: the client's relative
 * name, may be NULL).  The first lookup of a file may hash it (once; the
 * sidecar keeps the result).  0 with *ret (release with wfile_put), or
 * PPRPC_EUNSUPP (no model-dir), PPRPC_EINVAL (a hint outside model-dir),
 * PPRPC_EHANDLE (no file with this identity: err says what was compared)
 * or PPRPC_EIO. */
int wsrc_file_find(struct wsrc *w, const struct filesum *id, const char *hint, struct wfile **ret, char *err,
		   size_t errlen);
void wfile_put(struct wfile *f);
/* The file's path relative to model-dir, for messages. */
const char *wfile_name(const struct wfile *f);
/* Read size bytes at offset of the file into dst (host memory), in
 * parallel; checks the file is still what was verified (size, mtime, inode,
 * before and after).  0 or PPRPC_ERANGE (outside the file), PPRPC_EIO (a
 * short read: truncated; changed under the rank) with the reason. */
int wfile_read(struct wsrc *w, struct wfile *f, uint64_t offset, uint64_t size, void *dst, char *err,
	       size_t errlen);

/* The cache entry under key into dst (size bytes: the entry must hold
 * exactly that many), its hash checked.  0, or PPRPC_EUNSUPP (no cache),
 * PPRPC_EHANDLE (a miss: none, or a bad entry, removed; err says which). */
int wsrc_cache_get(struct wsrc *w, const uint8_t key[32], uint64_t size, void *dst, char *err, size_t errlen);
/* Store size bytes under key (atomically; an existing entry is kept).
 * Evicts to stay under the bound; bytes larger than the bound are not
 * stored (0: nothing to do).  0 or a negative code with the reason. */
int wsrc_cache_put(struct wsrc *w, const uint8_t key[32], const void *p, uint64_t size, char *err, size_t errlen);

/* 0 while the open file is still the verified one (size, mtime, ctime,
 * inode), else PPRPC_EIO with why (when: "before the read", ...). */
int wfile_check(const struct wfile *f, const char *when, char *err, size_t errlen);
/* Map size bytes at offset of the file copy-on-write (private, no swap
 * reserved: the rank's writes, if any, stay its own), the bytes at an
 * address aligned to align (a power of two; the offset's phase in its page
 * must allow it, else PPRPC_EINVAL); pages are read as they are first
 * touched.  Checks the file is still the verified one first.  *ret_ptr: the
 * bytes; *ret_map, *ret_maplen: what to munmap.  0, or PPRPC_ERANGE,
 * PPRPC_EINVAL, PPRPC_EIO (changed), PPRPC_ENOMEM (no address space) with
 * the reason.  A mapping sees the file: one rewritten in place afterwards
 * changes the bytes, one truncated makes reading past its end a SIGBUS
 * (wsrc_map_fault names it); doc/weights.md says replace by rename.
 * *ret_ahead: the mapping's read-ahead (below), stopped when it goes. */
int wfile_map(struct wsrc *w, struct wfile *f, uint64_t offset, uint64_t size, uint64_t align, void **ret_ptr,
	      void **ret_map, uint64_t *ret_maplen, struct wahead **ret_ahead, char *err, size_t errlen);
/* Forget a mapping of wfile_map of size bytes (before munmap). */
void wsrc_unmapped(struct wsrc *w, void *map, uint64_t size);

/* wahead.c: the regions of a mapping that graphs will read, read into the
 * page cache ahead of them.  wfile_map makes one per mapping (*ret_ahead;
 * NULL when map-read-ahead is off or out of memory: the graphs' faults
 * read the pages instead).  wahead_want: read [off, off + len) of the
 * mapped bytes (offsets from the bytes' start, as the buffer's) ahead,
 * after what was asked before, once (any thread; NULL accepted).
 * wahead_stop: the mapping is going (the threads end between pieces). */
struct wahead *wahead_new(struct wsrc *w, int fd, uint64_t off, uint64_t len);
void wahead_want(struct wahead *a, uint64_t off, uint64_t len);
void wahead_stop(struct wahead *a);
/* Stop every read-ahead of w and wait for its threads (wsrc_close). */
void wahead_wait_all(struct wsrc *w);

/* wrecall.c: a client connected: the first time since the rank opened its
 * sources or since a mapping ended, start reading ahead what the last
 * load's graphs read (map-recall; needs map-read-ahead).  The bytes asked
 * (0: nothing) and, when there is something to say, what (for the log).
 * Loop. */
uint64_t wsrc_recall(struct wsrc *w, char *what, size_t whatlen);

void wsrc_stats_get(struct wsrc *w, struct wsrc_stats *out);

#endif
