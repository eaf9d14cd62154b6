/*
 * tests/unit/test_weights.c — a model file's identity (util/filesum.h) and
 * the rank's weight sources (daemon/weights/weights.h, issue 30): a file
 * found by identity and read back exactly; every way to be given the wrong
 * bytes refused or answered as a miss (wrong content, a hint out of
 * model-dir, a symlink out of it, a file changed or truncated after it was
 * verified, a cache entry altered, truncated, or torn by a rank killed
 * mid-write); sidecars reused and invalidated; the cache's bound; a range
 * mapped as a buffer (wfile_map): the file's bytes, private to the rank,
 * refused when changed or misaligned, and a SIGBUS of a file truncated
 * under its mapping named before the rank dies.
 *
 * Each test works in its own folder under /tmp, removed at its end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "daemon/weights/weights.h"
#include "daemon/weights/wsrc_impl.h"
#include "pprpc/types.h"
#include "util/filesum.h"
#include "util/hash.h"

#define MIB ((uint64_t)1 << 20)

struct fx {
	char root[64];
	char model[128];  /* model-dir */
	char cache[128];  /* weights-cache */
	char outside[128]; /* a folder beside model-dir, never to be read */
};

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->root, sizeof(f->root), "/tmp/pprpc-weights-XXXXXX");
	if (!mkdtemp(f->root)) {
		free(f);
		return -1;
	}
	snprintf(f->model, sizeof(f->model), "%s/model", f->root);
	snprintf(f->cache, sizeof(f->cache), "%s/cache", f->root);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->root);
	if (mkdir(f->model, 0755) || mkdir(f->outside, 0755))
		return -1;
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	nftw(f->root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(f);
	return 0;
}

static void fill(uint8_t *p, uint64_t n, uint64_t seed)
{
	uint64_t i, s = seed;

	for (i = 0; i + 8 <= n; i += 8) {
		uint64_t v = splitmix64_next(&s);

		memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)splitmix64_next(&s);
}

static uint8_t *make_bytes(uint64_t n, uint64_t seed)
{
	uint8_t *p = malloc(n ? n : 1);

	assert_non_null(p);
	fill(p, n, seed);
	return p;
}

static void write_file(const char *path, const void *p, uint64_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	uint64_t done = 0;

	assert_true(fd >= 0);
	while (done < n) {
		ssize_t k = write(fd, (const uint8_t *)p + done, n - done > (1u << 30) ? (1u << 30) : n - done);

		assert_true(k > 0);
		done += (uint64_t)k;
	}
	assert_int_equal(close(fd), 0);
}

static void path_in(char *out, size_t len, const char *dir, const char *rel)
{
	snprintf(out, len, "%s/%s", dir, rel);
}

static void sha256(const void *p, size_t n, uint8_t out[32])
{
	unsigned int outl = 0;

	assert_int_equal(EVP_Digest(p, n, out, &outl, EVP_sha256(), NULL), 1);
	assert_int_equal(outl, 32);
}

/* util/filesum.h's definitions written out again, independently of it:
 * SHA-256 over the 64 MiB chunks' SHA-256s and the size (8 bytes LE). */
static void ref_content(const uint8_t *p, uint64_t n, uint8_t out[32])
{
	uint64_t nchunks = (n + FILESUM_CHUNK - 1) / FILESUM_CHUNK, c;
	uint8_t *cat = malloc(nchunks * 32 + 8);
	int i;

	assert_non_null(cat);
	for (c = 0; c < nchunks; c++) {
		uint64_t off = c * FILESUM_CHUNK, len = n - off < FILESUM_CHUNK ? n - off : FILESUM_CHUNK;

		sha256(p + off, len, cat + c * 32);
	}
	for (i = 0; i < 8; i++)
		cat[nchunks * 32 + i] = (uint8_t)(n >> (8 * i));
	sha256(cat, nchunks * 32 + 8, out);
	free(cat);
}

static void ref_identity(const uint8_t *p, uint64_t n, struct filesum *id)
{
	id->size = n;
	sha256(p, n < FILESUM_HEAD ? n : FILESUM_HEAD, id->head);
	ref_content(p, n, id->content);
}

static struct wsrc *open_w(const struct fx *f, int with_cache, uint64_t max, int threads)
{
	struct wsrc_conf c = { .model_dir = f->model, .cache_dir = with_cache ? f->cache : NULL,
			       .cache_max_bytes = max, .threads = threads, .map_ahead = 1 };
	struct wsrc *w = NULL;
	char err[256] = "";
	int rc = wsrc_open(&c, &w, err, sizeof(err));

	if (rc)
		print_message("wsrc_open: %s\n", err);
	assert_int_equal(rc, 0);
	return w;
}

static struct wsrc_stats stats(struct wsrc *w)
{
	struct wsrc_stats s;

	wsrc_stats_get(w, &s);
	return s;
}

/* ---- util/filesum ------------------------------------------------------ */

/* Tiny inputs against the definition, computed here with EVP directly, and
 * the head of "abc" against SHA-256's published test vector. */
static void test_filesum_known_answer(void **state)
{
	static const uint8_t abc[3] = { 'a', 'b', 'c' };
	uint8_t got[32], cat[40], want[32];
	char hex[65];
	struct fx *f = *state;
	char path[256];
	int fd;

	/* "abc": one chunk; content = SHA-256(SHA-256("abc") || 03 00*7) */
	sha256(abc, 3, cat);
	memcpy(cat + 32, "\x03\0\0\0\0\0\0\0", 8);
	sha256(cat, 40, want);
	assert_int_equal(filesum_memory(abc, 3, 1, got), 0);
	assert_memory_equal(got, want, 32);
	assert_int_equal(filesum_memory(abc, 3, 8, got), 0);
	assert_memory_equal(got, want, 32);

	path_in(path, sizeof(path), f->model, "abc");
	write_file(path, abc, 3);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(filesum_content(fd, 3, 2, NULL, NULL, got, NULL, 0), 0);
	assert_memory_equal(got, want, 32);
	assert_int_equal(filesum_head(fd, 3, got, NULL, 0), 0);
	filesum_hex(got, hex);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	/* the file is shorter than it is said to be: an error, not a hash */
	char err[200] = "";
	assert_int_equal(filesum_content(fd, 4, 1, NULL, NULL, got, err, sizeof(err)), PPRPC_EIO);
	assert_non_null(strstr(err, "short read"));
	close(fd);

	/* empty: no chunk, only the size */
	sha256("\0\0\0\0\0\0\0\0", 8, want);
	assert_int_equal(filesum_memory(NULL, 0, 1, got), 0);
	assert_memory_equal(got, want, 32);
}

static void progress(void *arg, uint64_t done, uint64_t total)
{
	uint64_t *last = arg;

	assert_true(done <= total);
	assert_true(done >= *last);
	*last = done;
}

/* A file of three chunks (the last one short): its content hash equals
 * that of the same bytes in memory and the reference, whatever the thread
 * count. */
static void test_filesum_file_equals_memory(void **state)
{
	struct fx *f = *state;
	uint64_t n = 2 * FILESUM_CHUNK + 12345, last = 0;
	uint8_t *p = make_bytes(n, 1), want[32], got[32];
	char path[256], err[200];
	int fd, t;

	ref_content(p, n, want);
	for (t = 1; t <= 4; t++) {
		assert_int_equal(filesum_memory(p, n, t, got), 0);
		assert_memory_equal(got, want, 32);
	}
	path_in(path, sizeof(path), f->model, "three-chunks");
	write_file(path, p, n);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	for (t = 1; t <= 4; t++) {
		memset(got, 0, 32);
		last = 0;
		assert_int_equal(filesum_content(fd, n, t, progress, &last, got, err, sizeof(err)), 0);
		assert_memory_equal(got, want, 32);
		assert_int_equal(last, n);
	}
	close(fd);
	free(p);
}

/* filesum_get: computed once, then from the sidecar; a changed mtime or an
 * altered sidecar means computing again; the fallback folder when the
 * file's own folder cannot take the sidecar. */
static void test_filesum_sidecar(void **state)
{
	struct fx *f = *state;
	uint64_t n = 5 * MIB + 3;
	uint8_t *p = make_bytes(n, 2);
	char path[256], side[300], err[200];
	struct filesum want, got;
	struct timespec ts[2] = { { .tv_sec = 1000000000, .tv_nsec = 5 }, { .tv_sec = 1000000000, .tv_nsec = 5 } };
	struct stat st;
	int fd, computed = -1;
	FILE *fp;

	ref_identity(p, n, &want);
	path_in(path, sizeof(path), f->model, "m.bin");
	snprintf(side, sizeof(side), "%s" FILESUM_SUFFIX, path);
	write_file(path, p, n);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(filesum_get(fd, path, &st, NULL, 2, NULL, NULL, &got, &computed, err, sizeof(err)), 0);
	assert_int_equal(computed, 1);
	assert_memory_equal(&got, &want, sizeof(want));
	assert_int_equal(access(side, F_OK), 0);
	assert_int_equal(filesum_get(fd, path, &st, NULL, 2, NULL, NULL, &got, &computed, err, sizeof(err)), 0);
	assert_int_equal(computed, 0);
	assert_memory_equal(&got, &want, sizeof(want));

	/* the same bytes with another mtime: the sidecar is not for it */
	assert_int_equal(futimens(fd, ts), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(filesum_get(fd, path, &st, NULL, 1, NULL, NULL, &got, &computed, err, sizeof(err)), 0);
	assert_int_equal(computed, 1);
	assert_memory_equal(&got, &want, sizeof(want));

	/* an altered sidecar (a digit of the content hash) is not used */
	fp = fopen(side, "r+");
	assert_non_null(fp);
	assert_int_equal(fseek(fp, -3, SEEK_END), 0);
	fputc('z', fp);
	fclose(fp);
	assert_int_equal(filesum_get(fd, path, &st, NULL, 1, NULL, NULL, &got, &computed, err, sizeof(err)), 0);
	assert_int_equal(computed, 1);
	assert_memory_equal(&got, &want, sizeof(want));

	/* nowhere to write beside it (its folder is gone from this path):
	 * the fallback folder keeps it under dev-ino */
	char nowhere[300], fb[300];
	snprintf(nowhere, sizeof(nowhere), "%s/no-such-folder/m.bin", f->root);
	snprintf(fb, sizeof(fb), "%s/%llu-%llu" FILESUM_SUFFIX, f->outside, (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	assert_int_equal(filesum_get(fd, nowhere, &st, f->outside, 1, NULL, NULL, &got, &computed, err, sizeof(err)),
			 0);
	assert_int_equal(computed, 1);
	assert_int_equal(access(fb, F_OK), 0);
	assert_int_equal(filesum_get(fd, nowhere, &st, f->outside, 1, NULL, NULL, &got, &computed, err, sizeof(err)),
			 0);
	assert_int_equal(computed, 0);
	assert_memory_equal(&got, &want, sizeof(want));
	close(fd);
	free(p);
}

/* ---- model files --------------------------------------------------------- */

/* Found by identity in a subfolder (no hint, then the right hint), read
 * back exactly with 2 threads at a size that is no multiple of a read
 * piece, and a range past the end refused. */
static void test_find_and_read(void **state)
{
	struct fx *f = *state;
	uint64_t n = 40 * MIB + 12345;
	uint8_t *p = make_bytes(n, 3), *q = malloc(n);
	struct filesum id;
	struct wfile *wf = NULL;
	struct wsrc *w;
	struct wsrc_stats s;
	char path[256], err[512] = "";
	int rc;

	assert_non_null(q);
	ref_identity(p, n, &id);
	path_in(path, sizeof(path), f->model, "a");
	assert_int_equal(mkdir(path, 0755), 0);
	path_in(path, sizeof(path), f->model, "a/b");
	assert_int_equal(mkdir(path, 0755), 0);
	/* decoys: same size other bytes; another size */
	uint8_t *d = make_bytes(n, 99);
	path_in(path, sizeof(path), f->model, "a/decoy");
	write_file(path, d, n);
	path_in(path, sizeof(path), f->model, "small");
	write_file(path, d, 1000);
	free(d);
	path_in(path, sizeof(path), f->model, "a/b/model.gguf");
	write_file(path, p, n);

	w = open_w(f, 0, 0, 2);
	assert_true(wsrc_has_files(w));
	assert_false(wsrc_has_cache(w));
	rc = wsrc_file_find(w, &id, NULL, &wf, err, sizeof(err));
	if (rc)
		print_message("find: %s\n", err);
	assert_int_equal(rc, 0);
	assert_string_equal(wfile_name(wf), "a/b/model.gguf");
	memset(q, 0, n);
	assert_int_equal(wfile_read(w, wf, 0, n, q, err, sizeof(err)), 0);
	assert_memory_equal(q, p, n);
	memset(q, 0, n);
	assert_int_equal(wfile_read(w, wf, 4 * MIB + 1, 17 * MIB + 3, q, err, sizeof(err)), 0);
	assert_memory_equal(q, p + 4 * MIB + 1, 17 * MIB + 3);
	assert_int_equal(wfile_read(w, wf, n, 0, q, err, sizeof(err)), 0);
	assert_int_equal(wfile_read(w, wf, n - 1, 2, q, err, sizeof(err)), PPRPC_ERANGE);
	assert_int_equal(wfile_read(w, wf, UINT64_MAX, 2, q, err, sizeof(err)), PPRPC_ERANGE);
	assert_non_null(strstr(err, "outside the file"));
	wfile_put(wf);
	s = stats(w);
	assert_int_equal(s.file_reads, 3);
	assert_int_equal(s.file_bytes, n + 17 * MIB + 3);
	assert_int_equal(s.file_refused, 2);
	assert_int_equal(s.hash_bytes, n); /* the model; the decoy's head differs */

	/* the hint names it: found, nothing hashed again */
	assert_int_equal(wsrc_file_find(w, &id, "a/b/model.gguf", &wf, err, sizeof(err)), 0);
	assert_string_equal(wfile_name(wf), "a/b/model.gguf");
	wfile_put(wf);
	/* a hint naming another file: the scan finds the right one */
	assert_int_equal(wsrc_file_find(w, &id, "a/decoy", &wf, err, sizeof(err)), 0);
	assert_string_equal(wfile_name(wf), "a/b/model.gguf");
	wfile_put(wf);
	assert_int_equal(stats(w).hash_bytes, n);
	wsrc_close(w);

	/* no model-dir: not supported */
	struct wsrc_conf c = { .threads = 1 };
	assert_int_equal(wsrc_open(&c, &w, err, sizeof(err)), 0);
	assert_false(wsrc_has_files(w));
	assert_int_equal(wsrc_file_find(w, &id, NULL, &wf, err, sizeof(err)), PPRPC_EUNSUPP);
	assert_int_equal(wsrc_cache_get(w, id.content, 1, q, err, sizeof(err)), PPRPC_EUNSUPP);
	assert_int_equal(wsrc_cache_put(w, id.content, q, 1, err, sizeof(err)), PPRPC_EUNSUPP);
	wsrc_close(w);
	wsrc_close(NULL);
	free(p);
	free(q);
}

/* Right size and head, other content (a byte past the head differs): not
 * the file, and nothing is read from it. */
static void test_wrong_content_refused(void **state)
{
	struct fx *f = *state;
	uint64_t n = FILESUM_HEAD + 3 * MIB;
	uint8_t *p = make_bytes(n, 4);
	struct filesum id;
	struct wfile *wf = NULL;
	struct wsrc *w;
	struct wsrc_stats s;
	char path[256], err[512] = "";

	ref_identity(p, n, &id);
	p[FILESUM_HEAD + 7] ^= 1;
	path_in(path, sizeof(path), f->model, "almost.gguf");
	write_file(path, p, n);
	w = open_w(f, 0, 0, 2);
	assert_int_equal(wsrc_file_find(w, &id, "almost.gguf", &wf, err, sizeof(err)), PPRPC_EHANDLE);
	assert_null(wf);
	assert_non_null(strstr(err, "1 with that head"));
	s = stats(w);
	assert_int_equal(s.file_reads, 0);
	assert_int_equal(s.file_bytes, 0);
	assert_int_equal(s.file_refused, 1);
	assert_int_equal(s.hash_bytes, n);
	/* asked again: refused without hashing again */
	assert_int_equal(wsrc_file_find(w, &id, NULL, &wf, err, sizeof(err)), PPRPC_EHANDLE);
	assert_int_equal(stats(w).hash_bytes, n);
	wsrc_close(w);
	free(p);
}

/* Hints that would leave model-dir are refused, with the reason. */
static void test_hint_refused(void **state)
{
	static const char *bad[] = { "../outside/m.gguf", "a/../../outside/m.gguf", "..", "a/..", "/etc/passwd",
				     "//etc/passwd" };
	struct fx *f = *state;
	uint8_t p[100];
	struct filesum id;
	struct wfile *wf = NULL;
	struct wsrc *w;
	char path[256], err[512];
	size_t i;

	fill(p, sizeof(p), 5);
	ref_identity(p, sizeof(p), &id);
	path_in(path, sizeof(path), f->outside, "m.gguf");
	write_file(path, p, sizeof(p));
	w = open_w(f, 0, 0, 1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		assert_int_equal(wsrc_file_find(w, &id, bad[i], &wf, err, sizeof(err)), PPRPC_EINVAL);
		assert_null(wf);
		assert_non_null(strstr(err, "refused"));
		assert_non_null(strstr(err, bad[i][0] == '/' ? "absolute" : "\"..\""));
	}
	/* "..." and "a..b" are names, not "..": allowed (and not found here) */
	assert_int_equal(wsrc_file_find(w, &id, "...", &wf, err, sizeof(err)), PPRPC_EHANDLE);
	assert_non_null(strstr(err, "no such file"));
	assert_int_equal(wsrc_file_find(w, &id, "a..b", &wf, err, sizeof(err)), PPRPC_EHANDLE);
	assert_int_equal(stats(w).file_refused, sizeof(bad) / sizeof(bad[0]) + 2);
	assert_int_equal(stats(w).hash_bytes, 0);
	wsrc_close(w);
}

/* A symlink in model-dir to a matching file outside (a file link, a
 * folder link, a link on the hint's way) is never followed. */
static void test_symlink_outside_never_used(void **state)
{
	struct fx *f = *state;
	uint64_t n = 6 * MIB + 1;
	uint8_t *p = make_bytes(n, 6);
	struct filesum id;
	struct wfile *wf = NULL;
	struct wsrc *w;
	char path[300], target[256], err[512];

	ref_identity(p, n, &id);
	path_in(target, sizeof(target), f->outside, "m.gguf");
	write_file(target, p, n);
	path_in(path, sizeof(path), f->model, "link.gguf");
	assert_int_equal(symlink(target, path), 0);
	path_in(path, sizeof(path), f->model, "dirlink");
	assert_int_equal(symlink(f->outside, path), 0);
	path_in(path, sizeof(path), f->model, "rel.gguf");
	assert_int_equal(symlink("../outside/m.gguf", path), 0);

	w = open_w(f, 0, 0, 2);
	assert_int_equal(wsrc_file_find(w, &id, NULL, &wf, err, sizeof(err)), PPRPC_EHANDLE);
	assert_non_null(strstr(err, "0 of that size"));
	assert_int_equal(wsrc_file_find(w, &id, "link.gguf", &wf, err, sizeof(err)), PPRPC_EHANDLE);
	assert_non_null(strstr(err, "symlink"));
	assert_int_equal(wsrc_file_find(w, &id, "rel.gguf", &wf, err, sizeof(err)), PPRPC_EHANDLE);
	assert_int_equal(wsrc_file_find(w, &id, "dirlink/m.gguf", &wf, err, sizeof(err)), PPRPC_EHANDLE);
	assert_non_null(strstr(err, "symlink"));
	assert_null(wf);
	/* the outside file was never hashed (not even its head was read:
	 * no sidecar appeared beside it) */
	assert_int_equal(stats(w).hash_bytes, 0);
	snprintf(path, sizeof(path), "%s" FILESUM_SUFFIX, target);
	assert_int_equal(access(path, F_OK), -1);
	wsrc_close(w);
	free(p);
}

/* Find a freshly written file of n bytes named rel, with 2 threads. */
static struct wfile *find_new(struct fx *f, struct wsrc **ret_w, const char *rel, uint64_t n, uint64_t seed,
			      uint8_t **ret_p)
{
	uint8_t *p = make_bytes(n, seed);
	struct filesum id;
	struct wfile *wf = NULL;
	char path[256], err[512];

	ref_identity(p, n, &id);
	path_in(path, sizeof(path), f->model, rel);
	write_file(path, p, n);
	*ret_w = open_w(f, 0, 0, 2);
	assert_int_equal(wsrc_file_find(*ret_w, &id, rel, &wf, err, sizeof(err)), 0);
	*ret_p = p;
	return wf;
}

/* Truncated after it was verified: the read fails and says so. */
static void test_truncated_after_verify(void **state)
{
	struct fx *f = *state;
	uint64_t n = 24 * MIB + 5;
	uint8_t *p, *q = malloc(n);
	struct wsrc *w;
	struct wfile *wf = find_new(f, &w, "t.gguf", n, 7, &p);
	char path[256], err[512] = "";

	assert_non_null(q);
	path_in(path, sizeof(path), f->model, "t.gguf");
	assert_int_equal(truncate(path, (off_t)(n / 2)), 0);
	assert_int_equal(wfile_read(w, wf, 0, n, q, err, sizeof(err)), PPRPC_EIO);
	assert_non_null(strstr(err, "truncated"));
	assert_non_null(strstr(err, "t.gguf"));
	/* even a range still inside the shorter file: it is not the file */
	assert_int_equal(wfile_read(w, wf, 0, 100, q, err, sizeof(err)), PPRPC_EIO);
	assert_int_equal(stats(w).file_refused, 2);
	assert_int_equal(stats(w).file_reads, 0);
	wfile_put(wf);
	wsrc_close(w);
	free(p);
	free(q);
}

/* One byte of the file rewritten and its mtime set back: the same size,
 * another file for the rank. */
static void rewrite_byte(const char *path)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = 1234567890, .tv_nsec = 0 } };
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "x", 1, 100), 1);
	assert_int_equal(futimens(fd, ts), 0);
	close(fd);
}

/* Modified after it was verified (same size, a new mtime): refused. */
static void test_modified_after_verify(void **state)
{
	struct fx *f = *state;
	uint64_t n = 3 * MIB;
	uint8_t *p, *q = malloc(n);
	struct wsrc *w;
	struct wfile *wf = find_new(f, &w, "m.gguf", n, 8, &p);
	char path[256], err[512] = "";

	assert_non_null(q);
	assert_int_equal(wfile_read(w, wf, 0, n, q, err, sizeof(err)), 0);
	path_in(path, sizeof(path), f->model, "m.gguf");
	rewrite_byte(path);
	assert_int_equal(wfile_read(w, wf, 0, n, q, err, sizeof(err)), PPRPC_EIO);
	assert_non_null(strstr(err, "changed under the rank"));
	wfile_put(wf);
	wsrc_close(w);
	free(p);
	free(q);
}

/* wfile_map: the file's bytes at the offset's phase, writes private to
 * the mapping, the counters; refused outside the file, at a phase the
 * alignment forbids, and once the file changed. */
static void test_map(void **state)
{
	struct fx *f = *state;
	uint64_t n = 5 * MIB + 321, off = 4096 * 3 + 64, len = 2 * MIB + 7;
	uint8_t *p, *q = malloc(n);
	struct wsrc *w;
	struct wfile *wf = find_new(f, &w, "map.gguf", n, 9, &p);
	void *ptr = NULL, *map = NULL;
	struct wahead *ahead = NULL;
	uint64_t maplen = 0;
	char path[256], err[512] = "";
	int fd;

	assert_non_null(q);
	assert_int_equal(wfile_map(w, wf, off, len, 32, &ptr, &map, &maplen, &ahead, err, sizeof(err)), 0);
	assert_true((uintptr_t)ptr % 4096 == off % 4096);
	assert_memory_equal(ptr, p + off, len);
	assert_int_equal(stats(w).maps, 1);
	assert_int_equal(stats(w).map_bytes, len);
	assert_int_equal(stats(w).mapped_bytes, len);
	/* a write stays the mapping's: the file keeps its bytes */
	memset(ptr, 0xee, 100);
	path_in(path, sizeof(path), f->model, "map.gguf");
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, q, 100, (off_t)off), 100);
	close(fd);
	assert_memory_equal(q, p + off, 100);
	assert_non_null(ahead);
	wahead_stop(ahead);
	wsrc_unmapped(w, map, len);
	assert_int_equal(munmap(map, maplen), 0);
	assert_int_equal(stats(w).mapped_bytes, 0);

	assert_int_equal(wfile_map(w, wf, n - 10, 11, 32, &ptr, &map, &maplen, &ahead, err, sizeof(err)), PPRPC_ERANGE);
	assert_int_equal(wfile_map(w, wf, 0, 0, 32, &ptr, &map, &maplen, &ahead, err, sizeof(err)), PPRPC_ERANGE);
	assert_int_equal(wfile_map(w, wf, 48, 100, 32, &ptr, &map, &maplen, &ahead, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "not aligned"));
	/* changed since it was verified */
	rewrite_byte(path);
	assert_int_equal(wfile_map(w, wf, 0, 4096, 32, &ptr, &map, &maplen, &ahead, err, sizeof(err)), PPRPC_EIO);
	assert_non_null(strstr(err, "changed under the rank"));
	assert_int_equal(stats(w).maps, 1);
	wfile_put(wf);
	wsrc_close(w);
	free(p);
	free(q);
}

/* How much of [off, off + len) of the file at path is in the page cache. */
static uint64_t resident(const char *path, uint64_t off, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	int fd = open(path, O_RDONLY);
	uint64_t start = off / (uint64_t)pg * (uint64_t)pg, n = (off + len - start + (uint64_t)pg - 1) / (uint64_t)pg;
	unsigned char *vec = malloc(n);
	void *m;
	uint64_t in = 0;

	assert_true(fd >= 0);
	assert_non_null(vec);
	m = mmap(NULL, (size_t)(n * (uint64_t)pg), PROT_READ, MAP_SHARED, fd, (off_t)start);
	assert_true(m != MAP_FAILED);
	assert_int_equal(mincore(m, (size_t)(n * (uint64_t)pg), vec), 0);
	for (uint64_t i = 0; i < n; i++)
		in += (vec[i] & 1) ? (uint64_t)pg : 0;
	munmap(m, (size_t)(n * (uint64_t)pg));
	close(fd);
	free(vec);
	return in;
}

/* Read-ahead of a mapping (wahead.c): what a graph asks for is read into
 * the page cache by the threads, once however often it is asked, and
 * nothing far from it; a mapping freed mid-read stops its threads, and
 * wsrc_close waits for them. */
static void test_map_ahead(void **state)
{
	struct fx *f = *state;
	uint64_t n = 24 * MIB + 99, off = 4096, len = n - off;
	uint8_t *p;
	struct wsrc *w;
	struct wfile *wf = find_new(f, &w, "ahead.gguf", n, 11, &p);
	void *ptr = NULL, *map = NULL;
	struct wahead *ahead = NULL;
	uint64_t maplen = 0;
	char path[256], err[512] = "";
	int fd, dropped;

	path_in(path, sizeof(path), f->model, "ahead.gguf");
	/* out of the page cache first, where the filesystem lets it go (not tmpfs) */
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fdatasync(fd), 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	dropped = resident(path, 0, n) == 0;
	if (!dropped)
		print_message("the file's pages could not be dropped here: residency not checked\n");

	assert_int_equal(wfile_map(w, wf, off, len, 32, &ptr, &map, &maplen, &ahead, err, sizeof(err)), 0);
	assert_non_null(ahead);
	wahead_want(ahead, 2 * MIB, 4 * MIB);
	wahead_want(ahead, 2 * MIB, 4 * MIB);
	wahead_want(ahead, 3 * MIB, 2 * MIB);
	assert_int_equal(stats(w).ahead_asked, 4 * MIB);
	for (int i = 0; i < 1000 && stats(w).ahead_bytes < 4 * MIB; i++)
		usleep(10000);
	assert_int_equal(stats(w).ahead_bytes, 4 * MIB);
	if (dropped) {
		assert_int_equal(resident(path, off + 2 * MIB, 4 * MIB), 4 * MIB);
		assert_int_equal(resident(path, off + 16 * MIB, 4 * MIB), 0);
	}
	/* past the end of the range: only what is inside */
	wahead_want(ahead, len - 100, 1000);
	assert_int_equal(stats(w).ahead_asked, 4 * MIB + len % (2 * MIB));
	/* the rest, then gone at once */
	wahead_want(ahead, 0, len);
	wahead_stop(ahead);
	wsrc_unmapped(w, map, len);
	assert_int_equal(munmap(map, maplen), 0);
	wfile_put(wf);
	wsrc_close(w);
	free(p);
}

/* The last load's record (wrecall.c): a mapping's asked regions are kept
 * when it ends (model-dir/.pprpc-last-load); a rank opened afresh reads
 * them ahead at the first client's connection and not at the second; a
 * file changed since is not read; a record that is not one is ignored;
 * map-recall off keeps nothing. */
static struct wsrc *open_recall(const struct fx *f, int on)
{
	struct wsrc_conf c = { .model_dir = f->model, .threads = 2, .map_ahead = 1, .map_recall = on };
	struct wsrc *w = NULL;
	char err[256] = "";

	assert_int_equal(wsrc_open(&c, &w, err, sizeof(err)), 0);
	return w;
}

static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fdatasync(fd), 0);
	assert_int_equal(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
}

/* A load of recall.gguf's [off, off + len) by a fresh rank (map-recall
 * on): mapped, [2, 6) and, with recall on, [12, 14) MiB of it asked
 * ahead, ended.  With recall on, the rank had nothing to read ahead yet. */
static void recall_load(const struct fx *f, int on, const struct filesum *id, uint64_t off, uint64_t len)
{
	struct wsrc *w = open_recall(f, on);
	struct wfile *wf = NULL;
	struct wahead *ahead = NULL;
	void *ptr = NULL, *map = NULL;
	uint64_t maplen = 0;
	char what[400], err[512] = "";

	assert_int_equal(wsrc_recall(w, what, sizeof(what)), 0);
	assert_int_equal(wsrc_file_find(w, id, "recall.gguf", &wf, err, sizeof(err)), 0);
	assert_int_equal(wfile_map(w, wf, off, len, 32, &ptr, &map, &maplen, &ahead, err, sizeof(err)), 0);
	wahead_want(ahead, 2 * MIB, 4 * MIB);
	if (on)
		wahead_want(ahead, 12 * MIB, 2 * MIB);
	wahead_stop(ahead);
	wsrc_unmapped(w, map, len);
	munmap(map, maplen);
	wfile_put(wf);
	wsrc_close(w);
}

static void test_recall(void **state)
{
	struct fx *f = *state;
	uint64_t n = 40 * MIB + 99, off = 4096, len = n - off;
	uint8_t *p = make_bytes(n, 21);
	struct filesum id;
	struct wsrc *w;
	struct wrecord *r;
	struct timespec ts[2];
	char path[256], rec[256], what[400], text[4096];
	FILE *fp;
	size_t k;
	int dropped;

	ref_identity(p, n, &id);
	path_in(path, sizeof(path), f->model, "recall.gguf");
	path_in(rec, sizeof(rec), f->model, ".pprpc-last-load");
	write_file(path, p, n);

	/* off: nothing kept */
	recall_load(f, 0, &id, off, len);
	assert_int_equal(access(rec, F_OK), -1);

	/* on: two regions asked, kept when the mapping ends */
	recall_load(f, 1, &id, off, len);
	fp = fopen(rec, "r");
	assert_non_null(fp);
	k = fread(text, 1, sizeof(text), fp);
	fclose(fp);
	r = wrecord_parse(text, k);
	assert_non_null(r);
	assert_string_equal(r->name, "recall.gguf");
	assert_int_equal(r->size, n);
	assert_int_equal(r->n, 2);
	assert_int_equal(r->r[0].off, off + 2 * MIB);
	assert_int_equal(r->r[0].len, 4 * MIB);
	assert_int_equal(r->r[1].off, off + 12 * MIB);
	assert_int_equal(r->r[1].len, 2 * MIB);
	free(r);

	/* a fresh rank, a cold file: the first client's connection reads the
	 * regions, the second nothing */
	drop_cache(path);
	dropped = resident(path, 0, n) == 0;
	w = open_recall(f, 1);
	assert_int_equal(wsrc_recall(w, what, sizeof(what)), 6 * MIB);
	assert_non_null(strstr(what, "recall.gguf"));
	for (int i = 0; i < 1000 && stats(w).ahead_bytes < stats(w).ahead_asked; i++)
		usleep(10000);
	assert_true(stats(w).ahead_asked >= 6 * MIB);
	assert_int_equal(stats(w).ahead_bytes, stats(w).ahead_asked);
	if (dropped) {
		assert_int_equal(resident(path, off + 2 * MIB, 4 * MIB), 4 * MIB);
		assert_int_equal(resident(path, off + 12 * MIB, 2 * MIB), 2 * MIB);
		/* far from both (the kernel's own readahead goes some MiB on) */
		assert_int_equal(resident(path, 30 * MIB, 10 * MIB), 0);
	}
	assert_int_equal(wsrc_recall(w, what, sizeof(what)), 0);
	wsrc_close(w);

	/* the file changed since (mtime): nothing read, and said why */
	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[1] = ts[0];
	ts[1].tv_sec -= 100;
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
	w = open_recall(f, 1);
	assert_int_equal(wsrc_recall(w, what, sizeof(what)), 0);
	assert_non_null(strstr(what, "changed"));
	wsrc_close(w);

	/* a record that is not one: ignored */
	fp = fopen(rec, "w");
	assert_non_null(fp);
	fputs("pprpc-last-load 1\nfile ../recall.gguf\nid 1 1 1\nregion 0 1\n", fp);
	fclose(fp);
	w = open_recall(f, 1);
	assert_int_equal(wsrc_recall(w, what, sizeof(what)), 0);
	assert_string_equal(what, "");
	wsrc_close(w);
	assert_null(wrecord_parse("junk", 4));
	assert_null(wrecord_parse("pprpc-last-load 1\nfile a\nid 10 1 1\nregion 5 6\n", 46));
	r = wrecord_parse("pprpc-last-load 1\nfile a\nid 10 1 1\nregion 5 5\n", 46);
	assert_non_null(r);
	assert_int_equal(r->n, 1);
	free(r);
	free(p);
}

/* A file truncated under its mapping: reading past the new end is a
 * SIGBUS, and the rank says which file before it dies (in a child). */
static void test_map_truncated_named(void **state)
{
	struct fx *f = *state;
	uint64_t n = 2 * MIB;
	uint8_t *p;
	struct wsrc *w;
	struct wfile *wf = find_new(f, &w, "cut.gguf", n, 10, &p);
	char path[256], out[128], text[1024] = "", err[512] = "";
	int status = 0;
	pid_t pid;
	FILE *fp;

	path_in(path, sizeof(path), f->model, "cut.gguf");
	path_in(out, sizeof(out), f->root, "child.err");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		void *ptr, *map;
		struct wahead *ahead;
		uint64_t maplen;
		volatile uint8_t sink;

		/* cmocka catches SIGBUS in its tests: the daemon's default */
		signal(SIGBUS, SIG_DFL);
		if (!freopen(out, "w", stderr) ||
		    wfile_map(w, wf, 0, n, 32, &ptr, &map, &maplen, &ahead, err, sizeof(err)) < 0 || truncate(path, 4096) < 0)
			_exit(3);
		sink = ((volatile uint8_t *)ptr)[n - 1];
		(void)sink;
		_exit(4);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(WTERMSIG(status), SIGBUS);
	fp = fopen(out, "r");
	assert_non_null(fp);
	text[fread(text, 1, sizeof(text) - 1, fp)] = '\0';
	fclose(fp);
	assert_non_null(strstr(text, "SIGBUS reading the model file cut.gguf"));
	assert_non_null(strstr(text, "truncated under the rank"));
	wfile_put(wf);
	wsrc_close(w);
	free(p);
}

/* A second rank's lookup takes the identity from the sidecar (nothing
 * hashed); a file touched since is hashed again, within one rank's life too. */
static void test_sidecar_reused(void **state)
{
	struct fx *f = *state;
	uint64_t n = 9 * MIB + 77;
	uint8_t *p;
	struct wsrc *w;
	struct wfile *wf = find_new(f, &w, "s.gguf", n, 9, &p);
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = 1234567890, .tv_nsec = 1 } };
	struct filesum id;
	char path[256], err[512];

	ref_identity(p, n, &id);
	assert_int_equal(stats(w).hash_bytes, n);
	wfile_put(wf);
	/* the same rank: from memory */
	assert_int_equal(wsrc_file_find(w, &id, NULL, &wf, err, sizeof(err)), 0);
	wfile_put(wf);
	assert_int_equal(stats(w).hash_bytes, n);
	wsrc_close(w);

	path_in(path, sizeof(path), f->model, "s.gguf" FILESUM_SUFFIX);
	assert_int_equal(access(path, F_OK), 0);
	w = open_w(f, 0, 0, 2);
	assert_int_equal(wsrc_file_find(w, &id, NULL, &wf, err, sizeof(err)), 0);
	wfile_put(wf);
	assert_int_equal(stats(w).hash_bytes, 0);

	/* touched: the sidecar and the memory no longer vouch for it */
	path_in(path, sizeof(path), f->model, "s.gguf");
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
	assert_int_equal(wsrc_file_find(w, &id, NULL, &wf, err, sizeof(err)), 0);
	wfile_put(wf);
	assert_int_equal(stats(w).hash_bytes, n);
	wsrc_close(w);
	w = open_w(f, 0, 0, 2);
	assert_int_equal(wsrc_file_find(w, &id, NULL, &wf, err, sizeof(err)), 0);
	wfile_put(wf);
	assert_int_equal(stats(w).hash_bytes, 0);
	wsrc_close(w);
	free(p);
}

/* ---- the cache ------------------------------------------------------------- */

static void key_of(uint8_t key[32], int i)
{
	char s[32];

	snprintf(s, sizeof(s), "key %d", i);
	sha256(s, strlen(s), key);
}

static void entry_path(const struct fx *f, const uint8_t key[32], char *out, size_t len)
{
	char hex[65];

	filesum_hex(key, hex);
	snprintf(out, len, "%s/%.2s/%s", f->cache, hex, hex);
}

static void test_cache_roundtrip(void **state)
{
	struct fx *f = *state;
	uint64_t n = 10 * MIB + 7;
	uint8_t *p = make_bytes(n, 10), *q = malloc(n), key[32], other[32];
	struct wsrc *w;
	struct wsrc_stats s;
	char path[300], err[512] = "";

	assert_non_null(q);
	key_of(key, 1);
	key_of(other, 2);
	w = open_w(f, 1, 64 * MIB, 2);
	assert_true(wsrc_has_cache(w));
	assert_int_equal(wsrc_cache_get(w, key, n, q, err, sizeof(err)), PPRPC_EHANDLE);
	assert_non_null(strstr(err, "no entry"));
	assert_int_equal(wsrc_cache_put(w, key, p, n, err, sizeof(err)), 0);
	entry_path(f, key, path, sizeof(path));
	assert_int_equal(access(path, F_OK), 0);
	memset(q, 0, n);
	assert_int_equal(wsrc_cache_get(w, key, n, q, err, sizeof(err)), 0);
	assert_memory_equal(q, p, n);
	/* stored again: the entry is kept, nothing written */
	assert_int_equal(wsrc_cache_put(w, key, p, n, err, sizeof(err)), 0);
	assert_int_equal(wsrc_cache_get(w, other, n, q, err, sizeof(err)), PPRPC_EHANDLE);
	s = stats(w);
	assert_int_equal(s.cache_stores, 1);
	assert_int_equal(s.cache_store_bytes, n);
	assert_int_equal(s.cache_hits, 1);
	assert_int_equal(s.cache_hit_bytes, n);
	assert_int_equal(s.cache_misses, 2);
	assert_int_equal(s.cache_entries, 1);
	assert_int_equal(s.cache_bytes, n + 48);
	wsrc_close(w);

	/* a new rank counts the entry and serves it */
	w = open_w(f, 1, 64 * MIB, 1);
	s = stats(w);
	assert_int_equal(s.cache_entries, 1);
	assert_int_equal(s.cache_bytes, n + 48);
	memset(q, 0, n);
	assert_int_equal(wsrc_cache_get(w, key, n, q, err, sizeof(err)), 0);
	assert_memory_equal(q, p, n);
	/* empty payloads are entries too */
	assert_int_equal(wsrc_cache_put(w, other, p, 0, err, sizeof(err)), 0);
	assert_int_equal(wsrc_cache_get(w, other, 0, q, err, sizeof(err)), 0);
	wsrc_close(w);
	free(p);
	free(q);
}

/* One payload byte flipped: a miss, the entry removed and counted bad. */
static void test_cache_corrupt(void **state)
{
	struct fx *f = *state;
	uint64_t n = 3 * MIB + 1;
	uint8_t *p = make_bytes(n, 11), *q = malloc(n), key[32], b;
	struct wsrc *w;
	struct wsrc_stats s;
	char path[300], err[512] = "";
	int fd;

	assert_non_null(q);
	key_of(key, 3);
	w = open_w(f, 1, 64 * MIB, 2);
	assert_int_equal(wsrc_cache_put(w, key, p, n, err, sizeof(err)), 0);
	entry_path(f, key, path, sizeof(path));
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, 48 + 2 * MIB), 1);
	b ^= 0x10;
	assert_int_equal(pwrite(fd, &b, 1, 48 + 2 * MIB), 1);
	close(fd);
	assert_int_equal(wsrc_cache_get(w, key, n, q, err, sizeof(err)), PPRPC_EHANDLE);
	assert_non_null(strstr(err, "hash mismatch"));
	assert_int_equal(access(path, F_OK), -1);
	s = stats(w);
	assert_int_equal(s.cache_bad, 1);
	assert_int_equal(s.cache_misses, 1);
	assert_int_equal(s.cache_hits, 0);
	assert_int_equal(s.cache_entries, 0);
	assert_int_equal(s.cache_bytes, 0);
	/* and stored again, it is good again */
	assert_int_equal(wsrc_cache_put(w, key, p, n, err, sizeof(err)), 0);
	assert_int_equal(wsrc_cache_get(w, key, n, q, err, sizeof(err)), 0);
	assert_memory_equal(q, p, n);
	wsrc_close(w);
	free(p);
	free(q);
}

/* A truncated entry (header only, or part of the payload): a miss, removed. */
static void test_cache_truncated(void **state)
{
	struct fx *f = *state;
	uint64_t n = 2 * MIB;
	uint8_t *p = make_bytes(n, 12), *q = malloc(n), key[32];
	off_t cut[] = { 48 + (off_t)MIB, 48, 20, 0 };
	struct wsrc *w;
	char path[300], err[512] = "";
	size_t i;

	assert_non_null(q);
	w = open_w(f, 1, 64 * MIB, 2);
	for (i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
		key_of(key, 40 + (int)i);
		assert_int_equal(wsrc_cache_put(w, key, p, n, err, sizeof(err)), 0);
		entry_path(f, key, path, sizeof(path));
		assert_int_equal(truncate(path, cut[i]), 0);
		assert_int_equal(wsrc_cache_get(w, key, n, q, err, sizeof(err)), PPRPC_EHANDLE);
		assert_non_null(strstr(err, "truncated"));
		assert_int_equal(access(path, F_OK), -1);
	}
	assert_int_equal(stats(w).cache_bad, 4);
	assert_int_equal(stats(w).cache_entries, 0);
	assert_int_equal(stats(w).cache_bytes, 0);
	wsrc_close(w);
	free(p);
	free(q);
}

/* Asked with another size than the entry holds: a miss; the entry is sound
 * and stays (the request was wrong, not the entry). */
static void test_cache_size_mismatch(void **state)
{
	struct fx *f = *state;
	uint64_t n = MIB + 5;
	uint8_t *p = make_bytes(n, 13), *q = malloc(n + 1), key[32];
	struct wsrc *w;
	char path[300], err[512] = "";

	assert_non_null(q);
	key_of(key, 5);
	w = open_w(f, 1, 64 * MIB, 1);
	assert_int_equal(wsrc_cache_put(w, key, p, n, err, sizeof(err)), 0);
	assert_int_equal(wsrc_cache_get(w, key, n - 1, q, err, sizeof(err)), PPRPC_EHANDLE);
	assert_non_null(strstr(err, "asked"));
	assert_int_equal(wsrc_cache_get(w, key, n + 1, q, err, sizeof(err)), PPRPC_EHANDLE);
	entry_path(f, key, path, sizeof(path));
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(stats(w).cache_misses, 2);
	assert_int_equal(stats(w).cache_bad, 0);
	assert_int_equal(wsrc_cache_get(w, key, n, q, err, sizeof(err)), 0);
	assert_memory_equal(q, p, n);
	wsrc_close(w);
	free(p);
	free(q);
}

/* Under a bound of three entries, a fourth evicts the least recently used
 * (a get counts as a use), also after a restart (by mtime); a payload
 * beyond the bound is not stored. */
static void test_cache_lru(void **state)
{
	struct fx *f = *state;
	uint64_t n = MIB, bound = 3 * (MIB + 48);
	uint8_t *p = make_bytes(2 * bound, 14), *q = malloc(n), k[6][32];
	struct wsrc *w;
	struct wsrc_stats s;
	char err[512] = "";
	int i;

	assert_non_null(q);
	for (i = 0; i < 6; i++)
		key_of(k[i], 100 + i);
	w = open_w(f, 1, bound, 1);
	for (i = 0; i < 3; i++)
		assert_int_equal(wsrc_cache_put(w, k[i], p + i, n, err, sizeof(err)), 0);
	assert_int_equal(wsrc_cache_get(w, k[0], n, q, err, sizeof(err)), 0); /* k0 used: k1 is the oldest */
	assert_int_equal(wsrc_cache_put(w, k[3], p + 3, n, err, sizeof(err)), 0);
	s = stats(w);
	assert_int_equal(s.cache_evictions, 1);
	assert_int_equal(s.cache_entries, 3);
	assert_true(s.cache_bytes <= bound);
	assert_int_equal(wsrc_cache_get(w, k[1], n, q, err, sizeof(err)), PPRPC_EHANDLE);
	assert_int_equal(wsrc_cache_get(w, k[0], n, q, err, sizeof(err)), 0);
	assert_memory_equal(q, p, n);
	assert_int_equal(wsrc_cache_get(w, k[2], n, q, err, sizeof(err)), 0);
	assert_int_equal(wsrc_cache_get(w, k[3], n, q, err, sizeof(err)), 0);
	assert_memory_equal(q, p + 3, n);
	/* larger than the whole cache: not stored, nothing evicted */
	assert_int_equal(wsrc_cache_put(w, k[4], p, bound, err, sizeof(err)), 0);
	s = stats(w);
	assert_int_equal(s.cache_stores, 4);
	assert_int_equal(s.cache_evictions, 1);
	assert_int_equal(s.cache_entries, 3);
	wsrc_close(w);

	/* after a restart the order of use is the entries' mtimes: k0 was
	 * used before k2 and k3 (the mtimes are made distinct: a coarse
	 * clock could give the three the same) */
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = 1000, .tv_nsec = 0 } };
	char path[300];
	for (i = 0; i < 4; i++) {
		if (i == 1)
			continue;
		entry_path(f, k[i], path, sizeof(path));
		ts[1].tv_sec = 1000 + (i == 0 ? 0 : i);
		assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
	}
	w = open_w(f, 1, bound, 1);
	assert_int_equal(wsrc_cache_put(w, k[5], p + 5, n, err, sizeof(err)), 0);
	assert_int_equal(wsrc_cache_get(w, k[0], n, q, err, sizeof(err)), PPRPC_EHANDLE);
	usleep(20000); /* k2's use after k5's store, also on a coarse clock */
	assert_int_equal(wsrc_cache_get(w, k[2], n, q, err, sizeof(err)), 0);
	wsrc_close(w);

	/* a bound lowered since: the open evicts down to it */
	w = open_w(f, 1, MIB + 48, 1);
	s = stats(w);
	assert_int_equal(s.cache_entries, 1);
	assert_int_equal(s.cache_evictions, 2);
	assert_int_equal(wsrc_cache_get(w, k[2], n, q, err, sizeof(err)), 0); /* the last used */
	wsrc_close(w);
	free(p);
	free(q);
}

static int count_dir(const char *dir, uint64_t *ret_bytes)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char path[512];
	struct stat st;
	int n = 0;

	*ret_bytes = 0;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		n++;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!stat(path, &st))
			*ret_bytes += (uint64_t)st.st_size;
	}
	closedir(d);
	return n;
}

/* A rank killed (SIGKILL) while it writes an entry: its temporary file is
 * all that is left; the next open removes it, and the key is a miss, never
 * a torn hit. */
static void test_cache_kill_mid_write(void **state)
{
	struct fx *f = *state;
	uint64_t n = 256 * MIB, bytes = 0;
	uint8_t key[32], *q;
	char tmp[300], path[300], err[512] = "";
	struct wsrc *w;
	int attempt, status = 0, caught = 0;
	pid_t pid;

	key_of(key, 7);
	snprintf(tmp, sizeof(tmp), "%s/tmp", f->cache);
	entry_path(f, key, path, sizeof(path));
	/* the cache made first, so the child only writes */
	wsrc_close(open_w(f, 1, 1024 * MIB, 2));
	for (attempt = 0; attempt < 3 && !caught; attempt++) {
		pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct wsrc_conf c = { .cache_dir = f->cache, .cache_max_bytes = 1024 * MIB, .threads = 2 };
			uint8_t *p = malloc(n);
			struct wsrc *cw;

			if (!p || wsrc_open(&c, &cw, err, sizeof(err)))
				_exit(2);
			fill(p, n, 15);
			_exit(wsrc_cache_put(cw, key, p, n, err, sizeof(err)) ? 3 : 0);
		}
		/* wait until the payload is on its way into tmp/ */
		for (int i = 0; i < 60000; i++) {
			int k = count_dir(tmp, &bytes);

			if (k > 0 && bytes > 48) {
				kill(pid, SIGKILL);
				caught = 1;
				break;
			}
			if (waitpid(pid, &status, WNOHANG) == pid) {
				pid = 0;
				break;
			}
			usleep(500);
		}
		if (pid > 0) {
			if (!caught)
				kill(pid, SIGKILL);
			assert_int_equal(waitpid(pid, &status, 0), pid);
		}
		if (caught && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
			caught = 0; /* it finished before the signal */
		if (!caught)
			unlink(path);
	}
	assert_true(caught);
	print_message("killed the writer with %llu of %llu bytes in tmp/\n", (unsigned long long)bytes,
		      (unsigned long long)(n + 48));
	assert_true(count_dir(tmp, &bytes) >= 1);
	assert_int_equal(access(path, F_OK), -1);

	w = open_w(f, 1, 1024 * MIB, 2);
	assert_int_equal(count_dir(tmp, &bytes), 0);
	assert_int_equal(stats(w).cache_entries, 0);
	q = malloc(n);
	assert_non_null(q);
	assert_int_equal(wsrc_cache_get(w, key, n, q, err, sizeof(err)), PPRPC_EHANDLE);
	assert_non_null(strstr(err, "no entry"));
	assert_int_equal(stats(w).cache_hits, 0);
	free(q);
	wsrc_close(w);
}

/* ---- concurrency and speed ----------------------------------------------- */

struct reader {
	struct wsrc *w;
	struct wfile *wf;
	const uint8_t *p;
	uint64_t n;
	int id, bad;
};

static void *reader_main(void *a)
{
	struct reader *r = a;
	uint64_t len = r->n / 3, off = (uint64_t)r->id * 1000003 % (r->n - len);
	uint8_t *q = malloc(len), key[32];
	char err[512];
	int i;

	if (!q) {
		r->bad = 1;
		return NULL;
	}
	key_of(key, 1000 + r->id);
	for (i = 0; i < 4 && !r->bad; i++) {
		if (wfile_read(r->w, r->wf, off, len, q, err, sizeof(err)) || memcmp(q, r->p + off, len))
			r->bad = 1;
		if (wsrc_cache_put(r->w, key, r->p + off, len, err, sizeof(err)) ||
		    wsrc_cache_get(r->w, key, len, q, err, sizeof(err)) || memcmp(q, r->p + off, len))
			r->bad = 2;
	}
	free(q);
	return NULL;
}

/* Readers on several threads share a file and the cache while lookups run. */
static void test_concurrent(void **state)
{
	struct fx *f = *state;
	uint64_t n = 12 * MIB + 1;
	uint8_t *p = make_bytes(n, 16);
	struct reader r[4];
	pthread_t t[4];
	struct filesum id;
	struct wfile *wf, *wf2;
	struct wsrc *w;
	char path[256], err[512];
	int i;

	ref_identity(p, n, &id);
	path_in(path, sizeof(path), f->model, "c.gguf");
	write_file(path, p, n);
	w = open_w(f, 1, 64 * MIB, 2);
	assert_int_equal(wsrc_file_find(w, &id, NULL, &wf, err, sizeof(err)), 0);
	for (i = 0; i < 4; i++) {
		r[i] = (struct reader){ .w = w, .wf = wf, .p = p, .n = n, .id = i };
		assert_int_equal(pthread_create(&t[i], NULL, reader_main, &r[i]), 0);
	}
	for (i = 0; i < 8; i++) {
		assert_int_equal(wsrc_file_find(w, &id, i & 1 ? "c.gguf" : NULL, &wf2, err, sizeof(err)), 0);
		wfile_put(wf2);
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].bad, 0);
	}
	assert_int_equal(stats(w).file_reads, 16);
	assert_int_equal(stats(w).cache_hits, 16);
	wfile_put(wf);
	wsrc_close(w);
	free(p);
}

static double secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The content hash of a 1 GiB file (WEIGHTS_SPEED_MIB to change) with 1
 * and 2 threads, from the page cache: the rate the first lookup of a model
 * hashes at when the disk keeps up.  Both give the same hash. */
static void test_hash_speed(void **state)
{
	struct fx *f = *state;
	const char *env = getenv("WEIGHTS_SPEED_MIB");
	uint64_t n = (env ? strtoull(env, NULL, 10) : 1024) * MIB;
	uint8_t *p = make_bytes(n, 17), h[2][32], want[32];
	char path[256], err[200];
	double gbs[2];
	int fd, i;

	filesum_memory(p, n, 2, want);
	path_in(path, sizeof(path), f->model, "big");
	write_file(path, p, n);
	free(p);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	for (i = 0; i < 2; i++) {
		double t0 = secs();

		assert_int_equal(filesum_content(fd, n, i + 1, NULL, NULL, h[i], err, sizeof(err)), 0);
		gbs[i] = (double)n / 1e9 / (secs() - t0);
		assert_memory_equal(h[i], want, 32);
	}
	close(fd);
	print_message("content hash of a %llu MiB file (page cache): %.2f GB/s with 1 thread, %.2f GB/s with 2\n",
		      (unsigned long long)(n / MIB), gbs[0], gbs[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_filesum_known_answer, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_filesum_file_equals_memory, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_filesum_sidecar, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_find_and_read, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_wrong_content_refused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hint_refused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_symlink_outside_never_used, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_truncated_after_verify, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_modified_after_verify, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_sidecar_reused, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_map, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_map_truncated_named, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_map_ahead, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cache_roundtrip, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cache_corrupt, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cache_truncated, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cache_size_mismatch, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cache_lru, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_cache_kill_mid_write, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_recall, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_hash_speed, fx_setup, fx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
