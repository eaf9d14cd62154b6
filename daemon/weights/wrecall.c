/*
 * daemon/weights/wrecall.c — what the last load's graphs read from a mapped
 * copy, read again when a client connects (setting map-recall).
 *
 * Why: llama.cpp maps its model with MAP_POPULATE and reads the whole file
 * before it makes a buffer; only then does a rank learn which copy and
 * range to map, and its graphs' read-ahead (wahead.c) starts after the
 * client's read has ended.  With a disk of its own a rank could read its
 * share side by side with the client, but nothing tells it what to read
 * that early (issue 30: a cold load cost the client's read plus the ranks',
 * one after the other).  A rank restarted for the same model — A/B work,
 * an upgrade, a reboot — knows what its last load read: when a client
 * connects, it starts reading that again.
 *
 * The record: when a mapping whose graphs asked for regions ends, the file
 * (its name under model-dir, size, inode, mtime) and those regions, kept
 * in memory and written (a temporary file renamed into place) as
 * model-dir/.pprpc-last-load, or as the cache's sums/last-load where
 * model-dir is read-only; read back at open.  At the first client HELLO
 * after the open or after a record was made, the file is opened beneath
 * model-dir, checked to be the same file, and the regions handed to a
 * read-ahead (threads, sendfile, at most half of MemAvailable) that reads
 * them all.  A record that does not parse, a file changed or gone: nothing
 * is read.  Nothing here is needed for correctness: it warms the page
 * cache, and a client loading another model wastes one read of the last
 * one's regions.
 */

#include "daemon/weights/wsrc_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pprpc/types.h"

#define RECORD_NAME ".pprpc-last-load"
#define RECORD_SUMS_NAME "last-load"
#define RECORD_MAGIC "pprpc-last-load 1"

/* The record as a file: the magic line, then
 *   file NAME
 *   id SIZE INO MTIME_NS
 *   region OFF LEN      (at most WRECORD_MAX_REGIONS)
 * Parsed strictly: anything else makes the whole record void. */

/* The name is a path under model-dir as the files index gives it: no
 * leading '/', no "..", no control characters (it goes into a line). */
static int name_ok(const char *s)
{
	if (!*s || *s == '/' || strlen(s) >= WRECORD_NAME)
		return 0;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return 0;
	for (const char *p = s; *p;) {
		size_t n = strcspn(p, "/");

		if ((n == 2 && !strncmp(p, "..", 2)) || (n == 1 && *p == '.') || n == 0)
			return 0;
		p += n;
		if (*p == '/' && !*++p)
			return 0; /* a trailing '/' */
	}
	return 1;
}

struct wrecord *wrecord_parse(const char *text, size_t len)
{
	struct wrecord *r = NULL;
	char *buf = malloc(len + 1), *save = NULL, *line;
	int have_file = 0, have_id = 0;

	if (!buf)
		return NULL;
	memcpy(buf, text, len);
	buf[len] = '\0';
	if (memchr(buf, '\0', len))
		goto bad;
	r = calloc(1, sizeof(*r));
	if (!r)
		goto bad;
	line = strtok_r(buf, "\n", &save);
	if (!line || strcmp(line, RECORD_MAGIC))
		goto bad;
	while ((line = strtok_r(NULL, "\n", &save))) {
		uint64_t a, b, c;
		int64_t m;
		int used = -1;

		if (!strncmp(line, "file ", 5)) {
			if (have_file || !name_ok(line + 5))
				goto bad;
			snprintf(r->name, sizeof(r->name), "%s", line + 5);
			have_file = 1;
		} else if (sscanf(line, "id %" SCNu64 " %" SCNu64 " %" SCNd64 "%n", &a, &b, &m, &used) == 3 &&
			   used == (int)strlen(line)) {
			if (have_id)
				goto bad;
			r->size = a, r->ino = b, r->mtime_ns = m;
			have_id = 1;
		} else if (sscanf(line, "region %" SCNu64 " %" SCNu64 "%n", &a, &c, &used) == 2 &&
			   used == (int)strlen(line)) {
			if (r->n == WRECORD_MAX_REGIONS || c == 0 || a > r->size || c > r->size - a)
				goto bad;
			r->r[r->n].off = a;
			r->r[r->n].len = c;
			r->n++;
		} else {
			goto bad;
		}
	}
	if (!have_file || !have_id || r->n == 0)
		goto bad;
	free(buf);
	return r;
bad:
	free(buf);
	free(r);
	return NULL;
}

/* The record's folder and name: model-dir where it can be written, else
 * the cache's sums/ folder; -1 when neither. */
static int record_dir(struct wsrc *w, const char **name)
{
	if (w->model_fd >= 0 && faccessat(w->model_fd, ".", W_OK, AT_EACCESS) == 0) {
		*name = RECORD_NAME;
		return w->model_fd;
	}
	if (w->sums_dir) {
		int fd = open(w->sums_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		*name = RECORD_SUMS_NAME;
		return fd; /* the caller closes it (not model_fd) */
	}
	return -1;
}

static void dir_done(struct wsrc *w, int dfd)
{
	if (dfd >= 0 && dfd != w->model_fd)
		close(dfd);
}

static void record_write(struct wsrc *w, const struct wrecord *r)
{
	const char *name;
	char tmp[64];
	int dfd = record_dir(w, &name), fd;
	FILE *f;

	if (dfd < 0)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", name, (long)getpid());
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		dir_done(w, dfd);
		return;
	}
	fprintf(f, "%s\nfile %s\nid %" PRIu64 " %" PRIu64 " %" PRId64 "\n", RECORD_MAGIC, r->name, r->size, r->ino,
		r->mtime_ns);
	for (size_t i = 0; i < r->n; i++)
		fprintf(f, "region %" PRIu64 " %" PRIu64 "\n", r->r[i].off, r->r[i].len);
	/* No fsync (this runs on the loop as a buffer goes): a record cut
	 * short by a crash of the host parses as fewer regions or not at
	 * all, and only a read-ahead depends on it. */
	if (fclose(f) == 0)
		renameat(dfd, tmp, dfd, name);
	else
		unlinkat(dfd, tmp, 0);
	dir_done(w, dfd);
}

void wrecall_open(struct wsrc *w)
{
	/* the longest record: its lines, each "region" line at most 7 + 20 +
	 * 1 + 20 + 1 bytes, and one byte more to see it ended */
	const size_t max = WRECORD_MAX_REGIONS * 50 + 512;
	const char *name;
	int dfd = record_dir(w, &name), fd;
	char *buf = NULL;
	ssize_t n;

	if (!w->recall_on || dfd < 0 || !(buf = malloc(max)))
		goto out;
	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		goto out;
	n = read(fd, buf, max);
	close(fd);
	if (n > 0 && (size_t)n < max)
		w->recall = wrecord_parse(buf, (size_t)n);
out:
	free(buf);
	dir_done(w, dfd);
}

void wrecall_close(struct wsrc *w)
{
	free(w->recall);
	w->recall = NULL;
}

void wrecall_note(struct wsrc *w, struct wrecord *r)
{
	if (!w->recall_on || !r || r->n == 0) {
		free(r);
		return;
	}
	record_write(w, r);
	pthread_mutex_lock(&w->lock);
	free(w->recall);
	w->recall = r;
	w->recalled = 0; /* the next client reads it again */
	pthread_mutex_unlock(&w->lock);
}

uint64_t wsrc_recall(struct wsrc *w, char *what, size_t whatlen)
{
	struct wrecord *r = NULL;
	struct wahead *a;
	struct stat st;
	uint64_t bytes = 0;
	int fd;

	what[0] = '\0';
	if (!w || !w->recall_on || w->model_fd < 0)
		return 0;
	pthread_mutex_lock(&w->lock);
	if (!w->recalled && w->recall && (r = malloc(sizeof(*r))))
		*r = *w->recall; /* a copy: a mapping ending meanwhile replaces the record */
	w->recalled = 1;
	pthread_mutex_unlock(&w->lock);
	if (!r)
		return 0;
	fd = wio_open_beneath(w->model_fd, r->name, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(what, whatlen, "the last load's file %s: %s; nothing read ahead", r->name, strerror(-fd));
		free(r);
		return 0;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != r->size || (uint64_t)st.st_ino != r->ino ||
	    wio_mtime_ns(&st) != r->mtime_ns) {
		snprintf(what, whatlen, "the last load's file %s changed since; nothing read ahead", r->name);
		close(fd);
		free(r);
		return 0;
	}
	a = wahead_new(w, fd, 0, r->size);
	close(fd); /* wahead keeps its own */
	if (!a) {
		free(r);
		return 0;
	}
	for (size_t i = 0; i < r->n; i++) {
		wahead_want(a, r->r[i].off, r->r[i].len);
		bytes += r->r[i].len;
	}
	wahead_release(a);
	snprintf(what, whatlen, "reading ahead what the last load read: %s, %.1f MiB in %zu regions", r->name,
		 bytes / 1048576.0, r->n);
	free(r);
	return bytes;
}
