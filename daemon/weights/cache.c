/*
 * daemon/weights/cache.c — the content-addressed cache's get and put.
 *
 * An entry is whole or absent: it is written in tmp/ (under an flock that
 * tells wcache_open it is alive) and renamed into place without replacing
 * an existing entry.  A torn entry can still appear (a crash of the host
 * after the rename, before the data reached the disk) or one can be
 * altered later, so every get checks the payload's hash, and an entry that
 * fails is removed and answered as a miss.
 */
#include "daemon/weights/wsrc_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pprpc/types.h"

static void put_le64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Remove the entry at rel if it is still the file fd was opened on (a put
 * may have replaced it since), and forget it. */
static void drop_bad(struct wsrc *w, const uint8_t key[32], const char *rel, const struct stat *st)
{
	struct stat now;
	struct centry *e;

	pthread_mutex_lock(&w->lock);
	if (!fstatat(w->cache_fd, rel, &now, AT_SYMLINK_NOFOLLOW) && now.st_ino == st->st_ino &&
	    now.st_dev == st->st_dev) {
		(void)unlinkat(w->cache_fd, rel, 0);
		if ((e = cidx_find(&w->cache, key))) {
			w->st.cache_bytes -= e->bytes;
			w->st.cache_entries--;
			cidx_remove(&w->cache, e);
		}
	}
	w->st.cache_bad++;
	w->st.cache_misses++;
	pthread_mutex_unlock(&w->lock);
}

static void count_miss(struct wsrc *w)
{
	pthread_mutex_lock(&w->lock);
	w->st.cache_misses++;
	pthread_mutex_unlock(&w->lock);
}

int wsrc_cache_get(struct wsrc *w, const uint8_t key[32], uint64_t size, void *dst, char *err, size_t errlen)
{
	uint8_t hdr[WCACHE_HDR], sum[32];
	uint64_t t0 = wio_now_ns(), have;
	char rel[68], why[200];
	struct centry *e;
	struct stat st;
	int fd, rc;

	if (w->cache_fd < 0) {
		snprintf(err, errlen, "no weights-cache");
		return PPRPC_EUNSUPP;
	}
	wcache_relpath(key, rel);
	fd = wio_open_beneath(w->cache_fd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	/* a kernel without openat2: the folder is ours, O_NOFOLLOW will do */
	if (fd == -ENOSYS && (fd = openat(w->cache_fd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)) < 0)
		fd = -errno;
	if (fd < 0) {
		count_miss(w);
		snprintf(err, errlen, "cache %.8s: %s", rel + 3, fd == -ENOENT ? "no entry" : strerror(-fd));
		return PPRPC_EHANDLE;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		snprintf(why, sizeof(why), "not a regular file");
		goto bad;
	}
	if ((uint64_t)st.st_size < WCACHE_HDR ||
	    wio_pread(fd, hdr, 0, WCACHE_HDR, 1, why, sizeof(why)) < 0 || memcmp(hdr, WCACHE_MAGIC, 8)) {
		snprintf(why, sizeof(why), "truncated or not an entry (%llu bytes)", (unsigned long long)st.st_size);
		goto bad;
	}
	have = get_le64(hdr + 8);
	if ((uint64_t)st.st_size - WCACHE_HDR != have) {
		snprintf(why, sizeof(why), "truncated: %llu payload bytes of %llu",
			 (unsigned long long)(st.st_size - WCACHE_HDR), (unsigned long long)have);
		goto bad;
	}
	if (have != size) {
		/* A sound entry asked for with another size: the request is
		 * wrong, not the entry, which stays. */
		close(fd);
		count_miss(w);
		snprintf(err, errlen, "cache %.8s: holds %llu bytes, %llu asked", rel + 3, (unsigned long long)have,
			 (unsigned long long)size);
		return PPRPC_EHANDLE;
	}
	if (wio_pread(fd, dst, WCACHE_HDR, size, w->threads, why, sizeof(why)) < 0)
		goto bad;
	if ((rc = filesum_memory(dst, size, w->threads, sum)) < 0) {
		close(fd);
		count_miss(w);
		snprintf(err, errlen, "cache %.8s: hashing failed", rel + 3);
		return rc;
	}
	if (memcmp(sum, hdr + 16, 32)) {
		snprintf(why, sizeof(why), "payload hash mismatch (altered or torn)");
		goto bad;
	}
	/* the entry's mtime is its last use: what eviction after a restart
	 * goes by */
	(void)futimens(fd, NULL);
	close(fd);
	pthread_mutex_lock(&w->lock);
	if ((e = cidx_find(&w->cache, key))) {
		cidx_touch(&w->cache, e);
	} else if (cidx_add(&w->cache, key, (uint64_t)st.st_size)) {
		/* written by another rank sharing the folder: ours to count now */
		w->st.cache_bytes += (uint64_t)st.st_size;
		w->st.cache_entries++;
	}
	w->st.cache_hits++;
	w->st.cache_hit_bytes += size;
	w->st.cache_ns += wio_now_ns() - t0;
	pthread_mutex_unlock(&w->lock);
	return 0;
bad:
	close(fd);
	drop_bad(w, key, rel, &st);
	snprintf(err, errlen, "cache %.8s: bad entry removed: %s", rel + 3, why);
	return PPRPC_EHANDLE;
}

static int write_all(int fd, const void *p, uint64_t n)
{
	uint64_t done = 0;

	while (done < n) {
		size_t want = n - done > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)(n - done);
		ssize_t k = write(fd, (const uint8_t *)p + done, want);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EIO;
		done += (uint64_t)k;
	}
	return 0;
}

/* Make room for bytes under the lock and reserve them; 0 when they cannot
 * fit (other puts in flight hold the rest). */
static int reserve(struct wsrc *w, uint64_t bytes)
{
	int ok;

	pthread_mutex_lock(&w->lock);
	wcache_evict_locked(w, bytes);
	ok = w->st.cache_bytes + w->cache_reserved <= w->cache_max &&
	     bytes <= w->cache_max - w->st.cache_bytes - w->cache_reserved;
	if (ok)
		w->cache_reserved += bytes;
	pthread_mutex_unlock(&w->lock);
	return ok;
}

/* The temporary file, locked (wcache_open leaves locked files alone). */
static int make_tmp(struct wsrc *w, const char *hex, char name[128])
{
	int tries, fd = -1;

	for (tries = 0; tries < 8 && fd < 0; tries++) {
		uint64_t r = 0;

		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
			r = wio_now_ns();
		snprintf(name, 128, "%s.%d.%016llx", hex, (int)getpid(), (unsigned long long)r);
		fd = openat(w->tmp_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	if (flock(fd, LOCK_EX)) {
		int e = errno;

		close(fd);
		(void)unlinkat(w->tmp_fd, name, 0);
		return -e;
	}
	return fd;
}

int wsrc_cache_put(struct wsrc *w, const uint8_t key[32], const void *p, uint64_t size, char *err, size_t errlen)
{
	uint8_t hdr[WCACHE_HDR];
	char rel[68], hex[65], tmp[128];
	uint64_t bytes;
	struct stat st;
	int fd = -1, rc = 0, reserved = 0, placed = 0;

	if (w->cache_fd < 0) {
		snprintf(err, errlen, "no weights-cache");
		return PPRPC_EUNSUPP;
	}
	/* larger than the whole cache: nothing to do */
	if (w->cache_max < WCACHE_HDR || size > w->cache_max - WCACHE_HDR)
		return 0;
	bytes = size + WCACHE_HDR;
	filesum_hex(key, hex);
	wcache_relpath(key, rel);
	if (!fstatat(w->cache_fd, rel, &st, AT_SYMLINK_NOFOLLOW))
		return 0; /* an existing entry is kept */
	memcpy(hdr, WCACHE_MAGIC, 8);
	put_le64(hdr + 8, size);
	if ((rc = filesum_memory(p, size, w->threads, hdr + 16)) < 0) {
		snprintf(err, errlen, "cache put: hashing failed");
		return rc;
	}
	if (!reserve(w, bytes))
		return 0;
	reserved = 1;
	if ((fd = make_tmp(w, hex, tmp)) < 0) {
		snprintf(err, errlen, "cache put: %s/tmp: %s", w->cache_dir, strerror(-fd));
		rc = PPRPC_EIO;
		goto out;
	}
	if ((rc = write_all(fd, hdr, WCACHE_HDR)) < 0 || (rc = write_all(fd, p, size)) < 0) {
		snprintf(err, errlen, "cache put: writing %s/tmp/%s: %s", w->cache_dir, tmp, strerror(-rc));
		rc = PPRPC_EIO;
		goto out;
	}
	if (mkdirat(w->cache_fd, (char[3]){ hex[0], hex[1], 0 }, 0755) && errno != EEXIST) {
		snprintf(err, errlen, "cache put: %s/%.2s: %s", w->cache_dir, hex, strerror(errno));
		rc = PPRPC_EIO;
		goto out;
	}
	/* Never over an existing entry: it may be in use, and it is as good. */
	if (renameat2(w->tmp_fd, tmp, w->cache_fd, rel, RENAME_NOREPLACE)) {
		if (errno != EEXIST) {
			snprintf(err, errlen, "cache put: rename into %s/%s: %s", w->cache_dir, rel, strerror(errno));
			rc = PPRPC_EIO;
		}
		goto out;
	}
	placed = 1;
out:
	if (fd >= 0) {
		if (!placed)
			(void)unlinkat(w->tmp_fd, tmp, 0);
		close(fd);
	}
	pthread_mutex_lock(&w->lock);
	if (reserved)
		w->cache_reserved -= bytes;
	if (placed) {
		struct centry *e = cidx_find(&w->cache, key);

		if (!e && cidx_add(&w->cache, key, bytes)) {
			w->st.cache_bytes += bytes;
			w->st.cache_entries++;
		} else if (!e) {
			/* out of memory: an entry nobody counts would outgrow the bound */
			(void)unlinkat(w->cache_fd, rel, 0);
		}
		w->st.cache_stores++;
		w->st.cache_store_bytes += size;
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}
