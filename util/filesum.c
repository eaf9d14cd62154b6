/*
 * util/filesum.c — the head and content hashes of util/filesum.h, over a
 * file (pread) or over memory, the chunks hashed by a few threads.
 */
#include "util/filesum.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "pprpc/types.h"
#include "util/reopen.h"

/* What one pread asks for: big enough for the disk, small enough that a
 * thread's buffer stays modest. */
#define PIECE ((size_t)4 << 20)
/* More threads than this only wait on the disk. */
#define MAX_THREADS 64

/* The job the threads share: the source (fd, or p when fd < 0), the chunk
 * hashes and the first error. */
struct job {
	int fd;
	const uint8_t *p;
	uint64_t size;
	uint64_t nchunks;
	uint8_t *sums; /* nchunks * 32 */
	atomic_uint_fast64_t done;
	pthread_mutex_t lock; /* guards rc and msg */
	int rc;
	char msg[160];
};

static void job_fail(struct job *j, int rc, const char *msg)
{
	pthread_mutex_lock(&j->lock);
	if (!j->rc) {
		j->rc = rc;
		snprintf(j->msg, sizeof(j->msg), "%s", msg);
	}
	pthread_mutex_unlock(&j->lock);
}

static int job_failed(struct job *j)
{
	int rc;

	pthread_mutex_lock(&j->lock);
	rc = j->rc;
	pthread_mutex_unlock(&j->lock);
	return rc;
}

/* Read len bytes at off into buf: 0, or a negative code with msg set.  A
 * file that ends early is an error: it shrank under us. */
static int pread_full(int fd, void *buf, size_t len, uint64_t off, char *msg, size_t msglen)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + got, len - got, (off_t)(off + got));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(msg, msglen, "read at %llu: %s", (unsigned long long)(off + got), strerror(errno));
			return PPRPC_EIO;
		}
		if (n == 0) {
			snprintf(msg, msglen, "short read at %llu: the file shrank (truncated)",
				 (unsigned long long)(off + got));
			return PPRPC_EIO;
		}
		got += (size_t)n;
	}
	return 0;
}

/* Hash chunk c of the job into j->sums; buf (PIECE bytes) is the thread's,
 * fd its open file of the job's (-1: the job's own). */
static int hash_chunk(struct job *j, EVP_MD_CTX *ctx, uint64_t c, uint8_t *buf, int fd, filesum_progress_fn progress,
		      void *arg)
{
	uint64_t off = c * FILESUM_CHUNK;
	uint64_t len = j->size - off < FILESUM_CHUNK ? j->size - off : FILESUM_CHUNK;
	uint64_t pos = 0;
	unsigned int outl = 0;
	char msg[160];
	int rc;

	if (!EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		job_fail(j, PPRPC_EINTERNAL, "SHA-256 init failed");
		return PPRPC_EINTERNAL;
	}
	while (pos < len) {
		size_t n = len - pos < PIECE ? (size_t)(len - pos) : PIECE;
		const uint8_t *src = j->p ? j->p + off + pos : buf;

		if (!j->p && (rc = pread_full(fd >= 0 ? fd : j->fd, buf, n, off + pos, msg, sizeof(msg))) < 0) {
			job_fail(j, rc, msg);
			return rc;
		}
		if (!EVP_DigestUpdate(ctx, src, n)) {
			job_fail(j, PPRPC_EINTERNAL, "SHA-256 update failed");
			return PPRPC_EINTERNAL;
		}
		pos += n;
		atomic_fetch_add(&j->done, n);
		/* Only the calling thread reports, so the callback never runs
		 * concurrently with itself. */
		if (progress)
			progress(arg, atomic_load(&j->done), j->size);
	}
	if (!EVP_DigestFinal_ex(ctx, j->sums + c * 32, &outl) || outl != 32) {
		job_fail(j, PPRPC_EINTERNAL, "SHA-256 final failed");
		return PPRPC_EINTERNAL;
	}
	return 0;
}

/* A thread's share of the chunks: [first, last), read front to back
 * through an open file of its own (util/reopen.h: threads taking turns
 * through one left the file in the page cache as single pages). */
struct share {
	struct job *j;
	uint64_t first, last;
};

static void run_share(const struct share *sh, filesum_progress_fn progress, void *arg)
{
	struct job *j = sh->j;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t *buf = NULL;
	int own = j->p ? -1 : fd_reopen(j->fd);

	if (!ctx) {
		job_fail(j, PPRPC_ENOMEM, "out of memory (SHA-256 context)");
		goto out;
	}
	if (!j->p && !(buf = malloc(PIECE))) {
		job_fail(j, PPRPC_ENOMEM, "out of memory (read buffer)");
		goto out;
	}
	for (uint64_t c = sh->first; c < sh->last; c++) {
		if (job_failed(j) || hash_chunk(j, ctx, c, buf, own, progress, arg) < 0)
			break;
	}
out:
	if (own >= 0)
		close(own);
	free(buf);
	EVP_MD_CTX_free(ctx);
}

static void *worker(void *a)
{
	run_share(a, NULL, NULL);
	return NULL;
}

static int sha256(const void *p, size_t n, uint8_t out[32])
{
	unsigned int outl = 0;

	if (!EVP_Digest(p, n, out, &outl, EVP_sha256(), NULL) || outl != 32)
		return PPRPC_EINTERNAL;
	return 0;
}

/* The content hash of the job's source; the calling thread works too. */
static int run_job(struct job *j, int threads, filesum_progress_fn progress, void *arg, uint8_t out[32],
		   char *err, size_t errlen)
{
	pthread_t tids[MAX_THREADS];
	struct share sh[MAX_THREADS];
	int started[MAX_THREADS];
	int i, rc;
	uint8_t *tail = NULL;

	j->nchunks = (j->size + FILESUM_CHUNK - 1) / FILESUM_CHUNK;
	atomic_init(&j->done, 0);
	j->rc = 0;
	j->msg[0] = 0;
	j->sums = NULL;
	if (pthread_mutex_init(&j->lock, NULL)) {
		snprintf(err, errlen, "mutex: out of resources");
		return PPRPC_ENOMEM;
	}
	/* the chunk hashes, then the size: one buffer, hashed once */
	tail = malloc(j->nchunks * 32 + 8);
	if (!tail) {
		snprintf(err, errlen, "out of memory (%llu chunk hashes)", (unsigned long long)j->nchunks);
		rc = PPRPC_ENOMEM;
		goto out;
	}
	j->sums = tail;
	if (threads < 1)
		threads = 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	if ((uint64_t)threads > j->nchunks)
		threads = j->nchunks ? (int)j->nchunks : 1;
	for (i = 0; i < threads; i++) {
		sh[i].j = j;
		sh[i].first = j->nchunks * (uint64_t)i / (uint64_t)threads;
		sh[i].last = j->nchunks * (uint64_t)(i + 1) / (uint64_t)threads;
		started[i] = 0;
	}
	/* A thread that cannot start is not an error: the calling thread
	 * takes its share after its own. */
	for (i = 1; i < threads; i++)
		if (!pthread_create(&tids[i], NULL, worker, &sh[i]))
			started[i] = 1;
	run_share(&sh[0], progress, arg);
	for (i = 1; i < threads; i++)
		if (!started[i])
			run_share(&sh[i], progress, arg);
	for (i = 1; i < threads; i++)
		if (started[i])
			pthread_join(tids[i], NULL);
	if (j->rc) {
		snprintf(err, errlen, "%s", j->msg);
		rc = j->rc;
		goto out;
	}
	for (i = 0; i < 8; i++)
		tail[j->nchunks * 32 + (uint64_t)i] = (uint8_t)(j->size >> (8 * i));
	if ((rc = sha256(tail, j->nchunks * 32 + 8, out)) < 0) {
		snprintf(err, errlen, "SHA-256 failed");
		goto out;
	}
	if (progress)
		progress(arg, j->size, j->size);
out:
	free(tail);
	pthread_mutex_destroy(&j->lock);
	return rc;
}

int filesum_content(int fd, uint64_t size, int threads, filesum_progress_fn progress, void *arg, uint8_t out[32],
		    char *err, size_t errlen)
{
	struct job j = { .fd = fd, .p = NULL, .size = size };

	if (fd < 0) {
		snprintf(err, errlen, "no file");
		return PPRPC_EINVAL;
	}
	return run_job(&j, threads, progress, arg, out, err, errlen);
}

int filesum_memory(const void *p, uint64_t size, int threads, uint8_t out[32])
{
	/* Any non-NULL pointer will do for an empty buffer: it is never read. */
	static const uint8_t empty;
	struct job j = { .fd = -1, .p = p ? p : &empty, .size = size };
	char err[160];

	if (!p && size)
		return PPRPC_EINVAL;
	return run_job(&j, threads, NULL, NULL, out, err, sizeof(err));
}

int filesum_head(int fd, uint64_t size, uint8_t out[32], char *err, size_t errlen)
{
	uint64_t n = size < FILESUM_HEAD ? size : FILESUM_HEAD;
	uint8_t *buf = malloc(n ? n : 1);
	int rc;

	if (!buf) {
		snprintf(err, errlen, "out of memory (head buffer)");
		return PPRPC_ENOMEM;
	}
	if ((rc = pread_full(fd, buf, n, 0, err, errlen)) < 0)
		goto out;
	if ((rc = sha256(buf, n, out)) < 0)
		snprintf(err, errlen, "SHA-256 failed");
out:
	free(buf);
	return rc;
}

void filesum_hex(const uint8_t h[32], char out[65])
{
	static const char digits[] = "0123456789abcdef";
	int i;

	for (i = 0; i < 32; i++) {
		out[2 * i] = digits[h[i] >> 4];
		out[2 * i + 1] = digits[h[i] & 15];
	}
	out[64] = 0;
}
