/*
 * util/filesum_sidecar.c — the identity kept beside a file (NAME.pprpc-sum,
 * or DEV-INO.pprpc-sum in a fallback folder) and filesum_get, which uses it
 * while it matches the file and computes it otherwise.
 *
 * The text is checked by writing it again from what was parsed and
 * comparing: anything but the one canonical form (a torn write, an edit, a
 * different version) is not used, and the identity is computed again.
 */
#include "util/filesum.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "pprpc/types.h"

/* 2: ctime joined the key (no caller can set it: a file rewritten with its
 * old mtime restored is still a changed file) */
#define VERSION_LINE "pprpc-sum 2\n"
/* a sidecar is about 230 bytes; anything much larger is not one */
#define MAX_TEXT 1024

static long long mtime_ns(const struct stat *st)
{
	return (long long)st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec;
}

static long long ctime_ns(const struct stat *st)
{
	return (long long)st->st_ctim.tv_sec * 1000000000ll + st->st_ctim.tv_nsec;
}

static int format(char *buf, size_t len, const struct stat *st, const struct filesum *s)
{
	char head[65], content[65];

	filesum_hex(s->head, head);
	filesum_hex(s->content, content);
	return snprintf(buf, len, VERSION_LINE "size %llu\nmtime_ns %lld\nctime_ns %lld\ninode %llu\nhead %s\ncontent %s\n",
			(unsigned long long)s->size, mtime_ns(st), ctime_ns(st), (unsigned long long)st->st_ino, head,
			content);
}

static int unhex(const char *s, uint8_t out[32])
{
	int i;

	for (i = 0; i < 64; i++) {
		int c = s[i], v;

		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else
			return -1;
		if (i & 1)
			out[i / 2] |= (uint8_t)v;
		else
			out[i / 2] = (uint8_t)(v << 4);
	}
	return 0;
}

/* The identity in the sidecar at path when it is one and was written for
 * st; -1 otherwise (none, unreadable, stale, malformed: all alike). */
static int load(const char *path, const struct stat *st, struct filesum *out)
{
	char buf[MAX_TEXT + 1], again[MAX_TEXT + 1], head[65], content[65];
	unsigned long long size, ino;
	long long mt, ct;
	struct filesum s;
	struct stat sst;
	ssize_t n;
	int fd, rc = -1;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -1;
	if (fstat(fd, &sst) || !S_ISREG(sst.st_mode) || sst.st_size > MAX_TEXT)
		goto out;
	do
		n = pread(fd, buf, MAX_TEXT, 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		goto out;
	buf[n] = 0;
	if (sscanf(buf, VERSION_LINE "size %llu\nmtime_ns %lld\nctime_ns %lld\ninode %llu\nhead %64s\ncontent %64s", &size,
		   &mt, &ct, &ino, head, content) != 6)
		goto out;
	if (strlen(head) != 64 || strlen(content) != 64 || unhex(head, s.head) || unhex(content, s.content))
		goto out;
	s.size = size;
	if (size != (unsigned long long)st->st_size || mt != mtime_ns(st) || ct != ctime_ns(st) ||
	    ino != (unsigned long long)st->st_ino)
		goto out;
	if (format(again, sizeof(again), st, &s) != (int)n || memcmp(again, buf, (size_t)n))
		goto out;
	*out = s;
	rc = 0;
out:
	close(fd);
	return rc;
}

/* Write the sidecar at path: a temporary file beside it, renamed over it,
 * so a reader sees the old one or the new one.  -1 on any failure. */
static int store(const char *path, const struct stat *st, const struct filesum *s)
{
	char text[MAX_TEXT + 1], tmp[PATH_MAX];
	uint64_t r = 0;
	size_t len, done = 0;
	int fd, n;

	n = format(text, sizeof(text), st, s);
	if (n < 0 || n > MAX_TEXT)
		return -1;
	len = (size_t)n;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)&r << 16);
	n = snprintf(tmp, sizeof(tmp), "%s.tmp.%d.%016llx", path, (int)getpid(), (unsigned long long)r);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -1;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	while (done < len) {
		ssize_t w = write(fd, text + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	if (close(fd) || done != len || rename(tmp, path)) {
		unlink(tmp);
		return -1;
	}
	return 0;
}

static int beside_path(char *buf, size_t len, const char *path)
{
	int n = snprintf(buf, len, "%s%s", path, FILESUM_SUFFIX);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

static int fallback_path(char *buf, size_t len, const char *dir, const struct stat *st)
{
	int n = snprintf(buf, len, "%s/%llu-%llu%s", dir, (unsigned long long)st->st_dev,
			 (unsigned long long)st->st_ino, FILESUM_SUFFIX);

	return n < 0 || (size_t)n >= len ? -1 : 0;
}

int filesum_get(int fd, const char *path, const struct stat *st, const char *fallback_dir, int threads,
		filesum_progress_fn progress, void *arg, struct filesum *out, int *ret_computed, char *err,
		size_t errlen)
{
	const char *name = path ? path : "file";
	char beside[PATH_MAX], fallback[PATH_MAX];
	int have_beside, have_fallback, rc;
	struct filesum s;
	struct stat after;

	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", name);
		return PPRPC_EINVAL;
	}
	have_beside = path && !beside_path(beside, sizeof(beside), path);
	have_fallback = fallback_dir && *fallback_dir && !fallback_path(fallback, sizeof(fallback), fallback_dir, st);
	if ((have_beside && !load(beside, st, &s)) || (have_fallback && !load(fallback, st, &s)))
		goto found;

	s.size = (uint64_t)st->st_size;
	if ((rc = filesum_head(fd, s.size, s.head, err, errlen)) < 0 ||
	    (rc = filesum_content(fd, s.size, threads, progress, arg, s.content, err, errlen)) < 0)
		return rc;
	/* What was hashed must be the file st describes, or the sidecar would
	 * vouch for bytes nobody read. */
	if (fstat(fd, &after)) {
		snprintf(err, errlen, "%s: fstat: %s", name, strerror(errno));
		return PPRPC_EIO;
	}
	if (after.st_size != st->st_size || after.st_ino != st->st_ino || mtime_ns(&after) != mtime_ns(st) ||
	    ctime_ns(&after) != ctime_ns(st)) {
		snprintf(err, errlen, "%s: changed while it was hashed", name);
		return PPRPC_EIO;
	}
	/* Failing to keep the result only costs hashing again next time. */
	if (!(have_beside && !store(beside, st, &s)) && have_fallback)
		(void)store(fallback, st, &s);
	*out = s;
	*ret_computed = 1;
	return 0;
found:
	*out = s;
	*ret_computed = 0;
	return 0;
}
