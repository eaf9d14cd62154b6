/*
 * daemon/weights/wahead.c — the weights a graph will read from a mapped
 * model range, read into the page cache ahead of it.
 *
 * A mapping reads nothing at load: the first graph faults its pages in, a
 * read-around of a few hundred KiB at a time on the thread that computes
 * (issue 30: on a cold page cache a CPU rank's share of a 2.4 GB model
 * came in at a fraction of the disk's speed).  So when a graph is created
 * over a mapped buffer, the regions of its tensors there are handed to
 * threads that read them in graph order, in large requests, while the
 * graph (or the stage before it) computes.  Only those regions: llama.cpp
 * maps a device the range from its first weight to its last in file order,
 * which for the last stage of a llama also spans every other stage's
 * layers (2189 MiB for 1118 MiB of its own, measured): reading the whole
 * range made a cold load slower, not faster.
 *
 * How: sendfile() to /dev/null, one open file per thread.  It reads
 * through the page cache as read() does (large folios, which the graph's
 * faults then map in large pieces) and copies nothing; pages already
 * cached cost a lookup.  Each thread reads whole regions through an open
 * file of its own (util/reopen.h): threads taking turns on one, or on
 * pieces of one region, looked like random reads to the kernel, the pages
 * came in singly and the graph computed over them at a third of the speed
 * (measured).
 * MADV_WILLNEED fills the cache with single pages the same way, and
 * MADV_SEQUENTIAL made a warm load three times slower.
 *
 * A mapping reads ahead at most half the memory the host had available
 * when it was made: a share larger than that would push out, before the
 * graph got there, what it had read; past that the graph's faults read.
 *
 * Nothing here is needed for correctness: an error ends a region's
 * read-ahead (the graph's faults read what is left, and report what
 * fails), a mapping freed stops it between pieces, and wsrc_close waits
 * for every thread before the counters go.
 */

#include "daemon/weights/wsrc_impl.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "util/reopen.h"

/* Regions are asked for in CHUNKs (a bitmap says which were): a tensor
 * asked for by several graphs, or by views, is read once. */
#define CHUNK (2u << 20)
/* One request of a thread: large enough for the disk's full speed, small
 * enough that a freed mapping stops the work within milliseconds. */
#define PIECE (16u << 20)
#define MAX_THREADS 8

struct region {
	uint64_t off, len; /* in the file */
};

struct wahead {
	struct wsrc *w;
	int fd;             /* dup'ed: the mapping's file */
	uint64_t off, len;  /* the mapping's range of the file */
	uint64_t budget;    /* bytes it may ask for (the top: half of MemAvailable) */
	uint64_t asked_bytes; /* of the budget */
	pthread_mutex_t lock;
	uint8_t *asked;     /* a bit per CHUNK of the range */
	struct region *q;   /* to read, in the order asked */
	size_t qhead, qlen, qcap;
	int running;        /* threads reading */
	_Atomic int stop;
	_Atomic int refs;   /* the owner's and one per thread */
	/* the mapping's file (wahead_identify), for the last load's record
	 * (wrecall.c) made when it stops; none for the recall's own */
	int have_id;
	char name[WRECORD_NAME];
	uint64_t size, ino;
	int64_t mtime_ns;
};

static void ahead_unref(struct wahead *a)
{
	if (atomic_fetch_sub(&a->refs, 1) != 1)
		return;
	close(a->fd);
	pthread_mutex_destroy(&a->lock);
	free(a->asked);
	free(a->q);
	free(a);
}

struct wahead *wahead_new(struct wsrc *w, int fd, uint64_t off, uint64_t len)
{
	struct wahead *a;

	if (!w->map_ahead || len == 0)
		return NULL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->asked = calloc((size_t)((len + CHUNK - 1) / CHUNK + 7) / 8, 1);
	a->fd = dup(fd);
	if (!a->asked || a->fd < 0 || pthread_mutex_init(&a->lock, NULL)) {
		if (a->fd >= 0)
			close(a->fd);
		free(a->asked);
		free(a);
		return NULL;
	}
	a->w = w;
	a->off = off;
	a->len = len;
	/* half of what the host could give the page cache now (wsrc_conf:
	 * mem_available; none: no bound) */
	a->budget = w->mem_available ? w->mem_available() / 2 : UINT64_MAX;
	atomic_store(&a->refs, 1);
	return a;
}

/* The next region to read, whole (lock held): 0 when none is left.  A
 * region is never shared between threads: each reads its own front to back
 * (the readahead state, above). */
static int take(struct wahead *a, struct region *r)
{
	if (a->qhead == a->qlen)
		return 0;
	*r = a->q[a->qhead++];
	return 1;
}

/* A region, PIECE by PIECE (stopped between them), counted as it goes. */
static void region_read(struct wahead *a, int null_fd, int fd, const struct region *r)
{
	off_t o = (off_t)r->off;
	uint64_t left = r->len;

	while (left > 0 && !atomic_load(&a->stop) && !atomic_load(&a->w->ahead_stop)) {
		uint64_t piece = left < PIECE ? left : PIECE, got = 0, t0 = wio_now_ns();

		while (got < piece) {
			ssize_t n = sendfile(null_fd, fd, &o, (size_t)(piece - got));

			if (n <= 0)
				break; /* an error or the file's end: the graph's faults say what */
			got += (uint64_t)n;
		}
		/* counted as it goes: bytes over time is the rate, mid-load too */
		pthread_mutex_lock(&a->w->lock);
		a->w->st.ahead_bytes += got;
		a->w->st.ahead_ns += wio_now_ns() - t0;
		pthread_mutex_unlock(&a->w->lock);
		if (got < piece)
			return;
		left -= piece;
	}
}

static void *ahead_thread(void *p)
{
	struct wahead *a = p;
	struct wsrc *w = a->w;
	/* an open file of its own (the readahead state: see the top) */
	int fd = fd_reopen(a->fd), null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	struct region r;

	pthread_mutex_lock(&a->lock);
	while (fd >= 0 && null_fd >= 0 && !atomic_load(&a->stop) && !atomic_load(&w->ahead_stop) && take(a, &r)) {
		pthread_mutex_unlock(&a->lock);
		region_read(a, null_fd, fd, &r);
		pthread_mutex_lock(&a->lock);
	}
	a->running--;
	pthread_mutex_unlock(&a->lock);
	if (fd >= 0)
		close(fd);
	if (null_fd >= 0)
		close(null_fd);
	pthread_mutex_lock(&w->lock);
	if (--w->ahead_threads == 0)
		pthread_cond_broadcast(&w->ahead_done);
	pthread_mutex_unlock(&w->lock);
	ahead_unref(a);
	return NULL;
}

/* Queue [off, off + len) of the range (lock held); 0 or -1 (no memory). */
static int enqueue(struct wahead *a, uint64_t off, uint64_t len)
{
	struct region *last = a->qlen > a->qhead ? &a->q[a->qlen - 1] : NULL;

	if (last && last->off + last->len == a->off + off) {
		last->len += len;
		return 0;
	}
	if (a->qhead > 0 && a->qhead == a->qlen)
		a->qhead = a->qlen = 0;
	if (a->qlen == a->qcap) {
		size_t cap = a->qcap ? 2 * a->qcap : 64;
		struct region *v = realloc(a->q, cap * sizeof(*v));

		if (!v)
			return -1;
		a->q = v;
		a->qcap = cap;
	}
	a->q[a->qlen].off = a->off + off;
	a->q[a->qlen].len = len;
	a->qlen++;
	return 0;
}

static void start_threads(struct wahead *a)
{
	struct wsrc *w = a->w;
	int want = w->threads < MAX_THREADS ? w->threads : MAX_THREADS;
	pthread_attr_t attr;

	if (pthread_attr_init(&attr))
		return;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* no more threads than regions waiting: a region is one thread's */
	while (a->running < want && (size_t)a->running < a->qlen - a->qhead) {
		pthread_t t;

		/* counted before it exists, under the lock wsrc_close waits on */
		pthread_mutex_lock(&w->lock);
		if (atomic_load(&w->ahead_stop)) {
			pthread_mutex_unlock(&w->lock);
			break;
		}
		w->ahead_threads++;
		pthread_mutex_unlock(&w->lock);
		atomic_fetch_add(&a->refs, 1);
		if (pthread_create(&t, &attr, ahead_thread, a) != 0) {
			pthread_mutex_lock(&w->lock);
			if (--w->ahead_threads == 0)
				pthread_cond_broadcast(&w->ahead_done);
			pthread_mutex_unlock(&w->lock);
			atomic_fetch_sub(&a->refs, 1);
			break;
		}
		a->running++;
	}
	pthread_attr_destroy(&attr);
}

void wahead_want(struct wahead *a, uint64_t off, uint64_t len)
{
	uint64_t added = 0;

	if (!a || len == 0 || off >= a->len)
		return;
	if (len > a->len - off)
		len = a->len - off;
	pthread_mutex_lock(&a->lock);
	for (uint64_t c = off / CHUNK; c <= (off + len - 1) / CHUNK; c++) {
		uint64_t s = c * CHUNK, e = s + CHUNK < a->len ? s + CHUNK : a->len;

		if (a->asked[c / 8] & (1u << (c % 8)))
			continue;
		if (e - s > a->budget - a->asked_bytes || enqueue(a, s, e - s) < 0)
			break;
		a->asked_bytes += e - s;
		a->asked[c / 8] |= (uint8_t)(1u << (c % 8));
		added += e - s;
	}
	if (added) {
		pthread_mutex_lock(&a->w->lock);
		a->w->st.ahead_asked += added;
		pthread_mutex_unlock(&a->w->lock);
		start_threads(a);
	}
	pthread_mutex_unlock(&a->lock);
}

void wahead_identify(struct wahead *a, const struct wfile *f)
{
	if (!a || strlen(f->name) >= sizeof(a->name))
		return;
	snprintf(a->name, sizeof(a->name), "%s", f->name);
	a->size = f->size;
	a->ino = (uint64_t)f->ino;
	a->mtime_ns = f->mtime_ns;
	a->have_id = 1;
}

/* What the graphs asked for, as file regions (runs of asked chunks), for
 * the next load (wrecall.c).  NULL when nothing was asked. */
static struct wrecord *record_of(struct wahead *a)
{
	uint64_t nchunks = (a->len + CHUNK - 1) / CHUNK;
	struct wrecord *r;

	if (!a->have_id || !a->asked_bytes || !(r = calloc(1, sizeof(*r))))
		return NULL;
	snprintf(r->name, sizeof(r->name), "%s", a->name);
	r->size = a->size;
	r->ino = a->ino;
	r->mtime_ns = a->mtime_ns;
	pthread_mutex_lock(&a->lock);
	for (uint64_t c = 0; c < nchunks && r->n < WRECORD_MAX_REGIONS;) {
		uint64_t s;

		if (!(a->asked[c / 8] & (1u << (c % 8)))) {
			c++;
			continue;
		}
		for (s = c; c < nchunks && (a->asked[c / 8] & (1u << (c % 8))); c++)
			;
		r->r[r->n].off = a->off + s * CHUNK;
		r->r[r->n].len = (c * CHUNK < a->len ? c * CHUNK : a->len) - s * CHUNK;
		r->n++;
	}
	pthread_mutex_unlock(&a->lock);
	return r;
}

void wahead_stop(struct wahead *a)
{
	if (!a)
		return;
	atomic_store(&a->stop, 1);
	wrecall_note(a->w, record_of(a));
	ahead_unref(a);
}

void wahead_release(struct wahead *a)
{
	if (a)
		ahead_unref(a);
}

void wahead_wait_all(struct wsrc *w)
{
	pthread_mutex_lock(&w->lock);
	atomic_store(&w->ahead_stop, 1);
	while (w->ahead_threads > 0)
		pthread_cond_wait(&w->ahead_done, &w->lock);
	pthread_mutex_unlock(&w->lock);
}
