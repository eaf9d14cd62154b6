/*
 * daemon/weights/wio.c — the file I/O under the weight sources: opening
 * beneath a folder without leaving it, and reading a range in parallel.
 */
#include "daemon/weights/wsrc_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pprpc/types.h"

/* What one thread reads at a time; a read under two of these is not worth
 * a thread. */
#define PIECE ((uint64_t)8 << 20)
#define MAX_THREADS 64

uint64_t wio_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t wio_mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec;
}

int64_t wio_ctime_ns(const struct stat *st)
{
	return (int64_t)st->st_ctim.tv_sec * 1000000000ll + st->st_ctim.tv_nsec;
}

int wio_open_beneath(int dirfd, const char *rel, int flags)
{
#ifdef SYS_openat2
	struct open_how how = {
		.flags = (uint64_t)flags,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd;

	do
		fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
	while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : (int)fd;
#else
	(void)dirfd;
	(void)rel;
	(void)flags;
	return -ENOSYS;
#endif
}

struct pjob {
	int fd;
	uint8_t *dst;
	uint64_t off, size;
	atomic_uint_fast64_t next;
	pthread_mutex_t lock; /* guards rc, msg */
	int rc;
	char msg[160];
};

static void pjob_fail(struct pjob *j, const char *msg)
{
	pthread_mutex_lock(&j->lock);
	if (!j->rc) {
		j->rc = PPRPC_EIO;
		snprintf(j->msg, sizeof(j->msg), "%s", msg);
	}
	pthread_mutex_unlock(&j->lock);
}

static int read_piece(struct pjob *j, uint64_t pos, uint64_t len)
{
	char msg[160];
	uint64_t got = 0;

	while (got < len) {
		ssize_t n = pread(j->fd, j->dst + pos + got, (size_t)(len - got), (off_t)(j->off + pos + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(msg, sizeof(msg), "read at %llu: %s", (unsigned long long)(j->off + pos + got),
				 strerror(errno));
			pjob_fail(j, msg);
			return -1;
		}
		if (n == 0) {
			snprintf(msg, sizeof(msg), "truncated: the file ends at %llu, before %llu",
				 (unsigned long long)(j->off + pos + got), (unsigned long long)(j->off + j->size));
			pjob_fail(j, msg);
			return -1;
		}
		got += (uint64_t)n;
	}
	return 0;
}

static void *pworker(void *a)
{
	struct pjob *j = a;
	uint64_t i, n = (j->size + PIECE - 1) / PIECE;

	while ((i = atomic_fetch_add(&j->next, 1)) < n) {
		uint64_t pos = i * PIECE;

		if (read_piece(j, pos, j->size - pos < PIECE ? j->size - pos : PIECE) < 0)
			break;
	}
	return NULL;
}

int wio_pread(int fd, void *dst, uint64_t off, uint64_t size, int threads, char *err, size_t errlen)
{
	struct pjob j = { .fd = fd, .dst = dst, .off = off, .size = size };
	pthread_t tids[MAX_THREADS];
	uint64_t pieces = (size + PIECE - 1) / PIECE;
	int nt = 0, i;

	if (pthread_mutex_init(&j.lock, NULL)) {
		snprintf(err, errlen, "mutex: out of resources");
		return PPRPC_ENOMEM;
	}
	atomic_init(&j.next, 0);
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	if (pieces < 2)
		threads = 1;
	else if ((uint64_t)threads > pieces)
		threads = (int)pieces;
	/* A thread that does not start leaves its pieces to the others. */
	for (i = 1; i < threads; i++)
		if (!pthread_create(&tids[nt], NULL, pworker, &j))
			nt++;
	pworker(&j);
	for (i = 0; i < nt; i++)
		pthread_join(tids[i], NULL);
	pthread_mutex_destroy(&j.lock);
	if (j.rc)
		snprintf(err, errlen, "%s", j.msg);
	return j.rc;
}
