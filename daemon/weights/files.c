/*
 * daemon/weights/files.c — finding a model file by its identity under
 * model-dir: the client's hint first (openat2, never leaving the folder),
 * else a scan; a candidate must have the size, then the head hash, then the
 * content hash.  What was computed is kept in memory under (dev, ino,
 * size, mtime), so a file is hashed once for the daemon's life even where
 * no sidecar can be written.
 *
 * Nothing outside model-dir is opened: every open is relative to a folder
 * fd with O_NOFOLLOW (scan) or RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
 * (hint), and the scan skips symlinks and anything not a regular file or a
 * folder.
 */
#include "daemon/weights/wsrc_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprpc/types.h"

/* The scan's bounds: a model-dir is a few folders of model files, not a
 * file system to crawl. */
#define MAX_DEPTH 4
#define MAX_ENTRIES 100000
/* Identities kept in memory; past this the oldest are forgotten (and
 * their sidecars read again when needed). */
#define MAX_FENTS 4096

struct lookup {
	struct wsrc *w;
	const struct filesum *id;
	struct wfile *found;
	unsigned long entries, same_size, same_head;
	int stopped; /* the scan reached MAX_ENTRIES */
	int hint_tried; /* the hinted file, already tried: the scan skips it */
	dev_t hint_dev;
	ino_t hint_ino;
	int rc;      /* out of memory: stop */
	char note[320];
};

static void note(struct lookup *lk, const char *fmt_rel, const char *rel, const char *why)
{
	size_t n = strlen(lk->note);

	if (n < sizeof(lk->note) - 1)
		snprintf(lk->note + n, sizeof(lk->note) - n, fmt_rel, n ? "; " : "", rel, why);
}

static int fent_same(const struct fent *e, const struct stat *st)
{
	return e->dev == st->st_dev && e->ino == st->st_ino && e->size == (uint64_t)st->st_size &&
	       e->mtime_ns == wio_mtime_ns(st) && e->ctime_ns == wio_ctime_ns(st);
}

/* A copy of what is known of the file st describes (lock held). */
static void fent_get_locked(struct wsrc *w, const struct stat *st, struct fent *out)
{
	size_t i;

	for (i = 0; i < w->nfents; i++) {
		if (fent_same(&w->fents[i], st)) {
			*out = w->fents[i];
			return;
		}
	}
	memset(out, 0, sizeof(*out));
	out->dev = st->st_dev;
	out->ino = st->st_ino;
	out->size = (uint64_t)st->st_size;
	out->mtime_ns = wio_mtime_ns(st);
	out->ctime_ns = wio_ctime_ns(st);
}

static void fent_put(struct wsrc *w, const struct fent *e)
{
	size_t i;

	pthread_mutex_lock(&w->lock);
	for (i = 0; i < w->nfents; i++) {
		struct fent *f = &w->fents[i];

		if (f->dev == e->dev && f->ino == e->ino && f->size == e->size && f->mtime_ns == e->mtime_ns &&
		    f->ctime_ns == e->ctime_ns) {
			*f = *e;
			goto out;
		}
	}
	if (w->nfents == w->capfents) {
		size_t cap = w->capfents ? w->capfents * 2 : 16;
		struct fent *v;

		if (cap > MAX_FENTS)
			cap = MAX_FENTS;
		if (w->nfents == cap) {
			/* full: forget the oldest */
			memmove(w->fents, w->fents + 1, (w->nfents - 1) * sizeof(*w->fents));
			w->nfents--;
		} else if ((v = realloc(w->fents, cap * sizeof(*v)))) {
			w->fents = v;
			w->capfents = cap;
		} else {
			goto out; /* not kept: only costs a hash later */
		}
	}
	w->fents[w->nfents++] = *e;
out:
	pthread_mutex_unlock(&w->lock);
}

void wfiles_free(struct wsrc *w)
{
	free(w->fents);
	w->fents = NULL;
	w->nfents = w->capfents = 0;
}

/* The content hash of the file: from memory, the sidecar, or read.  0, or
 * -1 with a note (the candidate is passed over). */
static int content_of(struct lookup *lk, int fd, const char *rel, const struct stat *st, struct fent *fe)
{
	struct wsrc *w = lk->w;
	char path[PATH_MAX], msg[200];
	uint64_t t0 = wio_now_ns();
	struct filesum s;
	int computed = 0, n;

	n = snprintf(path, sizeof(path), "%s/%s", w->model_dir, rel);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		note(lk, "%s%s: %s", rel, "path too long");
		return -1;
	}
	if (filesum_get(fd, path, st, w->sums_dir, w->threads, NULL, NULL, &s, &computed, msg, sizeof(msg)) < 0) {
		note(lk, "%s%s: %s", rel, msg);
		return -1;
	}
	/* A sidecar that disagrees with the head just read was written for
	 * other bytes (a file rewritten with its old mtime): read it all. */
	if (!computed && memcmp(s.head, fe->head, 32)) {
		if (filesum_content(fd, fe->size, w->threads, NULL, NULL, s.content, msg, sizeof(msg)) < 0) {
			note(lk, "%s%s: %s", rel, msg);
			return -1;
		}
		computed = 1;
	}
	if (computed) {
		pthread_mutex_lock(&w->lock);
		w->st.hash_bytes += fe->size;
		w->st.hash_ns += wio_now_ns() - t0;
		pthread_mutex_unlock(&w->lock);
	}
	memcpy(fe->content, s.content, 32);
	fe->have_content = 1;
	return 0;
}

/* Is fd (rel, stat st) the file?  1: yes, and fd now belongs to
 * lk->found; 0: no (the caller closes fd); negative: out of memory. */
static int try_file(struct lookup *lk, int fd, const char *rel, const struct stat *st)
{
	struct wsrc *w = lk->w;
	struct wfile *f;
	struct fent fe;
	char msg[200];

	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_size != lk->id->size)
		return 0;
	lk->same_size++;
	pthread_mutex_lock(&w->lock);
	fent_get_locked(w, st, &fe);
	pthread_mutex_unlock(&w->lock);
	if (!fe.have_head) {
		if (filesum_head(fd, fe.size, fe.head, msg, sizeof(msg)) < 0) {
			note(lk, "%s%s: %s", rel, msg);
			return 0;
		}
		fe.have_head = 1;
		fent_put(w, &fe);
	}
	if (memcmp(fe.head, lk->id->head, 32))
		return 0;
	lk->same_head++;
	if (!fe.have_content) {
		if (content_of(lk, fd, rel, st, &fe) < 0)
			return 0;
		fent_put(w, &fe);
	}
	if (memcmp(fe.content, lk->id->content, 32)) {
		/* the case that matters most: the same model's shape, other bytes
		 * (another fine-tune, a damaged copy) */
		note(lk, "%s%s: %s", rel, "the same size and head, other content");
		return 0;
	}
	if (!(f = calloc(1, sizeof(*f))) || !(f->name = strdup(rel))) {
		free(f);
		lk->rc = PPRPC_ENOMEM;
		return PPRPC_ENOMEM;
	}
	f->fd = fd;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->size = (uint64_t)st->st_size;
	f->mtime_ns = wio_mtime_ns(st);
	f->ctime_ns = wio_ctime_ns(st);
	lk->found = f;
	return 1;
}

/* Our own files (sidecars and their temporaries) are never models. */
static int is_ours(const char *name)
{
	return strstr(name, FILESUM_SUFFIX) != NULL;
}

/* Scan the folder dfd (owned: closed here), rel[0..rlen) its path. */
static void scan(struct lookup *lk, int dfd, char *rel, size_t rlen, int depth)
{
	struct dirent *de;
	DIR *d = fdopendir(dfd);

	if (!d) {
		close(dfd);
		return;
	}
	while (!lk->found && !lk->rc && (de = readdir(d))) {
		const char *name = de->d_name;
		struct stat st, st2;
		int n, fd;

		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		if (++lk->entries > MAX_ENTRIES) {
			lk->stopped = 1;
			break;
		}
		if (is_ours(name) || fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		n = snprintf(rel + rlen, PATH_MAX - rlen, "%s%s", rlen ? "/" : "", name);
		if (n < 0 || (size_t)n >= PATH_MAX - rlen)
			goto next;
		if (S_ISDIR(st.st_mode) && depth < MAX_DEPTH) {
			fd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0)
				scan(lk, fd, rel, rlen + (size_t)n, depth + 1);
		} else if (S_ISREG(st.st_mode) && (uint64_t)st.st_size == lk->id->size &&
			   !(lk->hint_tried && st.st_dev == lk->hint_dev && st.st_ino == lk->hint_ino)) {
			/* O_NONBLOCK: if it became a FIFO since fstatat, the open
			 * must not wait for a writer */
			fd = openat(dirfd(d), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
			if (fd >= 0 && (fstat(fd, &st2) || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev ||
					try_file(lk, fd, rel, &st2) != 1))
				close(fd);
		}
next:
		rel[rlen] = 0;
		if (lk->stopped)
			break;
	}
	closedir(d);
}

/* A hint is a relative path that cannot climb out: no leading '/', no
 * ".." component (openat2 would refuse them too; saying so is clearer). */
static const char *hint_problem(const char *hint)
{
	const char *p = hint;

	if (hint[0] == '/')
		return "an absolute path (a hint is relative to model-dir)";
	if (strlen(hint) >= PATH_MAX)
		return "too long";
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return "a \"..\" component (a hint stays beneath model-dir)";
		p += n;
		while (*p == '/')
			p++;
	}
	return NULL;
}

static const char *open_problem(int e)
{
	switch (e) {
	case ELOOP:
		return "a symlink on the way (not followed)";
	case EXDEV:
		return "resolves outside model-dir";
	case ENOENT:
		return "no such file";
	case ENOSYS:
		return "this kernel has no openat2";
	default:
		return strerror(e);
	}
}

static void try_hint(struct lookup *lk, const char *hint)
{
	struct stat st;
	int fd;

	fd = wio_open_beneath(lk->w->model_fd, hint, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		note(lk, "%shint \"%s\": %s", hint, open_problem(-fd));
		return;
	}
	if (fstat(fd, &st)) {
		note(lk, "%shint \"%s\": %s", hint, strerror(errno));
		close(fd);
		return;
	}
	lk->hint_tried = 1;
	lk->hint_dev = st.st_dev;
	lk->hint_ino = st.st_ino;
	if (!S_ISREG(st.st_mode))
		note(lk, "%shint \"%s\": %s", hint, "not a regular file");
	else if ((uint64_t)st.st_size != lk->id->size)
		note(lk, "%shint \"%s\": %s", hint, "another size");
	if (try_file(lk, fd, hint, &st) != 1)
		close(fd);
}

int wsrc_file_find(struct wsrc *w, const struct filesum *id, const char *hint, struct wfile **ret, char *err,
		   size_t errlen)
{
	struct lookup lk = { .w = w, .id = id };
	char rel[PATH_MAX], head[65], content[65];
	const char *why;
	int dfd;

	if (w->model_fd < 0) {
		snprintf(err, errlen, "no model-dir");
		return PPRPC_EUNSUPP;
	}
	if (hint && *hint) {
		if ((why = hint_problem(hint))) {
			pthread_mutex_lock(&w->lock);
			w->st.file_refused++;
			pthread_mutex_unlock(&w->lock);
			snprintf(err, errlen, "hint \"%.200s\" refused: %s", hint, why);
			return PPRPC_EINVAL;
		}
		try_hint(&lk, hint);
	}
	if (!lk.found && !lk.rc) {
		/* a new open of the folder: the scans of other threads have
		 * their own read positions */
		dfd = openat(w->model_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			snprintf(err, errlen, "model-dir %s: %s", w->model_dir, strerror(errno));
			return PPRPC_EIO;
		}
		rel[0] = 0;
		scan(&lk, dfd, rel, 0, 0);
	}
	if (lk.rc) {
		snprintf(err, errlen, "out of memory");
		return lk.rc;
	}
	if (!lk.found) {
		pthread_mutex_lock(&w->lock);
		w->st.file_refused++;
		pthread_mutex_unlock(&w->lock);
		filesum_hex(id->head, head);
		filesum_hex(id->content, content);
		snprintf(err, errlen,
			 "no file under %s with size %llu, head %.16s..., content %.16s... (%lu entries scanned, %lu of "
			 "that size, %lu with that head%s)%s%s",
			 w->model_dir, (unsigned long long)id->size, head, content, lk.entries, lk.same_size,
			 lk.same_head, lk.stopped ? ", scan stopped at its bound" : "", lk.note[0] ? ": " : "", lk.note);
		return PPRPC_EHANDLE;
	}
	*ret = lk.found;
	return 0;
}
