/*
 * tests/integration/test_host_page.c — host pages (pprpc_host_alloc,
 * HOST_PAGE_MAP / HOST_PAGE_UNMAP, TensorGet.host_page) against a real
 * pprpcd on loopback.
 *
 * Library: GETs (blocking and queued) into pprpc_host_alloc memory give the
 * buffer's bytes, the daemon mapped the page (pprpc_host_page_state) and
 * the bytes did not come over the link (the connections' bytes_out); memory
 * of malloc still reads by the link; a freed page is unmapped at the
 * daemon at the next GET (its /proc/PID/maps loses the memfd); a
 * reconnected client maps again.
 *
 * Wire: raw HOST_PAGE_MAPs of a real page of this process (its fd found in
 * /proc/self/fd, its key read from its header) with one field wrong each:
 * every refusal has its code and a message, a FIFO or a device does not
 * block the daemon, a page is its connection's own, a GET outside the page
 * is ERANGE, a good GET lands with no bulk, UNMAP retires the handle.
 *
 * The daemon opens /proc/PID/fd/FD of this process; if it may not (another
 * user, no /proc), the tests are skipped with the reason printed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/core/handles.h"
#include "libclient/client.h"
#include "pprpc.h"
#include "proto/hostpage.h"
#include "tests/integration/harness.h"
#include "tests/integration/tracked.h"
#include "tests/integration/wire.h"

#define MIB (1024ull * 1024ull)
#define SETTLE_MS 10000
/* where hostpage_hdr_init puts the key: after magic, hdr_bytes,
 * key_bytes and len (checked with hostpage_hdr_check below) */
#define HDR_KEY_AT 24

static struct tdaemon g_d;
static char g_skip[512];      /* why the daemon cannot map our pages ("" if it can) */
static char g_boot[64];       /* this host's boot id */

/* ---- helpers ------------------------------------------------------------------ */

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static uint8_t pat(uint64_t i, unsigned seed)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)seed * 0xbf58476d1ce4e5b9ull;

	return (uint8_t)(x >> 29 ^ x >> 47);
}

#define SKIP_IF_NO_MAP()                                                          \
	do {                                                                      \
		if (g_skip[0]) {                                                  \
			fprintf(stderr, "SKIP %s: %s\n", __func__, g_skip);       \
			skip();                                                   \
		}                                                                 \
	} while (0)

/* Connections and host pages a test made: tests/integration/tracked.h. */

static void *page_alloc(uint64_t size)
{
	void *p = pprpc_host_alloc(size);

	if (!p)
		fprintf(stderr, "pprpc_host_alloc(%" PRIu64 "): %s\n", size, strerror(errno));
	assert_non_null(p);
	track(&tracked_pages, p);
	return p;
}

static void page_free(void *p)
{
	untrack(&tracked_pages, p);
	pprpc_host_free(p);
}

static pprpc_client *client_open(void)
{
	return tclient_open(&g_d, "test_host_page", WIRE_TIMEOUT_MS);
}


static int raw_open_hello(void)
{
	int fd = traw_connect(&g_d);

	assert_true(fd >= 0);
	track_fd(fd);
	assert_int_equal(wire_hello(fd), 0);
	return fd;
}

/* The client's mapped pages, and the reason of its last refusal. */
static int mapped_count(pprpc_client *c, char *why, size_t whylen)
{
	int mapped = -1, pinned = -1;

	assert_int_equal(pprpc_host_page_state(c, &mapped, &pinned, why, whylen), 0);
	assert_true(mapped >= 0 && pinned >= 0 && pinned <= mapped);
	return mapped;
}

static void assert_mapped(pprpc_client *c, int want)
{
	char why[256] = "?";
	int n = mapped_count(c, why, sizeof(why));

	if (n != want)
		fprintf(stderr, "host pages mapped: %d, expected %d (last refusal: \"%s\")\n", n, want, why);
	assert_int_equal(n, want);
}

/* Bytes the daemon wrote to all its client connections (a STATS round
 * trip first, so that the writes of what came before are counted: the
 * daemon counts a write when it completes). */
static uint64_t bytes_out(pprpc_client *c)
{
	pprpc_stats *st = NULL;
	uint64_t sum = 0;

	assert_int_equal(pprpc_stats_get(c, &st), 0);
	pprpc_stats_free(st);
	assert_int_equal(pprpc_stats_get(c, &st), 0);
	for (int i = 0; i < pprpc_stats_count(st, "connections"); i++)
		sum += pprpc_stats_u64(st, "connections", i, "bytes_out");
	pprpc_stats_free(st);
	return sum;
}

/* What bytes_out() itself adds (its STATS replies), from two calls in a
 * row: a GET between two calls that adds less than this + 4 KiB sent its
 * bytes some other way than the link. */
static uint64_t bytes_out_overhead(pprpc_client *c)
{
	uint64_t a = bytes_out(c), b = bytes_out(c);

	assert_true(b >= a);
	return b - a;
}

/* Requests of a type the daemon received so far (STATS request_counts). */
static uint64_t requests_of(pprpc_client *c, const char *type)
{
	pprpc_stats *st = NULL;
	uint64_t n = 0;

	assert_int_equal(pprpc_stats_get(c, &st), 0);
	for (int i = 0; i < pprpc_stats_count(st, "request_counts"); i++)
		if (!strcmp(pprpc_stats_str(st, "request_counts", i, "type"), type))
			n += pprpc_stats_u64(st, "request_counts", i, "load_requests") +
			     pprpc_stats_u64(st, "request_counts", i, "run_requests");
	pprpc_stats_free(st);
	return n;
}

/* Host page memfds the daemon has mapped now: distinct inodes of the lines
 * of its /proc/PID/maps naming "memfd:pprpc-host". */
static int daemon_mappings(void)
{
	char path[64], line[512];
	unsigned long ino[256];
	int n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)g_d.pid);
	f = fopen(path, "r");
	if (!f)
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long i = 0;
		int seen = 0;

		if (!strstr(line, "/memfd:" HOSTPAGE_NAME " "))
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %lu", &i) != 1)
			continue;
		for (int k = 0; k < n; k++)
			seen |= ino[k] == i;
		if (!seen && n < 256)
			ino[n++] = i;
	}
	fclose(f);
	return n;
}

/* Wait (connection closes are processed asynchronously) until the daemon
 * maps `want` host pages, then assert it does. */
static void wait_daemon_mappings(int want)
{
	int64_t deadline = wire_now_ms() + SETTLE_MS;
	int n;

	while ((n = daemon_mappings()) != want && wire_now_ms() < deadline)
		sleep_ms(20);
	if (n != want)
		fprintf(stderr, "the daemon maps %d host pages, expected %d\n", n, want);
	assert_int_equal(n, want);
}

/* A library test's start: skipped where the daemon cannot map pages here;
 * the last test's connection gone at the daemon (its pages unmapped); a
 * client. */
static pprpc_client *lib_begin(void)
{
	SKIP_IF_NO_MAP();
	wait_daemon_mappings(0);
	return client_open();
}

static pprpc_buffer buffer_with_pattern(pprpc_client *c, uint64_t size, unsigned seed)
{
	uint8_t *src = malloc(size);
	pprpc_buffer b = { 0 };

	assert_non_null(src);
	for (uint64_t i = 0; i < size; i++)
		src[i] = pat(i, seed);
	assert_int_equal(pprpc_buffer_alloc(c, 0, size, &b), 0);
	assert_int_equal(pprpc_tensor_set(c, b, 0, src, size), 0);
	free(src);
	return b;
}

static void assert_pattern(const uint8_t *p, uint64_t off, uint64_t n, unsigned seed)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i] != pat(off + i, seed)) {
			fprintf(stderr, "byte %" PRIu64 " of %" PRIu64 " (buffer offset %" PRIu64 "): 0x%02x, expected 0x%02x\n",
				i, n, off + i, p[i], pat(off + i, seed));
			fail();
		}
}

static void assert_fill(const uint8_t *p, uint64_t n, uint8_t v)
{
	for (uint64_t i = 0; i < n; i++)
		if (p[i] != v) {
			fprintf(stderr, "byte %" PRIu64 ": 0x%02x, expected untouched 0x%02x\n", i, p[i], v);
			fail();
		}
}

/* ---- a page of this process, as the wire names it ------------------------------------- */

struct tpage {
	uint8_t *mem;                 /* what pprpc_host_alloc returned */
	int fd;                       /* its memfd, found in /proc/self/fd */
	uint64_t size;                /* the file's bytes (header included) */
	uint8_t key[HOSTPAGE_KEY];
};

/* The fd of the memfd whose header is the one in front of mem: each
 * "/memfd:pprpc-host (deleted)" of /proc/self/fd is read at the key's
 * place and compared (other pages of this process have other keys). */
static int find_page_fd(const uint8_t *hdr)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *e;
	int found = -1;

	assert_non_null(dir);
	while ((e = readdir(dir)) && found < 0) {
		char path[300], link[256];
		uint8_t key[HOSTPAGE_KEY];
		ssize_t n;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		fd = atoi(e->d_name);
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, "/memfd:" HOSTPAGE_NAME " (deleted)"))
			continue;
		if (pread(fd, key, sizeof(key), HDR_KEY_AT) == (ssize_t)sizeof(key) &&
		    !memcmp(key, hdr + HDR_KEY_AT, sizeof(key)))
			found = fd;
	}
	closedir(dir);
	return found;
}

static void tpage_make(struct tpage *t, uint64_t size)
{
	const uint8_t *hdr;
	struct stat st;
	char why[256] = "";

	memset(t, 0, sizeof(*t));
	t->mem = page_alloc(size);
	hdr = t->mem - HOSTPAGE_HDR;
	t->fd = find_page_fd(hdr);
	assert_true(t->fd >= 0);
	assert_int_equal(fstat(t->fd, &st), 0);
	t->size = (uint64_t)st.st_size;
	assert_int_equal(t->size, HOSTPAGE_HDR + ((size + 4095) & ~4095ull));
	memcpy(t->key, hdr + HDR_KEY_AT, HOSTPAGE_KEY);
	/* the key is where this test reads it */
	if (hostpage_hdr_check(hdr, t->size, t->key, HOSTPAGE_KEY, why, sizeof(why)) != 0)
		fprintf(stderr, "the header does not check: %s\n", why);
	assert_int_equal(hostpage_hdr_check(hdr, t->size, t->key, HOSTPAGE_KEY, why, sizeof(why)), 0);
}

struct mapreq {
	uint64_t pid;
	int32_t fd;
	uint64_t size;
	const uint8_t *key;
	size_t keylen;
	const char *host;
	uint32_t flags;
};

static struct mapreq good_map(const struct tpage *t)
{
	struct mapreq m = {
		.pid = (uint64_t)getpid(), .fd = t->fd, .size = t->size, .key = t->key, .keylen = HOSTPAGE_KEY,
		.host = g_boot,
	};

	return m;
}

static int send_map(int fd, uint64_t req_id, const struct mapreq *q)
{
	Pprpc__HostPageMap m = PPRPC__HOST_PAGE_MAP__INIT;

	m.pid = q->pid;
	m.fd = q->fd;
	m.size = q->size;
	m.key.data = (uint8_t *)q->key;
	m.key.len = q->keylen;
	m.host = (char *)q->host;
	return wire_send_flags(fd, MSG_HOST_PAGE_MAP, q->flags, req_id, &m.base, NULL, 0);
}

/* The next reply answers (type, req_id): its error code (0 for a success),
 * the message of an error, the handle of a MAP's success, the bulk. */
struct answer {
	int code;
	char msg[256];
	uint64_t handle;
	int pinned;
	uint64_t bulk_len;
};

static void read_answer(int fd, uint16_t type, uint64_t req_id, struct answer *a)
{
	struct wire_reply r;
	int rc = wire_read_reply(fd, &r, WIRE_TIMEOUT_MS);

	memset(a, 0, sizeof(*a));
	if (rc != 0)
		fprintf(stderr, "no reply to %s #%" PRIu64 ": %d (%s)\n", msg_type_name(type), req_id, rc,
			rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
	assert_int_equal(rc, 0);
	assert_int_equal(r.h.type, type);
	assert_int_equal(r.h.req_id, req_id);
	a->bulk_len = r.h.bulk_len;
	if (r.is_error) {
		a->code = r.code;
		snprintf(a->msg, sizeof(a->msg), "%s", r.msg);
		assert_true(r.code < 0);
		assert_true(r.msg[0] != '\0');   /* every refusal says why */
		assert_int_equal(r.h.bulk_len, 0);
		assert_int_equal(r.command, req_id);
	} else if (type == MSG_HOST_PAGE_MAP) {
		ProtobufCMessage *m = NULL;

		assert_int_equal(wire_reply_unpack(&r, &pprpc__host_page_map_reply__descriptor, &m), 0);
		a->handle = ((const Pprpc__HostPageMapReply *)m)->host_page;
		a->pinned = ((const Pprpc__HostPageMapReply *)m)->pinned;
		meta_free(m);
	}
	wire_reply_free(&r);
}

static void expect_code(int fd, uint16_t type, uint64_t req_id, int code, const char *what)
{
	struct answer a;

	read_answer(fd, type, req_id, &a);
	if (a.code != code)
		fprintf(stderr, "%s: expected %d (%s), got %d: \"%s\"\n", what, code, code ? pprpc_strerror(code) : "success",
			a.code, a.msg);
	else
		fprintf(stderr, "  %-40s -> %d \"%s\"\n", what, a.code, a.msg);
	assert_int_equal(a.code, code);
}

static void map_refused(int fd, uint64_t *req_id, const struct mapreq *q, int code, const char *what)
{
	uint64_t id = (*req_id)++;

	assert_int_equal(send_map(fd, id, q), 0);
	expect_code(fd, MSG_HOST_PAGE_MAP, id, code, what);
}

static uint64_t map_ok(int fd, uint64_t *req_id, const struct mapreq *q)
{
	uint64_t id = (*req_id)++;
	struct answer a;

	assert_int_equal(send_map(fd, id, q), 0);
	read_answer(fd, MSG_HOST_PAGE_MAP, id, &a);
	if (a.code)
		fprintf(stderr, "HOST_PAGE_MAP refused: %d %s\n", a.code, a.msg);
	assert_int_equal(a.code, 0);
	assert_true(a.handle != 0);
	assert_int_equal(a.handle >> 56, HK_HOST_PAGE);   /* kind:8 | tag:32 | slot:24 */
	return a.handle;
}

static int send_get(int fd, uint64_t req_id, uint32_t flags, uint64_t buf, uint64_t off, uint64_t size, uint64_t page,
		    uint64_t page_off)
{
	Pprpc__TensorGet m = PPRPC__TENSOR_GET__INIT;

	m.buffer = buf;
	m.offset = off;
	m.size = size;
	m.host_page = page;
	m.host_page_offset = page_off;
	return wire_send_flags(fd, MSG_TENSOR_GET, flags, req_id, &m.base, NULL, 0);
}

static void get_answer(int fd, uint64_t *req_id, uint32_t flags, uint64_t buf, uint64_t off, uint64_t size,
		       uint64_t page, uint64_t page_off, int code, const char *what)
{
	uint64_t id = (*req_id)++;
	struct answer a;

	assert_int_equal(send_get(fd, id, flags, buf, off, size, page, page_off), 0);
	read_answer(fd, MSG_TENSOR_GET, id, &a);
	if (a.code != code)
		fprintf(stderr, "%s: expected %d, got %d \"%s\"\n", what, code, a.code, a.msg);
	else
		fprintf(stderr, "  %-40s -> %d \"%s\"\n", what, a.code, a.msg);
	assert_int_equal(a.code, code);
	if (!code)
		assert_int_equal(a.bulk_len, 0);   /* the bytes landed, none came */
}

static void unmap_answer(int fd, uint64_t *req_id, uint32_t flags, uint64_t page, int code, const char *what)
{
	Pprpc__HostPageUnmap m = PPRPC__HOST_PAGE_UNMAP__INIT;
	uint64_t id = (*req_id)++;

	m.host_page = page;
	assert_int_equal(wire_send_flags(fd, MSG_HOST_PAGE_UNMAP, flags, id, &m.base, NULL, 0), 0);
	expect_code(fd, MSG_HOST_PAGE_UNMAP, id, code, what);
}

static uint64_t raw_buffer_pattern(int fd, uint64_t *req_id, uint64_t size, unsigned seed)
{
	Pprpc__BufferAlloc a = PPRPC__BUFFER_ALLOC__INIT;
	Pprpc__TensorSet s = PPRPC__TENSOR_SET__INIT;
	ProtobufCMessage *m = NULL;
	struct wire_reply r;
	uint8_t *src = malloc(size);
	uint64_t h;

	assert_non_null(src);
	a.device = 0;
	a.size = size;
	assert_int_equal(wire_call(fd, MSG_BUFFER_ALLOC, (*req_id)++, &a.base, NULL, 0, &r), 0);
	assert_false(r.is_error);
	assert_int_equal(wire_reply_unpack(&r, &pprpc__buffer_alloc_reply__descriptor, &m), 0);
	h = ((const Pprpc__BufferAllocReply *)m)->buffer;
	meta_free(m);
	wire_reply_free(&r);
	for (uint64_t i = 0; i < size; i++)
		src[i] = pat(i, seed);
	s.buffer = h;
	s.size = size;
	assert_int_equal(wire_call(fd, MSG_TENSOR_SET, (*req_id)++, &s.base, src, size, &r), 0);
	assert_false(r.is_error);
	wire_reply_free(&r);
	free(src);
	return h;
}

/* ---- daemon for the file --------------------------------------------------------- */

static void read_boot_id(void)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	g_boot[0] = '\0';
	if (f) {
		if (fgets(g_boot, sizeof(g_boot), f))
			g_boot[strcspn(g_boot, "\n")] = '\0';
		fclose(f);
	}
}

/* Can the daemon map a page of this process at all?  If not, why (the
 * tests that need it are skipped with it). */
static void probe(void)
{
	struct tpage t;
	struct mapreq q;
	struct answer a;
	int fd;

	g_skip[0] = '\0';
	if (!g_boot[0]) {
		snprintf(g_skip, sizeof(g_skip), "no /proc/sys/kernel/random/boot_id");
		return;
	}
	tpage_make(&t, 4096);
	fd = raw_open_hello();
	q = good_map(&t);
	assert_int_equal(send_map(fd, 2, &q), 0);
	read_answer(fd, MSG_HOST_PAGE_MAP, 2, &a);
	if (a.code == PPRPC_EUNSUPP && strstr(a.msg, "/proc/"))
		snprintf(g_skip, sizeof(g_skip), "the daemon cannot open this process's fds: %s", a.msg);
	else if (a.code)
		fprintf(stderr, "probe: a good HOST_PAGE_MAP refused: %d %s\n", a.code, a.msg);
	raw_close(fd);
	page_free(t.mem);
}

static int group_setup(void **state)
{
	static const char *const extra[] = { "--threads", "2", NULL };

	(void)state;
	read_boot_id();
	if (tdaemon_start(&g_d, extra) < 0)
		return -1;
	probe();
	tracked_cleanup(NULL);
	if (g_skip[0])
		fprintf(stderr, "host pages: the tests that map one are skipped: %s\n", g_skip);
	return 0;
}

static int group_teardown(void **state)
{
	int alive = tdaemon_alive(&g_d);
	int st = tdaemon_stop(&g_d);

	(void)state;
	if (!alive || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "pprpcd did not survive or did not exit cleanly (alive %d, status 0x%x)\n", alive, st);
		return -1;
	}
	return 0;
}

/* ---- library ------------------------------------------------------------------ */

/* pprpc_host_alloc's contract, no daemon involved. */
static void test_alloc(void **state)
{
	uint8_t *p, *q;

	(void)state;
	p = page_alloc(12345);
	assert_int_equal((uintptr_t)p % 4096, 0);
	assert_fill(p, 16384, 0);              /* zeroed, whole pages */
	assert_true(pprpc_host_is(p, 12345));
	assert_true(pprpc_host_is(p, 16384));
	assert_true(pprpc_host_is(p + 16383, 1));
	assert_false(pprpc_host_is(p, 16385));
	assert_false(pprpc_host_is(p - 1, 1));  /* the header is not the caller's */
	assert_false(pprpc_host_is(p + 16384, 1));
	q = malloc(64);
	assert_non_null(q);
	assert_false(pprpc_host_is(q, 1));
	pprpc_host_free(q);                    /* not a host page: nothing happens */
	free(q);
	errno = 0;
	assert_null(pprpc_host_alloc(0));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(pprpc_host_alloc(HOSTPAGE_MAX_BYTES));
	assert_int_equal(errno, EINVAL);
	pprpc_host_free(NULL);
	page_free(p);
	assert_false(pprpc_host_is(p, 1));
}

/* Blocking GETs into a host page: the bytes, mapped once, none by the link;
 * malloc memory still by the link. */
static void test_lib_get(void **state)
{
	const uint64_t bsize = 2 * MIB, odd = 12345, odd_src = 777, odd_at = MIB + 4097;
	pprpc_client *c;
	pprpc_buffer b;
	uint8_t *hp, *m;
	uint64_t before, after, over;
	int maps0;

	(void)state;
	SKIP_IF_NO_MAP();
	c = client_open();
	b = buffer_with_pattern(c, bsize, 1);
	over = bytes_out_overhead(c);
	hp = page_alloc(3 * MIB);
	memset(hp, 0xaa, 3 * MIB);
	assert_mapped(c, 0);
	/* the last test's connection may still be closing at the daemon */
	wait_daemon_mappings(0);
	maps0 = 0;

	/* 1 MiB at the page's start */
	before = bytes_out(c);
	assert_int_equal(pprpc_tensor_get(c, b, 0, hp, MIB), 0);
	after = bytes_out(c);
	assert_pattern(hp, 0, MIB, 1);
	assert_mapped(c, 1);
	assert_int_equal(daemon_mappings(), maps0 + 1);
	fprintf(stderr, "1 MiB GET into the host page: %" PRIu64 " bytes out, %" PRIu64 " of them STATS replies\n",
		after - before, over);
	assert_true(after - before < over + 4096);

	/* an odd size at an odd place of the page, from an odd offset */
	before = bytes_out(c);
	assert_int_equal(pprpc_tensor_get(c, b, odd_src, hp + odd_at, odd), 0);
	after = bytes_out(c);
	assert_pattern(hp + odd_at, odd_src, odd, 1);
	assert_fill(hp + MIB, odd_at - MIB, 0xaa);                 /* nothing before */
	assert_fill(hp + odd_at + odd, 3 * MIB - odd_at - odd, 0xaa); /* nor after */
	assert_true(after - before < over + 4096);
	assert_mapped(c, 1);

	/* the last bytes of the page */
	assert_int_equal(pprpc_tensor_get(c, b, bsize - 4096, hp + 3 * MIB - 4096, 4096), 0);
	assert_pattern(hp + 3 * MIB - 4096, bsize - 4096, 4096, 1);

	/* malloc memory: by the link, as before */
	m = malloc(odd + 1);
	assert_non_null(m);
	before = bytes_out(c);
	assert_int_equal(pprpc_tensor_get(c, b, odd_src, m + 1, odd), 0);
	after = bytes_out(c);
	assert_pattern(m + 1, odd_src, odd, 1);
	assert_true(after - before >= over + odd);
	free(m);
	assert_mapped(c, 1);
	assert_int_equal(requests_of(c, "HOST_PAGE_MAP") >= 1, 1);

	assert_int_equal(pprpc_buffer_free(c, b), 0);
	client_close(c);
	page_free(hp);
	wait_daemon_mappings(maps0);
}

/* Queued GETs into a host page, and into malloc memory between them. */
static void test_lib_get_async(void **state)
{
	const uint64_t bsize = 2 * MIB;
	static const uint64_t at[][3] = {   /* buffer offset, page offset, size */
		{ 0, 0, MIB }, { 777, MIB + 4097, 12345 }, { 3, MIB + 65536 + 1, 1 }, { 100001, 2 * MIB + 5, 65537 },
	};
	pprpc_client *c;
	pprpc_buffer b;
	uint8_t *hp, *m;
	uint64_t before, after, over;

	(void)state;
	SKIP_IF_NO_MAP();
	c = client_open();
	b = buffer_with_pattern(c, bsize, 2);
	over = bytes_out_overhead(c);
	hp = page_alloc(3 * MIB);
	m = malloc(12345);
	assert_non_null(m);
	memset(hp, 0xaa, 3 * MIB);

	before = bytes_out(c);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		assert_int_equal(pprpc_tensor_get_async(c, b, at[i][0], hp + at[i][1], at[i][2]), 0);
		if (i == 1)
			assert_int_equal(pprpc_tensor_get_async(c, b, 4242, m, 12345), 0);
	}
	assert_int_equal(pprpc_synchronize(c, 0), 0);
	after = bytes_out(c);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		assert_pattern(hp + at[i][1], at[i][0], at[i][2], 2);
	assert_pattern(m, 4242, 12345, 2);
	assert_fill(hp + MIB, 4097, 0xaa);
	assert_mapped(c, 1);
	fprintf(stderr, "%" PRIu64 " bytes in 4 queued GETs into the host page and 12345 into malloc memory: %" PRIu64
		" bytes out\n", (uint64_t)(MIB + 12345 + 1 + 65537), after - before);
	/* the malloc GET's bytes came; the page's did not */
	assert_true(after - before >= over + 12345 && after - before < over + 12345 + 4096);

	free(m);
	assert_int_equal(pprpc_buffer_free(c, b), 0);
	client_close(c);
	page_free(hp);
}

/* A freed page is unmapped at the daemon on the client's next GET; a new
 * page maps in its place. */
static void test_lib_free_sweep(void **state)
{
	pprpc_client *c;
	pprpc_buffer b;
	uint8_t *hp1, *hp2;
	uint64_t unmaps0;
	int maps0;

	(void)state;
	c = lib_begin();
	maps0 = 0;
	b = buffer_with_pattern(c, 65536, 3);
	hp1 = page_alloc(65536);
	assert_int_equal(pprpc_tensor_get(c, b, 0, hp1, 65536), 0);
	assert_pattern(hp1, 0, 65536, 3);
	assert_mapped(c, 1);
	assert_int_equal(daemon_mappings(), maps0 + 1);
	unmaps0 = requests_of(c, "HOST_PAGE_UNMAP");

	page_free(hp1);
	/* the daemon's mapping still holds the memory until the next GET */
	assert_int_equal(daemon_mappings(), maps0 + 1);
	hp2 = page_alloc(65536);
	assert_int_equal(pprpc_tensor_get(c, b, 100, hp2 + 1, 5000), 0);
	assert_pattern(hp2 + 1, 100, 5000, 3);
	assert_mapped(c, 1);
	assert_int_equal(requests_of(c, "HOST_PAGE_UNMAP"), unmaps0 + 1);
	assert_int_equal(daemon_mappings(), maps0 + 1);   /* the new one, not the old */

	/* a GET into malloc memory sweeps too */
	page_free(hp2);
	{
		uint8_t m[100];

		assert_int_equal(pprpc_tensor_get(c, b, 0, m, sizeof(m)), 0);
		assert_pattern(m, 0, sizeof(m), 3);
	}
	assert_mapped(c, 0);
	assert_int_equal(requests_of(c, "HOST_PAGE_UNMAP"), unmaps0 + 2);
	assert_int_equal(daemon_mappings(), maps0);

	/* a page freed while queued GETs into it are in flight: the daemon's
	 * mapping takes their bytes, nothing of this process is written; the
	 * sweep's UNMAP goes between queued GETs into another page */
	hp1 = page_alloc(65536);
	hp2 = page_alloc(65536);
	for (int i = 0; i < 8; i++)
		assert_int_equal(pprpc_tensor_get_async(c, b, 0, hp1, 65536), 0);
	assert_mapped(c, 1);
	page_free(hp1);
	for (int i = 0; i < 8; i++)
		assert_int_equal(pprpc_tensor_get_async(c, b, (uint64_t)i, hp2 + i * 4096, 4096), 0);
	assert_int_equal(pprpc_synchronize(c, 0), 0);
	for (int i = 0; i < 8; i++)
		assert_pattern(hp2 + i * 4096, (uint64_t)i, 4096, 3);
	assert_mapped(c, 1);
	assert_int_equal(requests_of(c, "HOST_PAGE_UNMAP"), unmaps0 + 3);
	wait_daemon_mappings(maps0 + 1);
	page_free(hp2);

	assert_int_equal(pprpc_buffer_free(c, b), 0);
	client_close(c);
	wait_daemon_mappings(maps0);
}

/* More pages than a client maps (CLIENT_MAX_HOST_PAGES): the rest read by
 * the link, every byte right; closing the client unmaps them all. */
static void test_lib_many_pages(void **state)
{
	enum { NP = CLIENT_MAX_HOST_PAGES + 2 };
	uint8_t *hp[NP];
	pprpc_client *c;
	pprpc_buffer b;
	int maps0;

	(void)state;
	c = lib_begin();
	maps0 = 0;
	b = buffer_with_pattern(c, 65536, 4);
	for (int i = 0; i < NP; i++) {
		hp[i] = page_alloc(4096 * (uint64_t)(i + 1));
		assert_int_equal(pprpc_tensor_get(c, b, (uint64_t)i * 13, hp[i] + i, 4096 - (uint64_t)i), 0);
	}
	for (int i = 0; i < NP; i++)
		assert_pattern(hp[i] + i, (uint64_t)i * 13, 4096 - (uint64_t)i, 4);
	assert_mapped(c, CLIENT_MAX_HOST_PAGES);
	assert_int_equal(daemon_mappings(), maps0 + CLIENT_MAX_HOST_PAGES);
	assert_int_equal(pprpc_buffer_free(c, b), 0);
	client_close(c);
	wait_daemon_mappings(maps0);
	for (int i = 0; i < NP; i++)
		page_free(hp[i]);
}

/* A new session has none of the old one's pages; the next GET maps again.
 * Two clients map one page each for themselves. */
static void test_lib_reconnect_two_clients(void **state)
{
	pprpc_client *c, *c2;
	pprpc_buffer b, b2;
	uint8_t *hp;

	(void)state;
	SKIP_IF_NO_MAP();
	c = client_open();
	c2 = client_open();
	hp = page_alloc(65536);
	b = buffer_with_pattern(c, 8192, 5);
	b2 = buffer_with_pattern(c2, 8192, 6);
	assert_int_equal(pprpc_tensor_get(c, b, 0, hp, 8192), 0);
	assert_int_equal(pprpc_tensor_get(c2, b2, 0, hp + 8192, 8192), 0);
	assert_pattern(hp, 0, 8192, 5);
	assert_pattern(hp + 8192, 0, 8192, 6);
	assert_mapped(c, 1);
	assert_mapped(c2, 1);

	assert_int_equal(pprpc_reconnect(c, NULL), 0);
	assert_mapped(c, 0);
	b = buffer_with_pattern(c, 8192, 7);
	assert_int_equal(pprpc_tensor_get(c, b, 1, hp + 3, 8000), 0);
	assert_pattern(hp + 3, 1, 8000, 7);
	assert_mapped(c, 1);
	assert_pattern(hp + 8192, 0, 8192, 6);

	client_close(c);
	client_close(c2);
	page_free(hp);
}

/* ---- raw wire ------------------------------------------------------------------ */

static int count_lines(const char *log, const char *needle)
{
	int n = 0;

	for (const char *p = log; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* A client that keeps sending refused MAPs does not fill the daemon's log:
 * its refusals are said as every request's are (reply.c: the first few,
 * then at debug level). */
static void test_wire_refusal_log(void **state)
{
	static const char needle[] = "the key is not the host page's";
	uint8_t badkey[HOSTPAGE_KEY];
	struct tpage t;
	struct mapreq q;
	uint64_t id = 10;
	char *log;
	int fd, before, after;

	(void)state;
	SKIP_IF_NO_MAP();
	tpage_make(&t, 4096);
	memcpy(badkey, t.key, sizeof(badkey));
	badkey[0] ^= 1;
	q = good_map(&t), q.key = badkey;
	log = tdaemon_log(&g_d);
	before = count_lines(log, needle);
	free(log);
	fd = raw_open_hello();
	for (int i = 0; i < 40; i++) {
		uint64_t mid = id++;
		struct answer a;

		assert_int_equal(send_map(fd, mid, &q), 0);
		read_answer(fd, MSG_HOST_PAGE_MAP, mid, &a);
		assert_int_equal(a.code, PPRPC_EAUTH);
	}
	raw_close(fd);
	log = tdaemon_log(&g_d);
	after = count_lines(log, needle);
	free(log);
	fprintf(stderr, "40 refused MAPs: %d log lines\n", after - before);
	assert_true(after - before <= 8);
	assert_serves(&g_d, "test_host_page");
}

/* A memfd named name of t's size holding t's header, with seals (0: none). */
static int fake_page(const struct tpage *t, const char *name, unsigned seals)
{
	int mfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);

	assert_true(mfd >= 0);
	assert_int_equal(ftruncate(mfd, (off_t)t->size), 0);
	assert_int_equal(pwrite(mfd, t->mem - HOSTPAGE_HDR, HOSTPAGE_HDR, 0), HOSTPAGE_HDR);
	if (seals)
		assert_int_equal(fcntl(mfd, F_ADD_SEALS, seals), 0);
	return mfd;
}

/* Each HOST_PAGE_MAP refusal, with its code and a message; nothing hangs. */
static void test_wire_map_refusals(void **state)
{
	char dir[] = "/tmp/pprpc-hp-XXXXXX", fifo[64], file[64];
	uint8_t badkey[HOSTPAGE_KEY + 1];
	struct tpage t;
	struct mapreq q;
	uint64_t id = 10, h;
	int fd, other, p[2], s[2], mfd;
	int64_t t0;

	(void)state;
	SKIP_IF_NO_MAP();
	tpage_make(&t, 8192);
	fd = raw_open_hello();

	fprintf(stderr, "refusals (code, message):\n");
	/* the key */
	memcpy(badkey, t.key, HOSTPAGE_KEY);
	badkey[7] ^= 0x40;
	q = good_map(&t), q.key = badkey;
	map_refused(fd, &id, &q, PPRPC_EAUTH, "wrong key");
	q = good_map(&t), q.keylen = HOSTPAGE_KEY - 1;
	map_refused(fd, &id, &q, PPRPC_EAUTH, "key of 31 bytes");
	memcpy(badkey, t.key, HOSTPAGE_KEY);
	badkey[HOSTPAGE_KEY] = 0;
	q = good_map(&t), q.key = badkey, q.keylen = HOSTPAGE_KEY + 1;
	map_refused(fd, &id, &q, PPRPC_EAUTH, "key of 33 bytes (the right 32 first)");
	q = good_map(&t), q.key = NULL, q.keylen = 0;
	map_refused(fd, &id, &q, PPRPC_EAUTH, "no key");
	/* the host */
	q = good_map(&t), q.host = "x";
	map_refused(fd, &id, &q, PPRPC_EUNSUPP, "host \"x\"");
	q = good_map(&t), q.host = NULL;
	map_refused(fd, &id, &q, PPRPC_EUNSUPP, "no host");
	/* the size */
	q = good_map(&t), q.size = t.size + 4096;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "size + 4096");
	q = good_map(&t), q.size = t.size - 4096;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "size - 4096 (only the header)");
	q = good_map(&t), q.size = t.size + 1;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "size + 1");
	q = good_map(&t), q.size = 0;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "size 0");
	q = good_map(&t), q.size = HOSTPAGE_MAX_BYTES + 4096;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "size over the most");
	/* the process and fd */
	q = good_map(&t), q.pid = 0;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "pid 0");
	q = good_map(&t), q.pid = 1ull << 40;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "pid 2^40");
	q = good_map(&t), q.pid = INT32_MAX;   /* above any pid_max: no such process */
	map_refused(fd, &id, &q, PPRPC_EUNSUPP, "pid INT32_MAX (none)");
	q = good_map(&t), q.fd = -1;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "fd -1");
	q = good_map(&t), q.fd = 1 << 20;      /* not open */
	map_refused(fd, &id, &q, PPRPC_EUNSUPP, "fd not open");
	q = good_map(&t), q.pid = (uint64_t)g_d.pid, q.fd = 0;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "the daemon's own fd 0");
	/* files that are not a host page's memfd: refused before any open, so
	 * a FIFO with no writer does not block the daemon */
	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(file, sizeof(file), "%s/file", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	other = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	assert_true(other >= 0);
	q = good_map(&t), q.fd = other;
	t0 = wire_now_ms();
	map_refused(fd, &id, &q, PPRPC_EINVAL, "a FIFO (no writer)");
	assert_true(wire_now_ms() - t0 < 2000);
	close(other);
	other = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(other >= 0);
	assert_int_equal(ftruncate(other, (off_t)t.size), 0);
	assert_int_equal(pwrite(other, t.mem - HOSTPAGE_HDR, HOSTPAGE_HDR, 0), HOSTPAGE_HDR);  /* its header too */
	q = good_map(&t), q.fd = other;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "a plain file with the page's header");
	assert_int_equal(unlink(file), 0);
	map_refused(fd, &id, &q, PPRPC_EINVAL, "the same, deleted");
	close(other);
	assert_int_equal(unlink(fifo), 0);
	assert_int_equal(rmdir(dir), 0);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	q = good_map(&t), q.fd = p[0];
	map_refused(fd, &id, &q, PPRPC_EINVAL, "a pipe");
	close(p[0]);
	close(p[1]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
	q = good_map(&t), q.fd = s[0];
	map_refused(fd, &id, &q, PPRPC_EINVAL, "a socket");
	close(s[0]);
	close(s[1]);
	other = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(other >= 0);
	q = good_map(&t), q.fd = other;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "/dev/null");
	close(other);

	/* memfds that are not host pages */
	mfd = fake_page(&t, HOSTPAGE_NAME, 0);
	q = good_map(&t), q.fd = mfd;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "an unsealed memfd \"pprpc-host\"");
	assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_GROW), 0);
	map_refused(fd, &id, &q, PPRPC_EINVAL, "sealed against growing only");
	assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	/* now as a host page is, with the page's header: its key maps it */
	h = map_ok(fd, &id, &q);
	unmap_answer(fd, &id, 0, h, 0, "unmap it");
	{
		uint8_t zero[64] = { 0 };

		assert_int_equal(pwrite(mfd, zero, sizeof(zero), 0), (ssize_t)sizeof(zero));
	}
	map_refused(fd, &id, &q, PPRPC_EPROTO, "a sealed memfd without a header");
	close(mfd);
	mfd = fake_page(&t, HOSTPAGE_NAME "x", F_SEAL_SHRINK | F_SEAL_GROW);
	q = good_map(&t), q.fd = mfd;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "a memfd named \"pprpc-hostx\"");
	close(mfd);
	/* sealed against writes: the daemon cannot map it writable, and says
	 * the file is wrong (not that it lacks memory) */
	mfd = fake_page(&t, HOSTPAGE_NAME, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE);
	q = good_map(&t), q.fd = mfd;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "a write-sealed memfd");
	close(mfd);

	/* answered, never queued */
	q = good_map(&t), q.flags = FRAME_F_QUEUED;
	map_refused(fd, &id, &q, PPRPC_EINVAL, "HOST_PAGE_MAP queued");

	/* and after all that, the good one maps */
	q = good_map(&t);
	h = map_ok(fd, &id, &q);
	unmap_answer(fd, &id, FRAME_F_QUEUED, h, PPRPC_EINVAL, "HOST_PAGE_UNMAP queued");
	unmap_answer(fd, &id, 0, h, 0, "HOST_PAGE_UNMAP");
	raw_close(fd);
	assert_serves(&g_d, "test_host_page");
}

/* GETs naming a page: ranges, owners, landing, UNMAP. */
static void test_wire_get(void **state)
{
	const uint64_t bsize = 65536;
	struct tpage t;
	struct mapreq q;
	uint64_t id = 10, id2 = 10, buf, buf2, h, h2, room;
	int fd, fd2;

	(void)state;
	SKIP_IF_NO_MAP();
	tpage_make(&t, 3 * 4096);
	room = t.size - HOSTPAGE_HDR;
	memset(t.mem, 0xaa, room);
	fd = raw_open_hello();
	buf = raw_buffer_pattern(fd, &id, bsize, 8);
	q = good_map(&t);
	h = map_ok(fd, &id, &q);
	fprintf(stderr, "GETs naming host page 0x%016" PRIx64 " (%" PRIu64 " bytes):\n", h, room);

	get_answer(fd, &id, 0, buf, 0, 16, h, room - 8, PPRPC_ERANGE, "16 bytes 8 before the end");
	get_answer(fd, &id, 0, buf, 0, room + 1, h, 0, PPRPC_ERANGE, "one byte more than the page");
	get_answer(fd, &id, 0, buf, 0, 16, h, UINT64_MAX - 7, PPRPC_ERANGE, "offset + size wraps");
	get_answer(fd, &id, FRAME_F_QUEUED, buf, 0, 16, h, room, PPRPC_ERANGE, "queued, at the end");
	get_answer(fd, &id, 0, buf, bsize - 8, 16, h, 0, PPRPC_ERANGE, "past the buffer's end");
	get_answer(fd, &id, 0, buf, 0, 16, buf, 0, PPRPC_EINVAL, "a buffer handle as the page");
	get_answer(fd, &id, 0, buf, 0, 16, h ^ (1ull << 24), 0, PPRPC_EINVAL, "the page's handle, another tag");
	get_answer(fd, &id, 0, buf, 0, 16, h + 1, 0, PPRPC_EINVAL, "the page's handle, another slot");
	assert_fill(t.mem, room, 0xaa);   /* nothing landed */

	/* a second connection: the handle is not its own */
	fd2 = raw_open_hello();
	buf2 = raw_buffer_pattern(fd2, &id2, bsize, 9);
	{
		uint64_t gid = id2++;
		struct answer a;

		assert_int_equal(send_get(fd2, gid, 0, buf2, 0, 16, h, 0), 0);
		read_answer(fd2, MSG_TENSOR_GET, gid, &a);
		fprintf(stderr, "  %-40s -> %d \"%s\"\n", "another connection's page", a.code, a.msg);
		assert_int_equal(a.code, PPRPC_EINVAL);
		assert_non_null(strstr(a.msg, "no such host page"));
	}
	unmap_answer(fd2, &id2, 0, h, PPRPC_EINVAL, "UNMAP of another connection's page");
	assert_fill(t.mem, room, 0xaa);
	/* it may map the page itself (it knows the key): a handle of its own */
	h2 = map_ok(fd2, &id2, &q);
	assert_true(h2 != h);
	get_answer(fd2, &id2, 0, buf2, 100, 4000, h2, 2 * 4096 + 1, 0, "conn 2: 4000 bytes at page offset 8193");
	assert_pattern(t.mem + 2 * 4096 + 1, 100, 4000, 9);

	/* landing: blocking and queued, the reply without bulk */
	get_answer(fd, &id, 0, buf, 777, 4097, h, 3, 0, "4097 bytes at page offset 3");
	assert_pattern(t.mem + 3, 777, 4097, 8);
	assert_fill(t.mem, 3, 0xaa);
	assert_int_equal(t.mem[3 + 4097], 0xaa);
	get_answer(fd, &id, FRAME_F_QUEUED, buf, 0, room, h, 0, 0, "queued, the whole page");
	assert_pattern(t.mem, 0, room, 8);
	get_answer(fd, &id, 0, buf, 0, 0, h, room, 0, "0 bytes at the end");

	/* UNMAP: the handle is gone */
	unmap_answer(fd, &id, 0, h, 0, "HOST_PAGE_UNMAP");
	get_answer(fd, &id, 0, buf, 0, 16, h, 0, PPRPC_EINVAL, "GET after UNMAP");
	unmap_answer(fd, &id, 0, h, PPRPC_EINVAL, "UNMAP again");
	/* the other connection's mapping is its own */
	memset(t.mem, 0xaa, room);
	get_answer(fd2, &id2, 0, buf2, 0, 100, h2, 0, 0, "conn 2 after conn 1's UNMAP");
	assert_pattern(t.mem, 0, 100, 9);
	raw_close(fd2);
	raw_close(fd);
	assert_serves(&g_d, "test_host_page");
}

/* Queued GETs hold the mapping past an UNMAP and past the connection. */
static void test_wire_unmap_with_queued(void **state)
{
	enum { NGET = 16 };
	const uint64_t bsize = MIB;
	struct tpage t;
	struct mapreq q;
	uint64_t id = 10, buf, h, first;
	int fd, maps0;

	(void)state;
	SKIP_IF_NO_MAP();
	/* the last test's connection may still be closing at the daemon */
	wait_daemon_mappings(0);
	maps0 = 0;
	tpage_make(&t, bsize);
	fd = raw_open_hello();
	buf = raw_buffer_pattern(fd, &id, bsize, 10);
	q = good_map(&t);
	h = map_ok(fd, &id, &q);
	assert_int_equal(daemon_mappings(), maps0 + 1);

	first = id;
	for (int i = 0; i < NGET; i++)
		assert_int_equal(send_get(fd, id++, FRAME_F_QUEUED, buf, 0, bsize, h, 0), 0);
	{
		Pprpc__HostPageUnmap m = PPRPC__HOST_PAGE_UNMAP__INIT;

		m.host_page = h;
		assert_int_equal(wire_send_flags(fd, MSG_HOST_PAGE_UNMAP, 0, id++, &m.base, NULL, 0), 0);
	}
	/* replies in any order: the UNMAP may overtake the queued GETs */
	for (int i = 0; i < NGET + 1; i++) {
		struct wire_reply r;

		assert_int_equal(wire_read_reply(fd, &r, WIRE_TIMEOUT_MS), 0);
		if (r.is_error)
			fprintf(stderr, "%s #%" PRIu64 ": %d %s\n", msg_type_name(r.h.type), r.h.req_id, r.code, r.msg);
		assert_false(r.is_error);
		assert_true(r.h.req_id >= first && r.h.req_id < id);
		assert_int_equal(r.h.bulk_len, 0);
		wire_reply_free(&r);
	}
	assert_pattern(t.mem, 0, bsize, 10);
	wait_daemon_mappings(maps0);

	/* again, and the connection goes with the GETs queued */
	h = map_ok(fd, &id, &q);
	for (int i = 0; i < NGET; i++)
		assert_int_equal(send_get(fd, id++, FRAME_F_QUEUED, buf, 0, bsize, h, 0), 0);
	raw_close(fd);
	wait_daemon_mappings(maps0);
	page_free(t.mem);
	assert_serves(&g_d, "test_host_page");
}

/* At most HOSTPAGE_MAX_PER_OWNER (64) per connection; they go with it. */
static void test_wire_limit(void **state)
{
	struct tpage t;
	struct mapreq q;
	uint64_t id = 10, h[64];
	int fd, maps0;

	(void)state;
	SKIP_IF_NO_MAP();
	/* the last test's connection may still be closing at the daemon */
	wait_daemon_mappings(0);
	maps0 = 0;
	tpage_make(&t, 4096);
	q = good_map(&t);
	fd = raw_open_hello();
	for (int i = 0; i < 64; i++)
		h[i] = map_ok(fd, &id, &q);
	map_refused(fd, &id, &q, PPRPC_ELIMIT, "the 65th page");
	unmap_answer(fd, &id, 0, h[17], 0, "unmap one");
	h[17] = map_ok(fd, &id, &q);
	map_refused(fd, &id, &q, PPRPC_ELIMIT, "the 65th page again");
	raw_close(fd);
	wait_daemon_mappings(maps0);
	fd = raw_open_hello();   /* a new connection starts with none */
	h[0] = map_ok(fd, &id, &q);
	unmap_answer(fd, &id, 0, h[0], 0, "unmap");
	raw_close(fd);
	assert_serves(&g_d, "test_host_page");
}

/* The fd number is swapped between the page's memfd, a FIFO and /dev/null
 * while MAPs name it: each is answered (mapped or refused), none blocks. */
struct swapper {
	int target, memfd, fifo, devnull;
	atomic_int stop;
};

static void *swap_run(void *arg)
{
	struct swapper *s = arg;
	const int from[3] = { s->memfd, s->fifo, s->devnull };

	for (unsigned i = 0; !atomic_load(&s->stop); i++)
		if (dup3(from[i % 3], s->target, O_CLOEXEC) < 0)
			break;
	return NULL;
}

static void test_wire_fd_swap(void **state)
{
	char dir[] = "/tmp/pprpc-hp-XXXXXX", fifo[64];
	struct swapper s = { 0 };
	struct tpage t;
	struct mapreq q;
	pthread_t th;
	uint64_t id = 10;
	int fd, mapped = 0, refused = 0, maps0;
	int64_t t0;

	(void)state;
	SKIP_IF_NO_MAP();
	/* the last test's connection may still be closing at the daemon */
	wait_daemon_mappings(0);
	maps0 = 0;
	tpage_make(&t, 4096);
	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	s.memfd = t.fd;
	s.fifo = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	s.devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	s.target = dup(t.fd);
	assert_true(s.fifo >= 0 && s.devnull >= 0 && s.target >= 0);
	fd = raw_open_hello();
	q = good_map(&t);
	q.fd = s.target;
	assert_int_equal(pthread_create(&th, NULL, swap_run, &s), 0);
	t0 = wire_now_ms();
	for (int i = 0; i < 300; i++) {
		uint64_t mid = id++;
		struct answer a;

		assert_int_equal(send_map(fd, mid, &q), 0);
		read_answer(fd, MSG_HOST_PAGE_MAP, mid, &a);
		if (a.code == 0) {
			Pprpc__HostPageUnmap m = PPRPC__HOST_PAGE_UNMAP__INIT;
			uint64_t uid = id++;

			mapped++;
			m.host_page = a.handle;
			assert_int_equal(wire_send_flags(fd, MSG_HOST_PAGE_UNMAP, 0, uid, &m.base, NULL, 0), 0);
			read_answer(fd, MSG_HOST_PAGE_UNMAP, uid, &a);
			assert_int_equal(a.code, 0);
		} else {
			if (a.code != PPRPC_EINVAL && a.code != PPRPC_EUNSUPP)
				fprintf(stderr, "MAP while swapping: %d %s\n", a.code, a.msg);
			assert_true(a.code == PPRPC_EINVAL || a.code == PPRPC_EUNSUPP);
			refused++;
		}
	}
	atomic_store(&s.stop, 1);
	pthread_join(th, NULL);
	fprintf(stderr, "300 MAPs of a swapped fd in %lld ms: %d mapped, %d refused\n",
		(long long)(wire_now_ms() - t0), mapped, refused);
	raw_close(fd);
	close(s.target);
	close(s.fifo);
	close(s.devnull);
	assert_int_equal(unlink(fifo), 0);
	assert_int_equal(rmdir(dir), 0);
	wait_daemon_mappings(maps0);
	assert_serves(&g_d, "test_host_page");
}

/* A daemon stopped while a client has pages mapped and GETs into them
 * queued exits cleanly (under ASan: nothing of them leaks). */
static void test_stop_with_pages(void **state)
{
	static const char *const extra[] = { "--threads", "2", NULL };
	struct tdaemon d2;
	struct tdaemon saved = g_d;
	struct tpage t;
	struct mapreq q;
	uint64_t id = 10, buf, h;
	int fd, st;

	(void)state;
	SKIP_IF_NO_MAP();
	tpage_make(&t, MIB);
	memset(&d2, 0, sizeof(d2));
	assert_int_equal(tdaemon_start(&d2, extra), 0);
	g_d = d2;   /* raw_open_hello and the helpers talk to g_d */
	fd = raw_open_hello();
	buf = raw_buffer_pattern(fd, &id, MIB, 11);
	q = good_map(&t);
	h = map_ok(fd, &id, &q);
	(void)map_ok(fd, &id, &q);
	for (int i = 0; i < 8; i++)
		assert_int_equal(send_get(fd, id++, FRAME_F_QUEUED, buf, 0, MIB, h, 0), 0);
	d2 = g_d;
	g_d = saved;
	st = tdaemon_stop(&d2);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fprintf(stderr, "pprpcd stopped with pages mapped: status 0x%x\n", st);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	raw_close(fd);
	assert_serves(&g_d, "test_host_page");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_alloc, tracked_cleanup),
		cmocka_unit_test_teardown(test_lib_get, tracked_cleanup),
		cmocka_unit_test_teardown(test_lib_get_async, tracked_cleanup),
		cmocka_unit_test_teardown(test_lib_free_sweep, tracked_cleanup),
		cmocka_unit_test_teardown(test_lib_many_pages, tracked_cleanup),
		cmocka_unit_test_teardown(test_lib_reconnect_two_clients, tracked_cleanup),
		cmocka_unit_test_teardown(test_wire_map_refusals, tracked_cleanup),
		cmocka_unit_test_teardown(test_wire_refusal_log, tracked_cleanup),
		cmocka_unit_test_teardown(test_wire_get, tracked_cleanup),
		cmocka_unit_test_teardown(test_wire_unmap_with_queued, tracked_cleanup),
		cmocka_unit_test_teardown(test_wire_limit, tracked_cleanup),
		cmocka_unit_test_teardown(test_wire_fd_swap, tracked_cleanup),
		cmocka_unit_test_teardown(test_stop_with_pages, tracked_cleanup),
	};

	return cmocka_run_group_tests_name("host_page", tests, group_setup, group_teardown) ? 1 : 0;
}
