/*
 * daemon/weights/cache_dir.c — the cache folder: made at open, emptied of
 * the temporary files of writers that died, its entries counted and kept
 * under the bound by evicting the least recently used.
 *
 * Layout: CACHE/xx/HEX (entries), CACHE/tmp/ (entries being written),
 * CACHE/sums/ (sidecars of model files whose own folder is read-only).
 */
#include "daemon/weights/wsrc_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "pprpc/types.h"

void wcache_relpath(const uint8_t key[32], char out[68])
{
	char hex[65];

	filesum_hex(key, hex);
	snprintf(out, 68, "%.2s/%s", hex, hex);
}

/* mkdir -p: the folders on the way are made too. */
static int make_dirs(const char *dir)
{
	char buf[PATH_MAX];
	size_t i, n = strlen(dir);

	if (n == 0 || n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != 0)
			continue;
		buf[i] = 0;
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		buf[i] = dir[i];
	}
	return 0;
}

/* Remove what killed writers left in tmp/.  A writer holds an exclusive
 * flock on its temporary file while it writes, and the kernel drops it
 * when the writer dies: a file we can lock is a leftover (another rank
 * sharing the folder keeps the files it is writing). */
static void clean_tmp(int tmp_fd)
{
	/* a new open of the folder, not dup(): a dup shares the read position */
	int dfd = openat(tmp_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct dirent *de;
	DIR *d;

	if (dfd < 0)
		return;
	if (!(d = fdopendir(dfd))) {
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		int fd, leftover = 1;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		fd = openat(tmp_fd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (fd >= 0) {
			if (flock(fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK)
				leftover = 0;
			close(fd);
		}
		if (leftover)
			(void)unlinkat(tmp_fd, de->d_name, 0);
	}
	closedir(d);
}

static int is_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[n] == 0;
}

static int unhex_key(const char *s, uint8_t key[32])
{
	int i;

	for (i = 0; i < 32; i++) {
		unsigned int v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		key[i] = (uint8_t)v;
	}
	return 0;
}

struct found {
	uint8_t key[32];
	uint64_t bytes;
	int64_t mtime_ns;
};

struct found_list {
	struct found *v;
	size_t n, cap;
};

static int found_push(struct found_list *l, const struct found *f)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct found *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = *f;
	return 0;
}

static int by_mtime(const void *a, const void *b)
{
	const struct found *x = a, *y = b;

	return x->mtime_ns < y->mtime_ns ? -1 : x->mtime_ns > y->mtime_ns;
}

/* The entries of one xx/ folder (names other than 64 hex digits starting
 * with xx are not entries and are left alone). */
static int list_sub(int cache_fd, const char *xx, struct found_list *l)
{
	int dfd = openat(cache_fd, xx, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (dfd < 0)
		return 0;
	if (!(d = fdopendir(dfd))) {
		close(dfd);
		return 0;
	}
	while ((de = readdir(d))) {
		struct found f;
		struct stat st;

		if (!is_hex(de->d_name, 64) || memcmp(de->d_name, xx, 2) || unhex_key(de->d_name, f.key))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		f.bytes = (uint64_t)st.st_size;
		f.mtime_ns = wio_mtime_ns(&st);
		if ((rc = found_push(l, &f)) < 0)
			break;
	}
	closedir(d);
	return rc;
}

/* Count the entries, oldest use first into the LRU list. */
static int count_entries(struct wsrc *w, char *err, size_t errlen)
{
	struct found_list l = { 0 };
	struct dirent *de;
	int dfd = openat(w->cache_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
	size_t i;
	DIR *d;

	if (dfd < 0 || !(d = fdopendir(dfd))) {
		if (dfd >= 0)
			close(dfd);
		snprintf(err, errlen, "weights-cache %s: %s", w->cache_dir, strerror(errno));
		return PPRPC_EIO;
	}
	while ((de = readdir(d)) && rc == 0)
		if (is_hex(de->d_name, 2))
			rc = list_sub(w->cache_fd, de->d_name, &l);
	closedir(d);
	if (rc < 0)
		goto nomem;
	if (l.n)
		qsort(l.v, l.n, sizeof(*l.v), by_mtime);
	for (i = 0; i < l.n; i++) {
		if (!cidx_add(&w->cache, l.v[i].key, l.v[i].bytes))
			goto nomem;
		w->st.cache_bytes += l.v[i].bytes;
		w->st.cache_entries++;
	}
	free(l.v);
	return 0;
nomem:
	free(l.v);
	snprintf(err, errlen, "weights-cache %s: out of memory counting its entries", w->cache_dir);
	return PPRPC_ENOMEM;
}

int wcache_open(struct wsrc *w, const char *dir, char *err, size_t errlen)
{
	size_t n = strlen(dir) + sizeof("/sums");
	int rc;

	if ((rc = make_dirs(dir)) < 0) {
		snprintf(err, errlen, "weights-cache %s: %s", dir, strerror(-rc));
		return PPRPC_EIO;
	}
	if (!(w->cache_dir = strdup(dir)) || !(w->sums_dir = malloc(n))) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	snprintf(w->sums_dir, n, "%s/sums", dir);
	w->cache_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->cache_fd < 0)
		goto io;
	if ((mkdirat(w->cache_fd, "tmp", 0755) && errno != EEXIST) ||
	    (mkdirat(w->cache_fd, "sums", 0755) && errno != EEXIST))
		goto io;
	w->tmp_fd = openat(w->cache_fd, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (w->tmp_fd < 0)
		goto io;
	clean_tmp(w->tmp_fd);
	if ((rc = count_entries(w, err, errlen)) < 0)
		return rc;
	/* the bound may have been lowered since the entries were written */
	wcache_evict_locked(w, 0);
	return 0;
io:
	snprintf(err, errlen, "weights-cache %s: %s", dir, strerror(errno));
	return PPRPC_EIO;
}

void wcache_close(struct wsrc *w)
{
	cidx_free(&w->cache);
	if (w->tmp_fd >= 0)
		close(w->tmp_fd);
	if (w->cache_fd >= 0)
		close(w->cache_fd);
	w->tmp_fd = w->cache_fd = -1;
	free(w->cache_dir);
	free(w->sums_dir);
	w->cache_dir = w->sums_dir = NULL;
}

void wcache_evict_locked(struct wsrc *w, uint64_t need)
{
	struct centry *e;
	char rel[68];

	while ((e = w->cache.lru_head) &&
	       (w->st.cache_bytes + w->cache_reserved > w->cache_max ||
		need > w->cache_max - w->st.cache_bytes - w->cache_reserved)) {
		wcache_relpath(e->key, rel);
		(void)unlinkat(w->cache_fd, rel, 0);
		w->st.cache_bytes -= e->bytes;
		w->st.cache_entries--;
		w->st.cache_evictions++;
		cidx_remove(&w->cache, e);
	}
}
