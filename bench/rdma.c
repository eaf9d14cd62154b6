/*
 * bench/rdma — stage-boundary transfer A -> B over whatever link the
 * daemons chose, proved from their STATS, bit-exact, timed.  Run by the
 * Soft-RoCE guest (tests/vm/) next to ib_write_bw / ib_write_lat on the
 * same device.
 *
 *   bench-rdma --ranks A,B [--size BYTES] [--reps N] [--lat-iters N]
 *              [--expect rdma|tcp]
 *
 * Throughput: SEND on A + RECV on B of --size bytes (default 256 MiB),
 * timed from issue to pprpc_synchronize(B) returning; --reps runs, best
 * and median reported.  Each run fills A with a fresh seeded pattern and
 * clears B first (untimed), and compares B's bytes (FNV-1a) after.
 * Latency: --lat-iters transfers of 64 bytes, p50/p99 (this is the whole
 * stage-boundary path: client RPCs + daemon queues + the peer link).
 *
 * Proof of the path: after the runs, B's outbound link to A and A's
 * inbound peer connection are read from STATS; each line prints transport,
 * device, GID index, MTU, ring geometry, memlock step or fallback reason.
 * --expect makes a mismatch an error.  Last line, for scripts:
 *   BENCH-RDMA: link=rdma|tcp bytes=N best_mibs=X median_mibs=Y lat_p50_us=Z parity=ok
 * Exit: 0 ok, 1 parity or --expect failed, 2 setup error.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pprpc.h"
#include "tools/common/measure.h"
#include "util/hash.h"

static void fill(uint8_t *p, uint64_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	for (uint64_t i = 0; i < n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, n - i < 8 ? n - i : 8);
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define CHECK(cl, expr, what)                                                                       \
	do {                                                                                    \
		int rc_ = (expr);                                                               \
		if (rc_ < 0) {                                                                  \
			fprintf(stderr, "bench-rdma: %s: %s (%s)\n", what, pprpc_strerror(rc_),  \
				pprpc_last_error(cl));          \
			return 2;                                                               \
		}                                                                               \
	} while (0)

static void show_conn(const char *who, const pprpc_stats *s, const char *list, int i)
{
#define K(name) pprpc_stats_str(s, list, i, name)
#define N(name) pprpc_stats_u64(s, list, i, name)
	pprpc_stat gid;

	if (pprpc_stats_find(s, list, i, "gid_index", &gid) < 0 || gid.type != PPRPC_STAT_INT)
		gid.i = -1;
	printf("  %s %s: transport=%s", who, K("peer"), K("transport"));
	if (!strcmp(K("transport"), "rdma"))
		printf(" device=%s gid_index=%" PRId64 " mtu=%" PRIu64 " ring=%" PRIu64 "x%" PRIu64 "KiB rx_depth=%" PRIu64
		       " memlock=%s%s%s", K("rdma_device"), gid.i, N("mtu"), N("rdma_tx_depth"), N("rdma_chunk") >> 10,
		       N("rdma_rx_depth"), K("memlock_step"), K("memlock_why")[0] ? " why=" : "", K("memlock_why"));
	if (K("fallback_reason")[0])
		printf(" fallback=\"%s\"", K("fallback_reason"));
	printf(" bytes_in=%" PRIu64 " bytes_out=%" PRIu64, N("bytes_in"), N("bytes_out"));
	if (!strcmp(K("transport"), "rdma"))
		printf(" bulk=\"%s\" read_in=%" PRIu64 " read_out=%" PRIu64, K("rdma_bulk"), N("bulk_bytes_in"),
		       N("bulk_bytes_out"));
	printf("\n");
#undef K
#undef N
}

/* The transport of B's link to A and of A's peer connection; "?" if absent. */
static int link_kinds(pprpc_client *a, pprpc_client *b, char *ka, char *kb)
{
	pprpc_stats *sa = NULL, *sb = NULL;

	strcpy(ka, "?");
	strcpy(kb, "?");
	if (pprpc_stats_get(b, &sb) == 0) {
		for (int i = 0; i < pprpc_stats_count(sb, "links"); i++) {
			show_conn("B link to", sb, "links", i);
			snprintf(kb, 16, "%s", pprpc_stats_str(sb, "links", i, "transport"));
		}
		printf("  B rdma: %s\n", pprpc_stats_str(sb, NULL, 0, "rdma_status"));
		for (int i = 0; i < pprpc_stats_count(sb, "boundaries"); i++)
			printf("  B boundary %s %s path=%s transfers=%" PRIu64 " bytes=%" PRIu64 "\n",
			       pprpc_stats_str(sb, "boundaries", i, "peer"), pprpc_stats_str(sb, "boundaries", i, "direction"),
			       pprpc_stats_str(sb, "boundaries", i, "path"), pprpc_stats_u64(sb, "boundaries", i, "transfers"),
			       pprpc_stats_u64(sb, "boundaries", i, "bytes"));
	}
	if (pprpc_stats_get(a, &sa) == 0) {
		for (int i = 0; i < pprpc_stats_count(sa, "connections"); i++)
			if (!strcmp(pprpc_stats_str(sa, "connections", i, "role"), "peer")) {
				show_conn("A peer conn from", sa, "connections", i);
				snprintf(ka, 16, "%s", pprpc_stats_str(sa, "connections", i, "transport"));
			}
		printf("  A rdma: %s\n", pprpc_stats_str(sa, NULL, 0, "rdma_status"));
	}
	pprpc_stats_free(sa);
	pprpc_stats_free(sb);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "ranks", required_argument, NULL, 'r' }, { "size", required_argument, NULL, 's' },
		{ "reps", required_argument, NULL, 'n' },  { "lat-iters", required_argument, NULL, 'l' },
		{ "expect", required_argument, NULL, 'e' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char ranks[600] = "", *ra, *rb, ka[16], kb[16];
	const char *expect = NULL;
	uint64_t size = 256ull << 20, id = 1000;
	int reps = 3, lat_iters = 200, opt, bad = 0;
	pprpc_client *a, *b;
	pprpc_buffer ba, bb;
	uint8_t *src, *dst;
	double *t, *lat, best, med;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'r': snprintf(ranks, sizeof(ranks), "%s", optarg); break;
		case 's': size = strtoull(optarg, NULL, 0); break;
		case 'n': reps = atoi(optarg); break;
		case 'l': lat_iters = atoi(optarg); break;
		case 'e': expect = optarg; break;
		default:
			fprintf(opt == 'h' ? stdout : stderr,
				"usage: bench-rdma --ranks A,B [--size BYTES] [--reps N] [--lat-iters N] [--expect rdma|tcp]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	ra = ranks;
	rb = strchr(ranks, ',');
	if (!rb || size == 0 || size % 8 || reps < 1 || lat_iters < 1) {
		fprintf(stderr, "bench-rdma: need --ranks A,B, a size multiple of 8, reps >= 1\n");
		return 2;
	}
	*rb++ = '\0';
	CHECK(NULL, pprpc_connect(ra, NULL, &a), "connect A");
	CHECK(NULL, pprpc_connect(rb, NULL, &b), "connect B");
	CHECK(a, pprpc_buffer_alloc(a, 0, size, &ba), "alloc A");
	CHECK(b, pprpc_buffer_alloc(b, 0, size, &bb), "alloc B");
	src = malloc(size);
	dst = malloc(size);
	t = calloc(reps, sizeof(*t));
	lat = calloc(lat_iters, sizeof(*lat));
	if (!src || !dst || !t || !lat) {
		fprintf(stderr, "bench-rdma: out of memory\n");
		return 2;
	}
	/* Warm-up (untimed): opens B's link to A. */
	CHECK(a, pprpc_send_async(a, ba, 0, 4096, id, rb), "warm-up send");
	CHECK(b, pprpc_recv_async(b, bb, 0, 4096, id++, ra), "warm-up recv");
	CHECK(b, pprpc_synchronize(b, 0), "warm-up sync B");
	CHECK(a, pprpc_synchronize(a, 0), "warm-up sync A");
	for (int r = 0; r < reps; r++) {
		uint64_t h;
		double t0;

		fill(src, size, (uint64_t)r + 1);
		h = fnv1a64(src, size);
		CHECK(a, pprpc_tensor_set(a, ba, 0, src, size), "set A");
		CHECK(b, pprpc_buffer_clear(b, bb, 0xA5), "clear B");
		t0 = now_s();
		CHECK(a, pprpc_send_async(a, ba, 0, size, id, rb), "send");
		CHECK(b, pprpc_recv_async(b, bb, 0, size, id++, ra), "recv");
		CHECK(b, pprpc_synchronize(b, 0), "sync B");
		t[r] = now_s() - t0;
		CHECK(a, pprpc_synchronize(a, 0), "sync A");
		memset(dst, 0, size);
		CHECK(b, pprpc_tensor_get(b, bb, 0, dst, size), "get B");
		if (fnv1a64(dst, size) != h || memcmp(dst, src, size)) {
			fprintf(stderr, "bench-rdma: run %d: B's bytes differ from A's\n", r);
			bad = 1;
		}
		printf("run %d: %" PRIu64 " bytes in %.3f s = %.1f MiB/s, parity %s\n", r, size, t[r],
		       size / 1048576.0 / t[r], bad ? "FAILED" : "ok");
	}
	for (int i = 0; i < lat_iters; i++) {
		double t0 = now_s();

		CHECK(a, pprpc_send_async(a, ba, 0, 64, id, rb), "lat send");
		CHECK(b, pprpc_recv_async(b, bb, 0, 64, id++, ra), "lat recv");
		CHECK(b, pprpc_synchronize(b, 0), "lat sync B");
		lat[i] = (now_s() - t0) * 1e6;
		CHECK(a, pprpc_synchronize(a, 0), "lat sync A");
	}
	qsort(t, reps, sizeof(*t), cmp_d);
	qsort(lat, lat_iters, sizeof(*lat), cmp_d);
	best = size / 1048576.0 / t[0];
	med = size / 1048576.0 / t[reps / 2];
	printf("stage-boundary link, from STATS:\n");
	link_kinds(a, b, ka, kb);
	if (strcmp(ka, kb)) {
		fprintf(stderr, "bench-rdma: the two ends disagree (A %s, B %s)\n", ka, kb);
		bad = 1;
	}
	if (expect && (strcmp(ka, expect) || strcmp(kb, expect))) {
		fprintf(stderr, "bench-rdma: expected the link over %s, got %s\n", expect, kb);
		bad = 1;
	}
	printf("latency 64 B boundary: p50 %.1f us, p99 %.1f us (%d transfers)\n", lat[lat_iters / 2],
	       lat[lat_iters * 99 / 100], lat_iters);
	printf("BENCH-RDMA: link=%s bytes=%" PRIu64 " best_mibs=%.1f median_mibs=%.1f best_gbps=%.3f lat_p50_us=%.1f parity=%s\n",
	       kb, size, best, med, best * 1048576.0 * 8 / 1e9, lat[lat_iters / 2], bad ? "FAILED" : "ok");
	pprpc_close(a);
	pprpc_close(b);
	free(src);
	free(dst);
	free(t);
	free(lat);
	return bad;
}
