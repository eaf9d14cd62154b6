/*
 * Integration: stage-boundary SEND/RECV between two real daemons — parity
 * at several sizes (chunked and not), snapshot semantics, either order of
 * SEND and RECV, a full staging ring (back-pressure, not failure), size
 * mismatch and a vanished source failing cleanly, boundary statistics, and
 * the reachability probe.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pprpc.h"
#include "pprpc_graph.h"
#include "daemon/xfer/land.h"
#include "tests/integration/fake_rank.h"
#include "tests/integration/harness.h"
#include "tools/common/stats.h"
#include "tests/integration/wire.h"

#define MIB (1024ull * 1024ull)

struct pair {
	struct tdaemon a, b;
	pprpc_client *ca, *cb;
	char no_ipc[256];       /* IPC group: why cross-memory attach cannot run here */
};

static pprpc_client *connect_ok(const struct tdaemon *d)
{
	pprpc_client *c = NULL;

	assert_int_equal(pprpc_connect(d->addr, NULL, &c), 0);
	return c;
}

/* A small staging ring (8 MiB = 16 slots of 512 KiB) so that large
 * transfers are chunked and many transfers fill it.  RECVs with a landing
 * slot held on the GPU, and SENDs behind device work put into the slot by
 * the GPU, where the device can (land-hold, land-gpu-send; a CPU cannot). */
static const char *const hold_on[] = { "--land-hold", "1", NULL };

static int setup(void **state)
{
	static const char *const args[] = { "--staging-mib", "8", "--transfer-timeout-ms", "1500", "--land-hold", "1",
					    "--land-gpu-send", "1", NULL };
	struct pair *p = calloc(1, sizeof(*p));

	if (!p || tdaemon_start(&p->a, args) < 0 || tdaemon_start(&p->b, args) < 0)
		return -1;
	p->ca = connect_ok(&p->a);
	p->cb = connect_ok(&p->b);
	*state = p;
	return 0;
}

/* Both daemons with cpu-ipc: boundaries by the IPC protocol (pool slots
 * announced in PULL replies, copied by process_vm_readv, released with
 * progress).  A 4 MiB pool of 256 KiB slots makes every transfer above
 * 4 MiB reuse slots while it is under way.  Cross-memory attach needs
 * ptrace access between the two daemons (Yama, container capabilities);
 * where the kernel refuses it, the group says so and skips. */
static int setup_ipc_with(void **state, const char *const *args)
{
	struct pair *p = calloc(1, sizeof(*p));
	pprpc_buffer ba, bb;

	if (!p || tdaemon_start(&p->a, args) < 0 || tdaemon_start(&p->b, args) < 0)
		return -1;
	p->ca = connect_ok(&p->a);
	p->cb = connect_ok(&p->b);
	if (pprpc_buffer_alloc(p->ca, 0, 4096, &ba) < 0 || pprpc_buffer_alloc(p->cb, 0, 4096, &bb) < 0 ||
	    pprpc_recv_async(p->cb, bb, 0, 4096, 1, p->a.addr) < 0 ||
	    pprpc_send_async(p->ca, ba, 0, 4096, 1, p->b.addr) < 0 || pprpc_synchronize(p->ca, 0) < 0)
		return -1;
	if (pprpc_synchronize(p->cb, 0) < 0) {
		if (!strstr(pprpc_last_error(p->cb), "process_vm_readv"))
			return -1;
		snprintf(p->no_ipc, sizeof(p->no_ipc), "%s", pprpc_last_error(p->cb));
	}
	pprpc_buffer_free(p->ca, ba);
	pprpc_buffer_free(p->cb, bb);
	*state = p;
	return 0;
}

static int setup_ipc(void **state)
{
	static const char *const args[] = { "--staging-mib", "8", "--transfer-timeout-ms", "1500", "--cpu-ipc", "1",
					    "--ipc-pool-mib", "4", "--land", "0", NULL };

	return setup_ipc_with(state, args);
}

/* The same with direct-min 0: a SEND of any size may go by IPC.  (Both
 * without landing pages, which small transfers between daemons of one
 * host take first: the land group.) */
static int setup_direct0(void **state)
{
	static const char *const args[] = { "--staging-mib", "8", "--transfer-timeout-ms", "1500", "--cpu-ipc", "1",
					    "--ipc-pool-mib", "4", "--direct-min", "0", "--land", "0", NULL };

	return setup_ipc_with(state, args);
}

/* Whether the devices under test are host memory (the default cpu, or
 * ggml:CPU) rather than a GPU's (harness.h: PPRPC_TEST_DEVICES). */
static bool devices_host_visible(void)
{
	const char *d = getenv("PPRPC_TEST_DEVICES");

	return !d || !strncmp(d, "cpu", 3) || !strncmp(d, "ggml:CPU", 8);
}

static void skip_without_ipc(const struct pair *p)
{
	if (p->no_ipc[0]) {
		print_message("SKIP: cross-memory attach is refused here: %s\n", p->no_ipc);
		skip();
	}
}

static int teardown(void **state)
{
	struct pair *p = *state;
	int ok;

	pprpc_close(p->ca);
	pprpc_close(p->cb);
	ok = tdaemon_stop(&p->a) == 0;
	/* b may have been stopped by a test already */
	if (p->b.dir[0])
		ok &= tdaemon_stop(&p->b) == 0;
	free(p);
	return ok ? 0 : -1;
}

static void fill(uint8_t *x, size_t n, uint32_t seed)
{
	uint32_t s = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		s = s * 1103515245u + 12345u;
		x[i] = (uint8_t)(s >> 16);
	}
}

/* recv_first: 0 SEND first, 1 RECV first, or N > 1: RECV first and the
 * SEND N microseconds later (its PULL has surely reached the source).
 * overwrite: 0 never, 1 right behind the SEND, or N > 1: N microseconds
 * later, while a SEND that was last in its stream streams from the tensor
 * in place (the overwrite must wait for the bytes on the wire and have the
 * rest captured). */
static void transfer(struct pair *p, size_t n, uint64_t id, int recv_first, int overwrite)
{
	uint8_t *src = malloc(n), *dst = malloc(n), *junk = malloc(n);
	pprpc_buffer ba, bb;

	assert_non_null(src);
	assert_non_null(dst);
	assert_non_null(junk);
	fill(src, n, (uint32_t)id);
	memset(junk, 0x5A, n);
	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, n, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, n, &bb), 0);
	assert_int_equal(pprpc_tensor_set(p->ca, ba, 0, src, n), 0);
	if (recv_first)
		assert_int_equal(pprpc_recv_async(p->cb, bb, 0, n, id, p->a.addr), 0);
	if (recv_first > 1)
		usleep((useconds_t)recv_first);
	assert_int_equal(pprpc_send_async(p->ca, ba, 0, n, id, p->b.addr), 0);
	/* The SEND captured the bytes: overwriting the source now is safe. */
	if (overwrite > 1)
		usleep((useconds_t)overwrite);
	if (overwrite)
		assert_int_equal(pprpc_tensor_set_async(p->ca, ba, 0, junk, n), 0);
	if (!recv_first)
		assert_int_equal(pprpc_recv_async(p->cb, bb, 0, n, id, p->a.addr), 0);
	assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
	assert_int_equal(pprpc_synchronize(p->cb, 0), 0);
	assert_int_equal(pprpc_tensor_get(p->cb, bb, 0, dst, n), 0);
	assert_memory_equal(src, dst, n);
	assert_int_equal(pprpc_buffer_free(p->ca, ba), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, bb), 0);
	free(src);
	free(dst);
	free(junk);
}

static void test_sizes(void **state)
{
	struct pair *p = *state;
	static const size_t sizes[] = { 1, 7, 4096, 512 * 1024, 512 * 1024 + 1, 3 * MIB + 5, 64 * MIB };
	uint64_t id = 1;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		transfer(p, sizes[i], id++, 1, 0);
		transfer(p, sizes[i], id++, 0, 1);
	}
}

/* The destination pulls before the SEND runs, and nothing follows the SEND
 * on its stream: the bytes stream from the tensor in place.  An overwrite
 * queued mid-stream must still leave the destination with the old bytes. */
static void test_in_place_overwrite(void **state)
{
	struct pair *p = *state;
	static const int delays_us[] = { 200, 2000, 10000 };
	uint64_t id = 1000;

	for (size_t i = 0; i < sizeof(delays_us) / sizeof(delays_us[0]); i++) {
		transfer(p, 64 * MIB, id++, 1, delays_us[i]);
		transfer(p, 3 * MIB + 5, id++, 1, delays_us[i]);
	}
}

/* The window of in-place chunks is what a later command waits for: here the
 * puller is this test on a raw socket that does not read, so the SEND's
 * last in-place chunks sit unwritten (the kernel buffers hold a few MiB)
 * when an overwrite is queued behind it.  The rest of the transfer is
 * captured into free staging slots, and the overwrite must still wait until
 * the in-place chunks are written: every byte pulled is the old one.  The
 * test is also the rank the SEND names (a transfer belongs to it): it
 * answers the source's PULL_CHECK for its PULL's nonce. */
static void test_in_place_slow_puller(void **state)
{
	struct pair *p = *state;
	/* 24 chunks of the 512 KiB slots: more than the kernel buffers take,
	 * while what is left after them fits the 16-slot ring. */
	size_t n = 12 * MIB, got = 0;
	uint8_t *src = malloc(n), *junk = malloc(n), *dst = calloc(1, n), nonce[16];
	Pprpc__Pull pull = PPRPC__PULL__INIT;
	int fd = traw_connect(&p->a), small = 32 * 1024, more = 1;
	ProtobufCMessage *cm = NULL;
	struct fake_rank fr;
	struct frame_hdr fh;
	pprpc_buffer ba;

	assert_non_null(src);
	assert_non_null(junk);
	assert_non_null(dst);
	assert_true(fd >= 0);
	assert_int_equal(fake_rank_listen(&fr), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	assert_int_equal(wire_hello(fd), 0);
	fill(src, n, 3003);
	fill(nonce, sizeof(nonce), 3030);
	memset(junk, 0xA5, n);
	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, n, &ba), 0);
	assert_int_equal(pprpc_tensor_set(p->ca, ba, 0, src, n), 0);
	pull.transfer_id = 3003;
	pull.size = n;
	pull.nonce.data = nonce;
	pull.nonce.len = sizeof(nonce);
	assert_int_equal(wire_send_msg(fd, MSG_PULL, 1, &pull.base, NULL, 0), 0);
	assert_int_equal(pprpc_send_async(p->ca, ba, 0, n, 3003, fr.addr), 0);
	/* The source asks the rank its SEND names: the PULL is ours. */
	assert_int_equal(fake_rank_accept(&fr, WIRE_TIMEOUT_MS), 0);
	assert_int_equal(fake_expect(&fr, MSG_PULL_CHECK, &pprpc__pull_check__descriptor, &fh, &cm, WIRE_TIMEOUT_MS),
			 0);
	assert_int_equal(((Pprpc__PullCheck *)cm)->transfer_id, 3003);
	assert_int_equal(((Pprpc__PullCheck *)cm)->nonce.len, sizeof(nonce));
	assert_memory_equal(((Pprpc__PullCheck *)cm)->nonce.data, nonce, sizeof(nonce));
	meta_free(cm);
	assert_int_equal(fake_reply(fr.fd, MSG_PULL_CHECK, fh.req_id, 0, NULL, NULL, 0), 0);
	usleep(300 * 1000);
	assert_int_equal(pprpc_tensor_set_async(p->ca, ba, 0, junk, n), 0);
	usleep(200 * 1000);
	while (more) {
		struct wire_reply r;
		ProtobufCMessage *m = NULL;
		const Pprpc__PullChunk *pc;

		assert_int_equal(wire_read_reply(fd, &r, WIRE_TIMEOUT_MS), 0);
		assert_false(r.is_error);
		assert_int_equal(wire_reply_unpack(&r, &pprpc__pull_chunk__descriptor, &m), 0);
		pc = (const Pprpc__PullChunk *)m;
		assert_int_equal(pc->offset, got);
		assert_true(pc->size == r.h.bulk_len && pc->size <= n - got);
		memcpy(dst + got, r.bulk, pc->size);
		got += pc->size;
		more = !!(r.h.flags & FRAME_F_MORE);
		meta_free(m);
		wire_reply_free(&r);
	}
	assert_int_equal(got, n);
	assert_memory_equal(src, dst, n);
	assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
	close(fd);
	fake_rank_close(&fr);
	assert_int_equal(pprpc_buffer_free(p->ca, ba), 0);
	free(src);
	free(junk);
	free(dst);
}

/* Issue 19.2: a transfer belongs to the rank its SEND names.  Any other
 * connection's PULL — here a client speaking the wire protocol, with a
 * nonce of its own, after the SEND and before it — gets no byte but
 * PPRPC_EAUTH; the rank's own RECV then gets every byte and the SEND
 * succeeds.  (Before: the attacker got the bytes, the SEND reported
 * success and the real RECV failed with "no SEND arrived".) */
static void test_pull_hijack(void **state)
{
	struct pair *p = *state;
	size_t n = 3 * MIB + 5;
	uint8_t *src = malloc(n), *dst = malloc(n), nonce[16];
	Pprpc__Pull pull = PPRPC__PULL__INIT;
	int fd = traw_connect(&p->a);
	pprpc_buffer ba, bb;
	struct wire_reply r;

	assert_non_null(src);
	assert_non_null(dst);
	assert_true(fd >= 0);
	assert_int_equal(wire_hello(fd), 0);
	fill(nonce, sizeof(nonce), 4004);
	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, n, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, n, &bb), 0);
	for (uint64_t id = 4004; id <= 4005; id++) {
		int pull_first = id == 4005;

		fill(src, n, (uint32_t)id);
		memset(dst, 0, n);
		assert_int_equal(pprpc_tensor_set(p->ca, ba, 0, src, n), 0);
		pull.transfer_id = id;
		pull.size = n;
		pull.nonce.data = nonce;
		pull.nonce.len = sizeof(nonce);
		if (!pull_first)
			assert_int_equal(pprpc_send_async(p->ca, ba, 0, n, id, p->b.addr), 0);
		assert_int_equal(wire_send_msg(fd, MSG_PULL, id, &pull.base, NULL, 0), 0);
		if (pull_first) {
			/* the attacker's PULL waits for the SEND, then is checked */
			assert_int_equal(pprpc_probe_rank(p->ca, p->a.addr, 2000), 0);
			assert_int_equal(pprpc_send_async(p->ca, ba, 0, n, id, p->b.addr), 0);
		}
		assert_int_equal(wire_read_reply(fd, &r, WIRE_TIMEOUT_MS), 0);
		assert_true(r.is_error);            /* not a chunk of the bytes */
		assert_int_equal(r.h.req_id, id);
		assert_int_equal(r.code, PPRPC_EAUTH);
		assert_non_null(strstr(r.msg, "not its own"));
		wire_reply_free(&r);
		/* The rank's own RECV gets it. */
		assert_int_equal(pprpc_recv_async(p->cb, bb, 0, n, id, p->a.addr), 0);
		assert_int_equal(pprpc_synchronize(p->cb, 0), 0);
		assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
		assert_int_equal(pprpc_tensor_get(p->cb, bb, 0, dst, n), 0);
		assert_memory_equal(src, dst, n);
	}
	/* A PULL without a nonce (nothing to check) is refused at once. */
	pull.transfer_id = 4006;
	pull.nonce.len = 0;
	assert_int_equal(wire_call(fd, MSG_PULL, 4006, &pull.base, NULL, 0, &r), 0);
	assert_true(r.is_error);
	assert_int_equal(r.code, PPRPC_EAUTH);
	wire_reply_free(&r);
	close(fd);
	assert_int_equal(pprpc_buffer_free(p->ca, ba), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, bb), 0);
	free(src);
	free(dst);
}

/* A SEND waiting to stream in place must not hold its stream: synchronizing
 * the source before the destination asks completes at once (the FENCE
 * behind it makes it capture), and the transfer still arrives intact. */
static void test_sync_before_recv(void **state)
{
	struct pair *p = *state;
	size_t n = 5 * MIB;
	uint8_t *src = malloc(n), *dst = malloc(n);
	pprpc_buffer ba, bb;
	struct timespec t0, t1;

	assert_non_null(src);
	assert_non_null(dst);
	fill(src, n, 77);
	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, n, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, n, &bb), 0);
	assert_int_equal(pprpc_tensor_set(p->ca, ba, 0, src, n), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(pprpc_send_async(p->ca, ba, 0, n, 2001, p->b.addr), 0);
	assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* well below the 1500 ms transfer timeout that would otherwise end it */
	assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 1000);
	assert_int_equal(pprpc_recv_async(p->cb, bb, 0, n, 2001, p->a.addr), 0);
	assert_int_equal(pprpc_synchronize(p->cb, 0), 0);
	assert_int_equal(pprpc_tensor_get(p->cb, bb, 0, dst, n), 0);
	assert_memory_equal(src, dst, n);
	assert_int_equal(pprpc_buffer_free(p->ca, ba), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, bb), 0);
	free(src);
	free(dst);
}

/* Many transfers queued at once through a 16-slot ring: SEND stalls while
 * the ring is full and resumes as the destination drains it. */
static void test_ring_full(void **state)
{
	struct pair *p = *state;
	enum { N = 24, SZ = 1 << 20 };
	pprpc_buffer ba, bb;
	uint8_t *src = malloc((size_t)N * SZ), *dst = malloc((size_t)N * SZ);

	assert_non_null(src);
	assert_non_null(dst);
	fill(src, (size_t)N * SZ, 77);
	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, (uint64_t)N * SZ, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, (uint64_t)N * SZ, &bb), 0);
	assert_int_equal(pprpc_tensor_set(p->ca, ba, 0, src, (uint64_t)N * SZ), 0);
	/* All SENDs first (more than the ring holds), then the RECVs. */
	for (int i = 0; i < N; i++)
		assert_int_equal(pprpc_send_async(p->ca, ba, (uint64_t)i * SZ, SZ, 1000 + i, p->b.addr), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(pprpc_recv_async(p->cb, bb, (uint64_t)i * SZ, SZ, 1000 + i, p->a.addr), 0);
	assert_int_equal(pprpc_synchronize(p->cb, 0), 0);
	assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
	assert_int_equal(pprpc_tensor_get(p->cb, bb, 0, dst, (uint64_t)N * SZ), 0);
	assert_memory_equal(src, dst, (size_t)N * SZ);
	pprpc_buffer_free(p->ca, ba);
	pprpc_buffer_free(p->cb, bb);
	free(src);
	free(dst);
}

static void test_errors(void **state)
{
	struct pair *p = *state;
	pprpc_buffer ba, bb;
	uint8_t x[64] = { 0 };
	int rc;

	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, 4096, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, 4096, &bb), 0);
	/* Sizes differ: the RECV fails with the source's reason, nothing hangs. */
	assert_int_equal(pprpc_recv_async(p->cb, bb, 0, 100, 5000, p->a.addr), 0);
	assert_int_equal(pprpc_send_async(p->ca, ba, 0, 200, 5000, p->b.addr), 0);
	assert_int_equal(pprpc_synchronize(p->cb, 0), PPRPC_EINVAL);
	assert_non_null(strstr(pprpc_last_error(p->cb), "another size"));
	/* The source's SEND fails too when the destination's request came
	 * first; when the SEND came first it completed (captured). */
	rc = pprpc_synchronize(p->ca, 0);
	assert_true(rc == 0 || rc == PPRPC_EINVAL);
	/* Out-of-range regions and zero sizes are refused (sticky, reported). */
	assert_int_equal(pprpc_send_async(p->ca, ba, 4000, 200, 5001, p->b.addr), 0);
	assert_int_equal(pprpc_synchronize(p->ca, 0), PPRPC_ERANGE);
	assert_int_equal(pprpc_recv_async(p->cb, bb, 0, 0, 5002, p->a.addr), 0);
	assert_int_equal(pprpc_synchronize(p->cb, 0), PPRPC_EINVAL);
	/* An unreachable source: the RECV fails, it does not hang. */
	assert_int_equal(pprpc_recv_async(p->cb, bb, 0, 64, 5003, "127.0.0.1:1"), 0);
	assert_int_equal(pprpc_synchronize(p->cb, 0), PPRPC_ECONN);
	/* After the errors the queues work again. */
	assert_int_equal(pprpc_tensor_set(p->cb, bb, 0, x, sizeof(x)), 0);
	pprpc_buffer_free(p->ca, ba);
	pprpc_buffer_free(p->cb, bb);
}

static void test_stats_and_probe(void **state)
{
	struct pair *p = *state;
	pprpc_stats *s;
	int found = 0, i;
	bool gpu_ipc;

	transfer(p, 1 * MIB, 6000, 1, 0);
	/* TCP between CPU devices (cross-memory attach is opt-in); GPU
	 * devices (PPRPC_TEST_DEVICES=cuda:0 or ggml:CUDA0) export an IPC pool
	 * and the boundary goes by CUDA IPC. */
	assert_int_equal(pprpc_stats_get(p->ca, &s), 0);
	gpu_ipc = !strcmp(pprpc_stats_str(s, "devices", 0, "ipc_status"), "ready");
	assert_true(gpu_ipc == !devices_host_visible());
	pprpc_stats_free(s);
	assert_int_equal(pprpc_stats_get(p->cb, &s), 0);
	if ((i = stats_item(s, "boundaries", "peer", p->a.addr, "direction", "recv")) >= 0) {
		found = 1;
		assert_true(pprpc_stats_u64(s, "boundaries", i, "transfers") >= 1);
		assert_true(pprpc_stats_u64(s, "boundaries", i, "bytes") >= MIB);
		assert_string_equal(pprpc_stats_str(s, "boundaries", i, "path"), gpu_ipc ? "p2p-ipc" : "p2p-tcp");
	}
	assert_true(found);
	assert_true(pprpc_stats_u64(s, NULL, 0, "staging_bytes") == 8 * MIB);
	pprpc_stats_free(s);
	assert_int_equal(pprpc_stats_get(p->ca, &s), 0);
	found = 0;
	for (i = 0; i < pprpc_stats_count(s, "boundaries"); i++)
		if (!strcmp(pprpc_stats_str(s, "boundaries", i, "direction"), "send") &&
		    pprpc_stats_u64(s, "boundaries", i, "transfers") >= 1)
			found = 1;
	assert_true(found);
	/* Every transfer finished: no staging slot is held. */
	assert_int_equal(pprpc_stats_u64(s, NULL, 0, "staging_used"), 0);
	pprpc_stats_free(s);
	assert_int_equal(pprpc_probe_rank(p->cb, p->a.addr, 2000), 0);
	assert_int_equal(pprpc_probe_rank(p->cb, "127.0.0.1:1", 2000), PPRPC_ECONN);
	assert_true(strlen(pprpc_last_error(p->cb)) > 0);
}

/* A RECV whose SEND never comes, and a SEND nobody pulls: both fail after
 * the transfer timeout (1.5 s here) instead of hanging or holding memory. */
static void test_unmatched(void **state)
{
	struct pair *p = *state;
	pprpc_buffer ba, bb;
	pprpc_stats *s;
	time_t t0 = time(NULL);

	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, MIB, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, 4096, &bb), 0);
	assert_int_equal(pprpc_recv_async(p->cb, bb, 0, 4096, 8000, p->a.addr), 0);
	/* A small SEND is captured at once (its slot is freed when it
	 * expires); a large one last in its stream waits to stream in place. */
	assert_int_equal(pprpc_send_async(p->ca, ba, 0, 4096, 8001, p->b.addr), 0);
	assert_int_equal(pprpc_send_async(p->ca, ba, 0, MIB, 8002, p->b.addr), 0);
	assert_int_equal(pprpc_synchronize(p->cb, 0), PPRPC_ETIMEDOUT);
	assert_non_null(strstr(pprpc_last_error(p->cb), "no SEND with transfer id 8000"));
	/* Unpulled, the large one fails with the reason once it has waited
	 * the timeout since it began to run, and the stream is usable after
	 * the FENCE. */
	usleep(1600 * 1000);
	assert_int_equal(pprpc_synchronize(p->ca, 0), PPRPC_ETIMEDOUT);
	assert_non_null(strstr(pprpc_last_error(p->ca), "transfer 8002"));
	assert_non_null(strstr(pprpc_last_error(p->ca), "did not pull it"));
	assert_int_equal(pprpc_tensor_set(p->ca, ba, 0, "x", 1), 0);
	assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
	assert_true(time(NULL) - t0 <= 8);
	/* The unpulled SEND releases its slot once it expires. */
	for (int i = 0; i < 100; i++) {
		uint64_t used;

		assert_int_equal(pprpc_stats_get(p->ca, &s), 0);
		used = pprpc_stats_u64(s, NULL, 0, "staging_used");
		pprpc_stats_free(s);
		if (used == 0)
			break;
		usleep(100000);
	}
	assert_int_equal(pprpc_stats_get(p->ca, &s), 0);
	assert_int_equal(pprpc_stats_u64(s, NULL, 0, "staging_used"), 0);
	pprpc_stats_free(s);
	pprpc_buffer_free(p->ca, ba);
	pprpc_buffer_free(p->cb, bb);
}

/* The transfer timeout counts for a SEND from when its queue reaches it:
 * one queued behind work that outlasts the timeout (a WAIT released by
 * another connection after 2 s, with the timeout at 1.5 s) still goes
 * through when its RECV comes late. */
static void test_send_queued_long(void **state)
{
	struct pair *p = *state;
	pprpc_client *c2 = connect_ok(&p->a);
	size_t n = MIB;
	uint8_t *src = malloc(n), *dst = malloc(n);
	pprpc_buffer ba, bb;
	pprpc_timeline tl;

	assert_non_null(src);
	assert_non_null(dst);
	fill(src, n, 9009);
	assert_int_equal(pprpc_timeline_create(c2, 0, 0, &tl), 0);
	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, n, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, n, &bb), 0);
	assert_int_equal(pprpc_tensor_set(p->ca, ba, 0, src, n), 0);
	/* c2's timeline: p->ca names its rank (issue 19.3). */
	assert_int_equal(pprpc_wait(p->ca, 0, p->a.addr, tl, 1), 0);
	assert_int_equal(pprpc_send_async(p->ca, ba, 0, n, 9009, p->b.addr), 0);
	usleep(2000 * 1000);
	assert_int_equal(pprpc_signal(c2, tl, 1), 0);
	usleep(100 * 1000);
	assert_int_equal(pprpc_recv_async(p->cb, bb, 0, n, 9009, p->a.addr), 0);
	assert_int_equal(pprpc_synchronize(p->cb, 0), 0);
	assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
	assert_int_equal(pprpc_tensor_get(p->cb, bb, 0, dst, n), 0);
	assert_memory_equal(src, dst, n);
	assert_int_equal(pprpc_buffer_free(p->ca, ba), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, bb), 0);
	pprpc_close(c2);
	free(src);
	free(dst);
}

/* Two connections on one daemon share its device: a RECV queued before the
 * SEND it needs (the other connection's) must not hold the device — the
 * worker runs the other stream meanwhile.  (A device-wide order would
 * deadlock here.)  Same for a WAIT on a timeline the other signals later. */
static void test_shared_device(void **state)
{
	struct pair *p = *state;
	pprpc_client *c2 = connect_ok(&p->a);
	pprpc_buffer b1, b2;
	pprpc_timeline t;
	uint8_t src[4096], dst[4096];

	fill(src, sizeof(src), 99);
	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, sizeof(src), &b1), 0);
	assert_int_equal(pprpc_buffer_alloc(c2, 0, sizeof(src), &b2), 0);
	assert_int_equal(pprpc_tensor_set(p->ca, b1, 0, src, sizeof(src)), 0);
	assert_int_equal(pprpc_recv_async(c2, b2, 0, sizeof(src), 9100, p->a.addr), 0);
	assert_int_equal(pprpc_probe_rank(c2, p->a.addr, 2000), 0); /* RECV queued first */
	assert_int_equal(pprpc_send_async(p->ca, b1, 0, sizeof(src), 9100, p->a.addr), 0);
	assert_int_equal(pprpc_synchronize(c2, 0), 0);
	assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
	assert_int_equal(pprpc_tensor_get(c2, b2, 0, dst, sizeof(dst)), 0);
	assert_memory_equal(src, dst, sizeof(src));
	/* WAIT (connection 2) queued before the SIGNAL (connection 1); the
	 * timeline is connection 1's, so connection 2 names the rank. */
	assert_int_equal(pprpc_timeline_create(p->ca, 0, 0, &t), 0);
	assert_int_equal(pprpc_wait(c2, 0, p->a.addr, t, 1), 0);
	assert_int_equal(pprpc_timeline_host_wait(p->ca, t, 0, 1000), 0);
	assert_int_equal(pprpc_signal(p->ca, t, 1), 0);
	assert_int_equal(pprpc_synchronize(c2, 0), 0);
	pprpc_buffer_free(p->ca, b1);
	pprpc_close(c2);
}

/* The source daemon dies while the destination waits: error, not a hang. */
static void test_source_dies(void **state)
{
	struct pair *p = *state;
	pprpc_buffer bb;

	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, 4096, &bb), 0);
	assert_int_equal(pprpc_recv_async(p->cb, bb, 0, 4096, 7000, p->a.addr), 0);
	/* Make sure the PULL is out before the source goes. */
	assert_int_equal(pprpc_probe_rank(p->cb, p->a.addr, 2000), 0);
	pprpc_close(p->ca);
	p->ca = NULL;
	assert_int_equal(tdaemon_stop(&p->a), 0);
	assert_int_equal(pprpc_synchronize(p->cb, 0), PPRPC_ECONN);
	assert_non_null(strstr(pprpc_last_error(p->cb), "lost"));
	assert_int_equal(tdaemon_start(&p->a, NULL), 0); /* for teardown */
	p->ca = connect_ok(&p->a);
}

/* B's receive boundary from A: its path, bytes and IPC copy time. */
static void recv_bstat(struct pair *p, char *path, size_t len, uint64_t *bytes, uint64_t *copy_us)
{
	pprpc_stats *s;
	int i;

	assert_int_equal(pprpc_stats_get(p->cb, &s), 0);
	if ((i = stats_item(s, "boundaries", "peer", p->a.addr, "direction", "recv")) >= 0) {
		snprintf(path, len, "%s", pprpc_stats_str(s, "boundaries", i, "path"));
		*bytes = pprpc_stats_u64(s, "boundaries", i, "bytes");
		*copy_us = pprpc_stats_u64(s, "boundaries", i, "copy_us");
	}
	pprpc_stats_free(s);
}

/* Bit-exact by IPC at sizes from 1 byte to 16 pools' worth, either order,
 * with the source overwritten right behind its SEND; the statistics show
 * the IPC path and the time spent copying. */
static void test_ipc_sizes(void **state)
{
	struct pair *p = *state;
	static const size_t sizes[] = { 1, 4096, 256 * 1024 + 1, 3 * MIB + 5, 64 * MIB };
	char path[16] = "";
	uint64_t b0 = 0, c0 = 0, b1 = 0, c1 = 0, id = 5000;

	skip_without_ipc(p);
	recv_bstat(p, path, sizeof(path), &b0, &c0);
	/* Which path a transfer takes depends on whether the PULL reached the
	 * source before a command queued behind its SEND (then it is captured
	 * into host staging and goes over TCP); both must be exact. */
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		transfer(p, sizes[i], id++, 0, 1);
		transfer(p, sizes[i], id++, 1, 1);
		transfer(p, sizes[i], id++, 1, 0);
	}
	/* The PULL surely there first (it was sent 300 ms before the SEND):
	 * IPC, which the statistics (the last transfer's path) show. */
	transfer(p, 64 * MIB, id, 300 * 1000, 0);
	recv_bstat(p, path, sizeof(path), &b1, &c1);
	assert_string_equal(path, "p2p-ipc");
	{
		/* the source reports its IPC pool (4 MiB here) as in use */
		pprpc_stats *s;

		assert_int_equal(pprpc_stats_get(p->ca, &s), 0);
		assert_string_equal(pprpc_stats_str(s, "devices", 0, "ipc_status"), "ready");
		assert_int_equal(pprpc_stats_u64(s, "devices", 0, "ipc_pool_bytes"), 4 * MIB);
		pprpc_stats_free(s);
	}
	assert_true(b1 - b0 >= 3 * 64 * MIB);
	assert_true(c1 > c0);
}

/* A decode boundary's size (16 KiB: one token of a 4096-wide f32 row) with
 * the PULL surely there first: under direct-min (256 KiB by default) the
 * SEND is captured into host staging and goes over TCP even where IPC is
 * there; with direct-min 0 (setup_direct0) it goes by IPC.  Both exact. */
static void small_transfer_path(struct pair *p, uint64_t id, const char *want)
{
	char path[16] = "";
	uint64_t b = 0, c = 0;

	skip_without_ipc(p);
	transfer(p, 16 * 1024, id, 300 * 1000, 0);
	recv_bstat(p, path, sizeof(path), &b, &c);
	assert_string_equal(path, want);
}

static void test_small_by_tcp(void **state)
{
	small_transfer_path(*state, 7000, "p2p-tcp");
}

static void test_small_by_ipc_direct0(void **state)
{
	small_transfer_path(*state, 7001, "p2p-ipc");
}

/* The pool handle of the CPU backend's cross-memory attach as it goes on
 * the wire (daemon/backend/cpu/dev_cpu.c). */
struct cma_wire {
	char magic[8];
	uint64_t pid, addr, bytes;
};

/* Where pid's executable is mapped from its first byte (its ELF header). */
static uint64_t elf_base(pid_t pid)
{
	char path[64], line[512];
	unsigned long long lo = 0, off;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%*x %*s %llx", &lo, &off) == 2 && off == 0 && strstr(line, "pprpcd"))
			break;
		else
			lo = 0;
	fclose(f);
	assert_true(lo != 0);
	return lo;
}

/* B pulls transfer id from fake rank f, which answers with one IPC chunk
 * naming pool h.  Returns B's synchronize result (its message in why); dst
 * gets the region. */
static int pull_from_fake(struct pair *p, struct fake_rank *f, uint64_t id, const struct cma_wire *h, uint8_t *dst,
			  size_t n, char *why, size_t whylen)
{
	Pprpc__PullChunk pc = PPRPC__PULL_CHUNK__INIT;
	uint8_t handle[64] = { 0 };
	ProtobufCMessage *m = NULL;
	struct frame_hdr fh;
	pprpc_buffer bb;
	int rc;

	memcpy(handle, h, sizeof(*h));
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, n, &bb), 0);
	assert_int_equal(pprpc_recv_async(p->cb, bb, 0, n, id, f->addr), 0);
	assert_int_equal(fake_rank_accept(f, WIRE_TIMEOUT_MS), 0);
	assert_int_equal(fake_expect(f, MSG_PULL, &pprpc__pull__descriptor, &fh, &m, WIRE_TIMEOUT_MS), 0);
	/* B is on this host and asked for IPC */
	assert_true(((Pprpc__Pull *)m)->ipc_host && *((Pprpc__Pull *)m)->ipc_host);
	meta_free(m);
	pc.offset = 0;
	pc.size = n;
	pc.ipc_handle.data = handle;
	pc.ipc_handle.len = sizeof(handle);
	pc.ipc_offset = 0;
	pc.ipc_pool_bytes = h->bytes;
	assert_int_equal(fake_reply(f->fd, MSG_PULL, fh.req_id, FRAME_F_MORE, &pc.base, NULL, 0), 0);
	rc = pprpc_synchronize(p->cb, 0);
	snprintf(why, whylen, "%s", pprpc_last_error(p->cb));
	if (rc == 0)
		assert_int_equal(pprpc_tensor_get(p->cb, bb, 0, dst, n), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, bb), 0);
	return rc;
}

/* Issue 19.1: a PULL answer names the process and address the destination
 * reads with process_vm_readv.  A rank may only make it read its own pool:
 * the pid must be the process at the other end of the link (the one
 * listening at the rank's address).  Here the test is the rank: naming
 * its own memory works (the control), naming the destination daemon's own
 * memory (its ELF header) is refused, and the RECV fails saying why. */
static void test_cma_pool_of_the_link_only(void **state)
{
	struct pair *p = *state;
	struct fake_rank good, evil;
	static uint8_t pool[8192];
	uint8_t dst[4096];
	struct cma_wire h;
	char why[256];
	int rc;

	skip_without_ipc(p);
	if (!devices_host_visible()) {
		print_message("SKIP: cross-memory attach is the host-memory devices' IPC, not %s's\n",
			      getenv("PPRPC_TEST_DEVICES"));
		skip();
	}
	fill(pool, sizeof(pool), 1919);
	assert_int_equal(fake_rank_listen(&good), 0);
	assert_int_equal(fake_rank_listen(&evil), 0);
	memcpy(h.magic, "pprpcCMA", 8);
	h.pid = (uint64_t)getpid();
	h.addr = (uint64_t)(uintptr_t)pool;
	h.bytes = sizeof(pool);
	assert_int_equal(pull_from_fake(p, &good, 1901, &h, dst, sizeof(dst), why, sizeof(why)), 0);
	assert_memory_equal(dst, pool, sizeof(dst));

	h.pid = (uint64_t)p->b.pid;
	h.addr = elf_base(p->b.pid);
	h.bytes = sizeof(dst);
	memset(dst, 0, sizeof(dst));
	rc = pull_from_fake(p, &evil, 1902, &h, dst, sizeof(dst), why, sizeof(why));
	assert_false(rc == 0 && !memcmp(dst, "\x7f" "ELF", 4)); /* the disclosure */
	assert_int_equal(rc, PPRPC_EAUTH);
	assert_non_null(strstr(why, "not the process listening"));
	/* B serves on, and its real IPC transfers still work (test_ipc_sizes). */
	assert_int_equal(pprpc_synchronize(p->cb, 0), 0);
	fake_rank_close(&good);
	fake_rank_close(&evil);
}

static void test_ipc_ring_full(void **state)
{
	skip_without_ipc(*state);
	test_ring_full(state);
}

/* ---- landing pages (daemon/xfer/land.h) ------------------------------------------ */

/* Files of pid's landing pages still named under /dev/shm. */
static int land_files(pid_t pid)
{
	char prefix[64];
	struct dirent *e;
	DIR *dir = opendir(LAND_DIR);
	int n = 0;

	assert_non_null(dir);
	snprintf(prefix, sizeof(prefix), LAND_PREFIX "%d-", (int)pid);
	while ((e = readdir(dir)))
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(dir);
	return n;
}

/* Does c's daemon do its part of a landing slot on the GPU (RECVs held,
 * key gpu_recvs: land-hold; SENDs put, gpu_sends: land-gpu-send)?  Where
 * the devices under test are ggml-cuda's (PPRPC_TEST_DEVICES=ggml:CUDA0)
 * and their streams hold waits, it must; the count of those so far. */
static bool gpu_part_expected(pprpc_client *c, const char *key, uint64_t *ret_count)
{
	const char *d = getenv("PPRPC_TEST_DEVICES");
	pprpc_stats *st;
	bool on;

	assert_int_equal(pprpc_stats_get(c, &st), 0);
	on = d && !strncmp(d, "ggml:CUDA", 9) && !strcmp(pprpc_stats_str(st, "devices", 0, "async_status"), "on");
	*ret_count = pprpc_stats_u64(st, "devices", 0, key);
	pprpc_stats_free(st);
	return on;
}

static bool held_expected(pprpc_client *c, uint64_t *ret_held)
{
	return gpu_part_expected(c, "gpu_recvs", ret_held);
}

/* The count of key past before (gpu_part_expected), said as what: at
 * least least more where the GPU's part was expected, none elsewhere. */
static void gpu_part_seen(pprpc_client *c, const char *key, const char *what, bool expected, uint64_t before,
			  uint64_t least)
{
	uint64_t now;

	gpu_part_expected(c, key, &now);
	print_message("%s: %llu (%s)\n", what, (unsigned long long)(now - before),
		      expected ? "expected" : "not expected here");
	if (expected)
		assert_true(now - before >= least);
	else
		assert_int_equal(now, before);
}

/* Landing pages need a writable LAND_DIR: where there is none, the test
 * says so and skips. */
static void land_dir_or_skip(void)
{
	if (access(LAND_DIR, W_OK) != 0) {
		print_message("SKIP: no writable %s for landing pages here\n", LAND_DIR);
		skip();
	}
}

/* A pair of daemons of its own, A and B started with their own settings. */
static void pair_start(struct pair *q, const char *const *a_args, const char *const *b_args)
{
	assert_int_equal(tdaemon_start(&q->a, a_args), 0);
	assert_int_equal(tdaemon_start(&q->b, b_args), 0);
	q->ca = connect_ok(&q->a);
	q->cb = connect_ok(&q->b);
}

/* Small transfers between daemons of one host go through the
 * destination's landing page when the PULL reached the source before its
 * SEND ran (RECV first, 20 ms ahead): bit-exact from 1 byte to a whole
 * slot, with the source overwritten right behind its SEND; one byte more
 * than a slot goes by the link.  The page's name is gone once the source
 * answered from it (it has the page open). */
static void test_land_path(void **state)
{
	struct pair *p = *state;
	static const size_t sizes[] = { 1, 4099, 16 * 1024, LAND_SLOT_BYTES };
	char path[16] = "";
	uint64_t b = 0, c = 0, id = 9000, held0;
	bool held;

	land_dir_or_skip();
	held = held_expected(p->cb, &held0);
	/* The first PULL on a link is checked with the rank before it
	 * attaches (pull_auth.c): its SEND has run by then. */
	transfer(p, 4096, id++, 20000, 0);
	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			transfer(p, sizes[i], id++, 20000, 1);
			recv_bstat(p, path, sizeof(path), &b, &c);
			if (strcmp(path, "p2p-land"))
				print_message("round %d, %zu bytes: %s\n", round, sizes[i], path);
			assert_string_equal(path, "p2p-land");
		}
	assert_int_equal(land_files(p->b.pid), 0);
	/* on a GPU, each of them waited on the device's stream */
	gpu_part_seen(p->cb, "gpu_recvs", "RECVs held on the GPU", held, held0, 12);
	transfer(p, LAND_SLOT_BYTES + 1, id++, 20000, 0);
	recv_bstat(p, path, sizeof(path), &b, &c);
	/* (GPU to GPU on one host: by IPC) */
	assert_string_equal(path, devices_host_visible() ? "p2p-tcp" : "p2p-ipc");
	/* either order stays exact (the SEND may run before the PULL came) */
	for (int k = 0; k < 8; k++)
		transfer(p, 16 * 1024, id++, 0, 1);
}

/* A RECV held on the GPU (land-hold) lets the writes of other memory
 * behind it run, a graph-less stream's commands after it see its bytes,
 * and every way its bytes do not come releases the device: the RECV's
 * connection closed before the SEND (B serves on, and its source's SEND
 * ends), the daemon stopped while it waits (it exits 0).  On devices that
 * do not hold RECVs the same steps run the worker's way. */
static void test_land_held(void **state)
{
	static const size_t n = 8192;
	struct pair *p = *state, q = { 0 };
	uint8_t src[8192], other[4096], dst[8192], got[4096];
	pprpc_buffer ba, bb, b2;
	pprpc_client *c2;
	uint64_t held;

	land_dir_or_skip();
	held_expected(p->cb, &held);
	fill(src, n, 77);
	fill(other, sizeof(other), 78);
	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, n, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, n + sizeof(other), &bb), 0);
	assert_int_equal(pprpc_tensor_set(p->ca, ba, 0, src, n), 0);
	/* RECV first, a SET of other memory behind it, the SEND 20 ms later */
	assert_int_equal(pprpc_recv_async(p->cb, bb, 0, n, 9300, p->a.addr), 0);
	assert_int_equal(pprpc_tensor_set_async(p->cb, bb, n, other, sizeof(other)), 0);
	usleep(20000);
	assert_int_equal(pprpc_send_async(p->ca, ba, 0, n, 9300, p->b.addr), 0);
	assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
	assert_int_equal(pprpc_synchronize(p->cb, 0), 0);
	assert_int_equal(pprpc_tensor_get(p->cb, bb, 0, dst, n), 0);
	assert_memory_equal(src, dst, n);
	assert_int_equal(pprpc_tensor_get(p->cb, bb, n, got, sizeof(got)), 0);
	assert_memory_equal(other, got, sizeof(got));

	/* the RECV's connection closes while it waits */
	c2 = connect_ok(&p->b);
	assert_int_equal(pprpc_buffer_alloc(c2, 0, n, &b2), 0);
	assert_int_equal(pprpc_recv_async(c2, b2, 0, n, 9301, p->a.addr), 0);
	assert_int_equal(pprpc_probe_rank(c2, p->a.addr, 2000), 0); /* the PULL is out */
	pprpc_close(c2);
	usleep(20000);
	assert_int_equal(pprpc_send_async(p->ca, ba, 0, n, 9301, p->b.addr), 0);
	pprpc_synchronize(p->ca, 0); /* ends, one way or the other */
	transfer(p, n, 9302, 20000, 1); /* B serves on */
	assert_int_equal(pprpc_buffer_free(p->ca, ba), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, bb), 0);

	/* a daemon stopped with a RECV held */
	pair_start(&q, NULL, hold_on);
	transfer(&q, n, 9310, 20000, 0); /* the link checked: the next PULL attaches at once */
	assert_int_equal(pprpc_buffer_alloc(q.cb, 0, n, &b2), 0);
	assert_int_equal(pprpc_recv_async(q.cb, b2, 0, n, 9311, q.a.addr), 0);
	assert_int_equal(pprpc_probe_rank(q.cb, q.a.addr, 2000), 0);
	assert_int_equal(tdaemon_stop(&q.b), 0); /* its client still connected */
	pprpc_close(q.cb);
	pprpc_close(q.ca);
	assert_int_equal(tdaemon_stop(&q.a), 0);
}

/* land-hold-lead-us: a held RECV goes to the GPU only its lead before the
 * bytes are due (how long the last ones waited, from the source's stamps);
 * until then the destination's worker waits in place.  Exact whether the
 * bytes come when the estimate says, long before it (the source's ring
 * wakes the worker, which hands the RECV over at once) or long after (held
 * on the GPU past the lead), and with the SEND first; still held, each of
 * them, where the device holds RECVs. */
static void test_land_hold_lead(void **state)
{
	static const char *const lead[] = { "--land-hold", "1", "--land-hold-lead-us", "2000", NULL };
	static const int delays[] = { 8000, 8000, 8000, 8000, 8000, 300, 8000, 30000, 8000 };
	struct pair q = { 0 };
	uint64_t id = 9400, held0;
	bool held;

	(void)state;
	land_dir_or_skip();
	pair_start(&q, NULL, lead);
	transfer(&q, 4096, id++, 20000, 0); /* the link checked: later PULLs attach at once */
	held = held_expected(q.cb, &held0);
	for (size_t i = 0; i < sizeof(delays) / sizeof(delays[0]); i++)
		transfer(&q, 16 * 1024, id++, delays[i], 1);
	transfer(&q, 16 * 1024, id++, 0, 1);
	gpu_part_seen(q.cb, "gpu_recvs", "RECVs held on the GPU with a lead", held, held0,
		      sizeof(delays) / sizeof(delays[0]));
	pprpc_close(q.cb);
	pprpc_close(q.ca);
	assert_int_equal(tdaemon_stop(&q.b), 0);
	assert_int_equal(tdaemon_stop(&q.a), 0);
}

/* A SEND behind work still on the source's device (here a WAIT that the
 * stream holds until another connection signals; in a pipeline the stage's
 * graph): with land-gpu-send the device itself copies the bytes into the
 * destination's slot and rings its bell once it gets past that work.
 * Bit-exact, with the source overwritten right behind the SEND (the
 * overwrite waits for the device's copy), in either order of RECV and
 * WAIT; counted in gpu_sends where the device can (a CPU never puts: its
 * WAIT is held in the queue, and the SEND runs after it as before). */
static void test_land_gpu_send(void **state)
{
	static const size_t n = 16 * 1024;
	struct pair *p = *state;
	pprpc_client *c2;
	uint8_t src[16384], junk[16384], dst[16384];
	pprpc_buffer ba, bb;
	pprpc_timeline tl;
	uint64_t sends0, id = 9400;
	bool gpu;

	land_dir_or_skip();
	c2 = connect_ok(&p->a);
	gpu = gpu_part_expected(p->ca, "gpu_sends", &sends0);
	transfer(p, 4096, id++, 20000, 0); /* the link checked: later PULLs attach at once */
	fill(src, n, 94);
	memset(junk, 0x5A, n);
	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, n, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, n, &bb), 0);
	assert_int_equal(pprpc_timeline_create(c2, 0, 0, &tl), 0);
	for (uint64_t round = 1; round <= 4; round++, id++) {
		bool recv_first = round & 1;

		assert_int_equal(pprpc_tensor_set(p->ca, ba, 0, src, n), 0);
		memset(dst, 0, n);
		assert_int_equal(pprpc_tensor_set(p->cb, bb, 0, dst, n), 0);
		if (recv_first) {
			assert_int_equal(pprpc_recv_async(p->cb, bb, 0, n, id, p->a.addr), 0);
			assert_int_equal(pprpc_probe_rank(p->cb, p->a.addr, 2000), 0); /* the PULL is out */
		}
		assert_int_equal(pprpc_wait(p->ca, 0, p->a.addr, tl, round), 0);
		assert_int_equal(pprpc_send_async(p->ca, ba, 0, n, id, p->b.addr), 0);
		assert_int_equal(pprpc_tensor_set_async(p->ca, ba, 0, junk, n), 0);
		if (!recv_first)
			assert_int_equal(pprpc_recv_async(p->cb, bb, 0, n, id, p->a.addr), 0);
		usleep(20000); /* the SEND is on the stream, behind the WAIT */
		assert_int_equal(pprpc_signal(c2, tl, round), 0);
		assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
		assert_int_equal(pprpc_synchronize(p->cb, 0), 0);
		assert_int_equal(pprpc_tensor_get(p->cb, bb, 0, dst, n), 0);
		assert_memory_equal(src, dst, n);
	}
	/* at least the rounds whose PULL came first */
	gpu_part_seen(p->ca, "gpu_sends", "SENDs put by the GPU", gpu, sends0, 2);
	assert_int_equal(pprpc_buffer_free(p->ca, ba), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, bb), 0);
	pprpc_close(c2);
}

/* One GET_ROWS graph on c: out = table[ids] (D floats a row, R rows).  A
 * ggml device takes ggml graphs only (PPRPC_EUNSUPP): test_ggml's
 * test_chain_runs covers it there. */
static int rows_graph(pprpc_client *c, pprpc_buffer table, int64_t d, int64_t v, pprpc_buffer ids, int64_t r,
		      pprpc_buffer out, pprpc_graph *g)
{
	pprpc_tensor tt = pprpc_tensor_make(table, 0, PPRPC_F32, d, v, 1, 1);
	pprpc_tensor ti = pprpc_tensor_make(ids, 0, PPRPC_I32, r, 1, 1, 1);
	pprpc_tensor to = pprpc_tensor_make(out, 0, PPRPC_F32, d, r, 1, 1);
	pprpc_graph_builder *gb;
	int it, ii, io, rc;

	assert_int_equal(pprpc_graph_builder_new(&gb), 0);
	it = pprpc_gb_tensor(gb, &tt);
	ii = pprpc_gb_tensor(gb, &ti);
	io = pprpc_gb_tensor(gb, &to);
	assert_true(pprpc_gb_get_rows(gb, it, ii, io) >= 0);
	rc = pprpc_graph_create(c, 0, gb, g);
	pprpc_graph_builder_free(gb);
	return rc;
}

/*
 * Runs queued behind a held RECV, more of them than a GPU stream keeps
 * index-check reports for at once (16: ggml_cuda_stream.c, FAULT_RING),
 * their completions from beside the stream: every run's report is its
 * own — a GET_ROWS id outside its table (the 18th run, whose report's
 * record the 2nd run's reader must have left first) fails the runs with
 * PPRPC_ERANGE and the reason at synchronize, the rounds around it go
 * well, and the RECV's bytes land in each.  On a CPU, where a RECV is not
 * held, the same from the worker.
 */
static void test_land_held_runs(void **state)
{
	enum { D = 8, V = 4, R = 3, K = 20, BAD = 17 };
	static const size_t n = 8192;
	static const int32_t good[R] = { 0, 2, 3 }, bad[R] = { 1, 9, 0 };
	struct pair *p = *state;
	uint8_t src[8192], dst[8192];
	float table[V][D], out[R][D];
	pprpc_buffer ba, bb, tb, ig, ibad, ob;
	pprpc_graph gg, gbad;
	uint64_t id = 9500, held0;
	bool held;
	int rc;

	land_dir_or_skip();
	held = held_expected(p->cb, &held0);
	for (int r = 0; r < V; r++)
		for (int k = 0; k < D; k++)
			table[r][k] = (float)(r * 100 + k);
	assert_int_equal(pprpc_buffer_alloc(p->ca, 0, n, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, n, &bb), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, sizeof(table), &tb), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, sizeof(good), &ig), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, sizeof(bad), &ibad), 0);
	assert_int_equal(pprpc_buffer_alloc(p->cb, 0, sizeof(out), &ob), 0);
	assert_int_equal(pprpc_tensor_set(p->cb, tb, 0, table, sizeof(table)), 0);
	assert_int_equal(pprpc_tensor_set(p->cb, ig, 0, good, sizeof(good)), 0);
	assert_int_equal(pprpc_tensor_set(p->cb, ibad, 0, bad, sizeof(bad)), 0);
	rc = rows_graph(p->cb, tb, D, V, ig, R, ob, &gg);
	if (rc == PPRPC_EUNSUPP) {
		print_message("SKIP: %s (test_ggml's test_chain_runs covers a ggml device)\n", pprpc_last_error(p->cb));
		skip();
	}
	assert_int_equal(rc, 0);
	assert_int_equal(rows_graph(p->cb, tb, D, V, ibad, R, ob, &gbad), 0);
	transfer(p, 4096, id++, 20000, 0); /* the link checked: later PULLs attach at once */
	for (int round = 0; round < 3; round++, id++) {
		fill(src, n, 50 + (uint32_t)round);
		assert_int_equal(pprpc_tensor_set(p->ca, ba, 0, src, n), 0);
		assert_int_equal(pprpc_buffer_clear(p->cb, ob, 0), 0);
		assert_int_equal(pprpc_recv_async(p->cb, bb, 0, n, id, p->a.addr), 0);
		assert_int_equal(pprpc_probe_rank(p->cb, p->a.addr, 2000), 0); /* the PULL is out */
		for (int k = 0; k < K; k++)
			assert_int_equal(pprpc_graph_run_async(p->cb, round == 1 && k == BAD ? gbad : gg), 0);
		usleep(20000); /* the runs are on the stream, behind the RECV */
		assert_int_equal(pprpc_send_async(p->ca, ba, 0, n, id, p->b.addr), 0);
		assert_int_equal(pprpc_synchronize(p->ca, 0), 0);
		if (round == 1) {
			assert_int_equal(pprpc_synchronize(p->cb, 0), PPRPC_ERANGE);
			assert_non_null(strstr(pprpc_last_error(p->cb), "GRAPH_RUN"));
		} else {
			assert_int_equal(pprpc_synchronize(p->cb, 0), 0);
			assert_int_equal(pprpc_tensor_get(p->cb, ob, 0, out, sizeof(out)), 0);
			for (int r = 0; r < R; r++)
				assert_memory_equal(out[r], table[good[r]], sizeof(out[r]));
		}
		assert_int_equal(pprpc_tensor_get(p->cb, bb, 0, dst, n), 0);
		assert_memory_equal(src, dst, n);
	}
	gpu_part_seen(p->cb, "gpu_recvs", "RECVs held on the GPU", held, held0, 3);
	pprpc_graph_free(p->cb, gg);
	pprpc_graph_free(p->cb, gbad);
	assert_int_equal(pprpc_buffer_free(p->ca, ba), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, bb), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, tb), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, ig), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, ibad), 0);
	assert_int_equal(pprpc_buffer_free(p->cb, ob), 0);
}

/* A source that answers "landed" without writing the slot (or for
 * another size) fails the RECV with the reason and nothing else: the
 * destination takes bytes only when the slot's bell is this transfer's. */
static void test_land_lie(void **state)
{
	struct pair *p = *state;
	static const uint64_t sizes[] = { 4096, 4095 };
	struct fake_rank f;

	land_dir_or_skip();
	assert_int_equal(fake_rank_listen(&f), 0);
	for (size_t i = 0; i < 2; i++) {
		Pprpc__PullChunk pc = PPRPC__PULL_CHUNK__INIT;
		ProtobufCMessage *m = NULL;
		const Pprpc__Pull *pull;
		struct frame_hdr fh;
		pprpc_buffer bb;

		assert_int_equal(pprpc_buffer_alloc(p->cb, 0, 4096, &bb), 0);
		assert_int_equal(pprpc_recv_async(p->cb, bb, 0, 4096, 9100 + i, f.addr), 0);
		if (i == 0)
			assert_int_equal(fake_rank_accept(&f, WIRE_TIMEOUT_MS), 0);
		assert_int_equal(fake_expect(&f, MSG_PULL, &pprpc__pull__descriptor, &fh, &m, WIRE_TIMEOUT_MS), 0);
		pull = (const Pprpc__Pull *)m;
		/* offered: a page of B's, on this host */
		assert_true(pull->land_host && *pull->land_host && !strncmp(pull->land_page, LAND_PREFIX, strlen(LAND_PREFIX)));
		assert_true(pull->land_gen > 0 && pull->land_slot < LAND_SLOTS);
		meta_free(m);
		pc.offset = 0;
		pc.size = sizes[i];
		pc.landed = 1;
		assert_int_equal(fake_reply(f.fd, MSG_PULL, fh.req_id, 0, &pc.base, NULL, 0), 0);
		assert_int_not_equal(pprpc_synchronize(p->cb, 0), 0);
		assert_non_null(strstr(pprpc_last_error(p->cb), i == 0 ? "holds none of this transfer" : "source"));
		assert_int_equal(pprpc_buffer_free(p->cb, bb), 0);
		if (i == 1)
			break; /* a chunk of another size is a broken link: B dropped it */
	}
	fake_rank_close(&f);
	/* B serves on */
	transfer(p, 4096, 9110, 20000, 0);
}

/* A source whose daemon has landing pages off, or that cannot open the
 * page, sends by the link; pages are removed when their daemon stops. */
static void test_land_off_and_cleanup(void **state)
{
	static const char *const off[] = { "--land", "0", NULL };
	struct pair q = { 0 };
	char path[16] = "";
	uint64_t b = 0, c = 0;
	pid_t pid;

	(void)state;
	land_dir_or_skip();
	pair_start(&q, off, hold_on);
	transfer(&q, 16 * 1024, 9200, 20000, 1);
	recv_bstat(&q, path, sizeof(path), &b, &c);
	assert_string_equal(path, "p2p-tcp");
	/* B offered: its page is still named (the source never answered from it) */
	pid = q.b.pid;
	assert_int_equal(land_files(pid), 1);
	pprpc_close(q.ca);
	pprpc_close(q.cb);
	assert_int_equal(tdaemon_stop(&q.a), 0);
	assert_int_equal(tdaemon_stop(&q.b), 0);
	assert_int_equal(land_files(pid), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_in_place_overwrite),
		cmocka_unit_test(test_in_place_slow_puller),
		cmocka_unit_test(test_pull_hijack),
		cmocka_unit_test(test_sync_before_recv),
		cmocka_unit_test(test_ring_full),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_stats_and_probe),
		cmocka_unit_test(test_unmatched),
		cmocka_unit_test(test_send_queued_long),
		cmocka_unit_test(test_shared_device),
		cmocka_unit_test(test_source_dies),
	};

	const struct CMUnitTest ipc_tests[] = {
		cmocka_unit_test(test_ipc_sizes),
		cmocka_unit_test(test_ipc_ring_full),
		cmocka_unit_test(test_cma_pool_of_the_link_only),
		cmocka_unit_test(test_small_by_tcp),
	};
	const struct CMUnitTest direct0_tests[] = {
		cmocka_unit_test(test_small_by_ipc_direct0),
	};
	const struct CMUnitTest land_tests[] = {
		cmocka_unit_test(test_land_path),
		cmocka_unit_test(test_land_held),
		cmocka_unit_test(test_land_hold_lead),
		cmocka_unit_test(test_land_gpu_send),
		cmocka_unit_test(test_land_held_runs),
		cmocka_unit_test(test_land_lie),
		cmocka_unit_test(test_land_off_and_cleanup),
	};
	int failed = cmocka_run_group_tests_name("integration_p2p", tests, setup, teardown);

	failed |= cmocka_run_group_tests_name("integration_p2p_ipc", ipc_tests, setup_ipc, teardown);
	failed |= cmocka_run_group_tests_name("integration_p2p_direct0", direct0_tests, setup_direct0, teardown);
	return failed | cmocka_run_group_tests_name("integration_p2p_land", land_tests, setup, teardown);
}
