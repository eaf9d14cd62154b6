/*
 * bench/p2p — stage-boundary transfer from rank A to rank B: the
 * daemon-to-daemon path (SEND/RECV) next to the exact fallback through the
 * client (GET then SET), in the same run, plus small-transfer latency.
 *
 *   bench-p2p [--ranks A,B | --pprpcd PATH] [--sizes 4K,64K,1M,16M,256M,1G]
 *             [--pairs K] [--pairs-large K] [--lat-iters N] [--json FILE]
 *
 * Candidate (p2p): pprpc_send_async(A, bufA, 0, n, id, B) and then
 * pprpc_recv_async(B, bufB, 0, n, id, A) are issued, and the time runs
 * until pprpc_synchronize(B) returned: the destination holding the bytes is
 * what a pipeline waits for.  pprpc_synchronize(A) is called right after,
 * outside the timing (its completion time from the same start is kept in the
 * JSON as "p2p_both"); it must succeed too.
 *
 * Baseline (client path, the exact fallback): pprpc_tensor_get(A, bufA ->
 * host buffer) then pprpc_tensor_set(B, host buffer -> bufB), both plain
 * (synchronous) calls, timed to the return of the SET.
 *
 * For each size, K pairs (fewer for sizes >= 512 MiB: --pairs-large); pair i
 * runs the baseline first when i is even and the candidate first when it is
 * odd, so drift (the other processes on this machine, page cache, frequency)
 * hits both sides alike.  Per pair, ratio = p2p throughput / client
 * throughput (> 1: p2p is faster); reported as median [min..max].  One
 * untimed round of each path precedes the pairs (the first p2p transfer
 * also opens B's peer link to A).
 *
 * Parity, in the same run and outside the timed regions: each pair fills
 * A's buffer with its own seeded, position-dependent pattern (set from the
 * host, hashed there); before each run B's buffer is cleared and the host
 * buffer overwritten with a filler; after it B's buffer is read back and
 * its hash compared with the source's.  Any mismatch exits 1.
 *
 * Latency: transfers of 4 KiB and 64 B, N round trips per path, alternating
 * per round trip; p50/p99 per path, and the time ratio p2p/client per block
 * of 50 (block medians): median [min..max].  Every round trip sets a fresh
 * pattern on A first and checks B's bytes after (both untimed).
 *
 * At the end each daemon's boundary statistics (STATS) are printed, with
 * what this run added, to show which path the bytes really took.
 *
 * This machine may have few cores: both daemons (a loop and a worker thread
 * each) and this process share them, for both paths alike.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "pprpc.h"
#include "tools/common/spawn.h"
#include "tools/common/measure.h"
#include "tools/common/stats.h"

#define KIB ((uint64_t)1 << 10)
#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)
#define MAX_SIZES 16
#define MAX_PAIRS 1000
#define MAX_LAT_ITERS 1000000
#define LARGE_SIZE (512 * MIB)
#define LAT_BLOCK 50
#define PATTERN_SEED 0x9e3779b97f4a7c15ull

/* "4K", "64K", "1M", "1G", else bytes. */
static const char *size_label(uint64_t n, char *buf, size_t len)
{
	if (n >= GIB && n % GIB == 0)
		snprintf(buf, len, "%" PRIu64 "G", n / GIB);
	else if (n >= MIB && n % MIB == 0)
		snprintf(buf, len, "%" PRIu64 "M", n / MIB);
	else if (n >= KIB && n % KIB == 0)
		snprintf(buf, len, "%" PRIu64 "K", n / KIB);
	else
		snprintf(buf, len, "%" PRIu64 "B", n);
	return buf;
}

/* ---- the two ranks ---------------------------------------------------------------------------- */

struct rank {
	const char *addr;
	struct spawned d;          /* when we started it */
	pprpc_client *c;
	pprpc_stats *stats0;       /* boundary statistics before the run */
};

struct ctx {
	struct rank a, b;
	uint64_t next_id;          /* transfer ids: unique per source daemon while in flight */
	int pairs, pairs_large, lat_iters;
	int burst;                 /* back-to-back transfers per size (0: none) */
	uint64_t p2p_done;         /* p2p transfers that completed (for the stats check) */
};

static int pprpc_err(pprpc_client *c, const char *what, int rc)
{
	fprintf(stderr, "bench-p2p: %s: %s (%s)\n", what, pprpc_strerror(rc), pprpc_last_error(c));
	return -1;
}

/* Returns 0, or the failing call's code (message printed). */
static int p2p_once(struct ctx *x, pprpc_buffer ba, pprpc_buffer bb, uint64_t n, double *secs,
		    double *secs_both, int quiet_rc)
{
	uint64_t id = x->next_id++;
	double t0, t1;
	int rc, rca;

	t0 = now_s();
	rc = pprpc_send_async(x->a.c, ba, 0, n, id, x->b.addr);
	if (rc < 0) {
		pprpc_err(x->a.c, "send_async", rc);
		return rc;
	}
	rc = pprpc_recv_async(x->b.c, bb, 0, n, id, x->a.addr);
	if (rc < 0) {
		pprpc_err(x->b.c, "recv_async", rc);
		return rc;
	}
	rc = pprpc_synchronize(x->b.c, 0);
	t1 = now_s();
	/* A's SEND must have succeeded as well (outside the timing). */
	rca = pprpc_synchronize(x->a.c, 0);
	if (secs)
		*secs = t1 - t0;
	if (secs_both)
		*secs_both = now_s() - t0;
	if (rc < 0) {
		if (rc != quiet_rc)
			pprpc_err(x->b.c, "synchronize(B) after RECV", rc);
		return rc;
	}
	if (rca < 0) {
		pprpc_err(x->a.c, "synchronize(A) after SEND", rca);
		return rca;
	}
	x->p2p_done++;
	return 0;
}

static int client_once(struct ctx *x, pprpc_buffer ba, pprpc_buffer bb, uint8_t *host, uint64_t n,
		       double *secs)
{
	double t0 = now_s();
	int rc;

	rc = pprpc_tensor_get(x->a.c, ba, 0, host, n);
	if (rc < 0)
		return pprpc_err(x->a.c, "tensor_get(A)", rc);
	rc = pprpc_tensor_set(x->b.c, bb, 0, host, n);
	if (rc < 0)
		return pprpc_err(x->b.c, "tensor_set(B)", rc);
	if (secs)
		*secs = now_s() - t0;
	return 0;
}

/* Read B's region back (into host, overwritten first) and compare hashes:
 * 1 equal, 0 different, -1 error. */
static int dest_matches(struct ctx *x, pprpc_buffer bb, uint8_t *host, uint64_t n, uint64_t want)
{
	int rc;

	memset(host, 0xa5, n);
	rc = pprpc_tensor_get(x->b.c, bb, 0, host, n);
	if (rc < 0)
		return pprpc_err(x->b.c, "tensor_get(B) (read-back)", rc);
	return hash64(host, n) == want;
}

/* ---- throughput -------------------------------------------------------------------------------- */

struct result {
	uint64_t size;
	int pairs;
	int skipped;
	char skip_msg[240];
	double p2p_s[MAX_PAIRS], p2p_both_s[MAX_PAIRS], cli_s[MAX_PAIRS], ratio[MAX_PAIRS];
	double p2p_med, cli_med, ratio_med, ratio_min, ratio_max; /* MiB/s, MiB/s, ratios */
	int parity_ok;
	char parity_msg[200];
};

static void parity_fail(struct result *r, const char *what, int pair)
{
	if (!r->parity_ok)
		return;
	r->parity_ok = 0;
	snprintf(r->parity_msg, sizeof(r->parity_msg), "%s: B's hash differs from the source (pair %d)",
		 what, pair);
}

static void summarize(struct result *r)
{
	double p[MAX_PAIRS], c[MAX_PAIRS];
	double mib = (double)r->size / (double)MIB;

	for (int i = 0; i < r->pairs; i++) {
		p[i] = mib / r->p2p_s[i];
		c[i] = mib / r->cli_s[i];
		r->ratio[i] = r->cli_s[i] / r->p2p_s[i];
	}
	r->p2p_med = median(p, r->pairs);
	r->cli_med = median(c, r->pairs);
	r->ratio_med = median(r->ratio, r->pairs);
	min_max(r->ratio, r->pairs, &r->ratio_min, &r->ratio_max);
}

static int is_refusal(int rc)
{
	return rc == PPRPC_EFLOOR || rc == PPRPC_ENOMEM || rc == PPRPC_ETOOBIG || rc == PPRPC_ELIMIT;
}

/* One timed run of a path, bracketed by an untimed clear of B and an
 * untimed read-back of B.  Returns 0 or -1. */
static int run_path(struct ctx *x, int p2p, pprpc_buffer ba, pprpc_buffer bb, uint8_t *host,
		    struct result *r, uint64_t want, int pair)
{
	int rc = pprpc_buffer_clear(x->b.c, bb, 0);

	if (rc < 0)
		return pprpc_err(x->b.c, "buffer_clear(B)", rc);
	if (p2p) {
		if (p2p_once(x, ba, bb, r->size, &r->p2p_s[pair], &r->p2p_both_s[pair], 0) < 0)
			return -1;
	} else {
		/* A GET that delivered nothing must not pass: host starts as filler. */
		memset(host, 0x5a, r->size);
		if (client_once(x, ba, bb, host, r->size, &r->cli_s[pair]) < 0)
			return -1;
	}
	rc = dest_matches(x, bb, host, r->size, want);
	if (rc < 0)
		return -1;
	if (!rc)
		parity_fail(r, p2p ? "p2p" : "client path", pair);
	return 0;
}

/* Returns 0 (measured or skipped with a reason), -1 on a hard error. */
static int measure(struct ctx *x, struct result *r)
{
	uint64_t n = r->size, want;
	pprpc_buffer ba = { 0 }, bb = { 0 };
	uint8_t *host = NULL;
	char lbl[32];
	double junk;
	int rc, ret = -1;

	r->parity_ok = 1;
	r->pairs = n >= LARGE_SIZE ? x->pairs_large : x->pairs;
	size_label(n, lbl, sizeof(lbl));
	rc = pprpc_buffer_alloc(x->a.c, 0, n, &ba);
	if (rc < 0 && is_refusal(rc)) {
		snprintf(r->skip_msg, sizeof(r->skip_msg), "rank A refused the buffer: %s (%s)",
			 pprpc_strerror(rc), pprpc_last_error(x->a.c));
		goto skip;
	}
	if (rc < 0)
		return pprpc_err(x->a.c, "buffer_alloc(A)", rc);
	rc = pprpc_buffer_alloc(x->b.c, 0, n, &bb);
	if (rc < 0 && is_refusal(rc)) {
		snprintf(r->skip_msg, sizeof(r->skip_msg), "rank B refused the buffer: %s (%s)",
			 pprpc_strerror(rc), pprpc_last_error(x->b.c));
		goto skip;
	}
	if (rc < 0) {
		pprpc_err(x->b.c, "buffer_alloc(B)", rc);
		goto out;
	}
	host = alloc_touched((size_t)n);
	if (!host) {
		snprintf(r->skip_msg, sizeof(r->skip_msg), "cannot allocate the %s host buffer: %s", lbl,
			 strerror(errno));
		goto skip;
	}

	/* Untimed round of each path: buffers, socket buffers and staging
	 * slots warmed, B's peer link to A opened. */
	fill_pattern(host, (size_t)n, PATTERN_SEED ^ n);
	want = hash64(host, (size_t)n);
	rc = pprpc_tensor_set(x->a.c, ba, 0, host, n);
	if (rc < 0) {
		pprpc_err(x->a.c, "tensor_set(A)", rc);
		goto out;
	}
	memset(host, 0x5a, n);
	if (client_once(x, ba, bb, host, n, &junk) < 0)
		goto out;
	rc = p2p_once(x, ba, bb, n, &junk, &junk, PPRPC_ENOMEM);
	if (rc == PPRPC_ENOMEM) {
		snprintf(r->skip_msg, sizeof(r->skip_msg), "rank B cannot stage the RECV: %s",
			 pprpc_last_error(x->b.c));
		goto skip;
	}
	if (rc < 0)
		goto out;
	if ((rc = dest_matches(x, bb, host, n, want)) < 0)
		goto out;
	if (!rc)
		parity_fail(r, "p2p (warm-up)", -1);

	for (int i = 0; i < r->pairs; i++) {
		uint64_t seed = PATTERN_SEED ^ (n * 0x100000001b3ull) ^ (uint64_t)(i + 1);
		int p2p_first = i % 2 == 1;

		fill_pattern(host, (size_t)n, seed);
		want = hash64(host, (size_t)n);
		rc = pprpc_tensor_set(x->a.c, ba, 0, host, n);
		if (rc < 0) {
			pprpc_err(x->a.c, "tensor_set(A)", rc);
			goto out;
		}
		if (run_path(x, p2p_first, ba, bb, host, r, want, i) < 0 ||
		    run_path(x, !p2p_first, ba, bb, host, r, want, i) < 0)
			goto out;
	}
	summarize(r);
	ret = 0;
	goto out;
skip:
	r->skipped = 1;
	ret = 0;
out:
	if (host)
		munmap(host, (size_t)n);
	if (bb.id && (rc = pprpc_buffer_free(x->b.c, bb)) < 0 && ret == 0)
		ret = pprpc_err(x->b.c, "buffer_free(B)", rc);
	if (ba.id && (rc = pprpc_buffer_free(x->a.c, ba)) < 0 && ret == 0)
		ret = pprpc_err(x->a.c, "buffer_free(A)", rc);
	return ret;
}

/* ---- bursts ------------------------------------------------------------------------------------ */

/*
 * The steady state of a pipeline boundary: K transfers of n bytes issued
 * back to back (every SEND and RECV queued before the one synchronize of
 * B), so the devices and the daemons never idle between them.  The single
 * transfers above pay a cold start each (the client path's long host work
 * runs between them).  Parity: B holds A's pattern afterwards.  Returns
 * 0, 1 when skipped (refused memory), -1 on an error.
 */
static int burst(struct ctx *x, uint64_t n, int k, double *ret_s, int *ret_parity)
{
	pprpc_buffer ba = { 0 }, bb = { 0 };
	uint8_t *host = alloc_touched((size_t)n);
	uint64_t want;
	double t0;
	int rc, ret = -1;

	if (!host)
		return 1;
	if ((rc = pprpc_buffer_alloc(x->a.c, 0, n, &ba)) < 0 || (rc = pprpc_buffer_alloc(x->b.c, 0, n, &bb)) < 0) {
		ret = is_refusal(rc) ? 1 : pprpc_err(ba.id ? x->b.c : x->a.c, "buffer_alloc (burst)", rc);
		goto out;
	}
	fill_pattern(host, (size_t)n, PATTERN_SEED ^ n ^ 0xb0b5ull);
	want = hash64(host, (size_t)n);
	if ((rc = pprpc_tensor_set(x->a.c, ba, 0, host, n)) < 0) {
		pprpc_err(x->a.c, "tensor_set(A) (burst)", rc);
		goto out;
	}
	t0 = now_s();
	for (int i = 0; i < k; i++) {
		uint64_t id = x->next_id++;

		if ((rc = pprpc_send_async(x->a.c, ba, 0, n, id, x->b.addr)) < 0 ||
		    (rc = pprpc_recv_async(x->b.c, bb, 0, n, id, x->a.addr)) < 0) {
			pprpc_err(x->a.c, "send/recv_async (burst)", rc);
			goto out;
		}
	}
	if ((rc = pprpc_synchronize(x->b.c, 0)) < 0) {
		pprpc_err(x->b.c, "synchronize(B) (burst)", rc);
		goto out;
	}
	*ret_s = now_s() - t0;
	if ((rc = pprpc_synchronize(x->a.c, 0)) < 0) {
		pprpc_err(x->a.c, "synchronize(A) (burst)", rc);
		goto out;
	}
	x->p2p_done += (uint64_t)k;
	rc = dest_matches(x, bb, host, n, want);
	if (rc < 0)
		goto out;
	*ret_parity = rc;
	ret = 0;
out:
	munmap(host, (size_t)n);
	if (bb.id)
		pprpc_buffer_free(x->b.c, bb);
	if (ba.id)
		pprpc_buffer_free(x->a.c, ba);
	return ret;
}

/* ---- latency ------------------------------------------------------------------------------------ */

struct lat {
	uint64_t size;
	int iters, nblocks;
	double *p2p_us, *cli_us;   /* iters samples each, in issue order */
	double p2p_p50, p2p_p99, cli_p50, cli_p99;
	double *block_ratio;       /* p2p/client time, block medians */
	double ratio_med, ratio_min, ratio_max;
	uint64_t bad;
	char first_bad[160];
};

static void lat_summarize(struct lat *l)
{
	double *tmp = malloc(sizeof(double) * (size_t)l->iters);
	double *rs = malloc(sizeof(double) * (size_t)l->nblocks);

	if (!tmp || !rs)
		abort(); /* a few KiB after the run: not worth a path */
	memcpy(tmp, l->p2p_us, sizeof(double) * (size_t)l->iters);
	qsort(tmp, (size_t)l->iters, sizeof(double), cmp_double);
	l->p2p_p50 = pct_sorted(tmp, l->iters, 50.0);
	l->p2p_p99 = pct_sorted(tmp, l->iters, 99.0);
	memcpy(tmp, l->cli_us, sizeof(double) * (size_t)l->iters);
	qsort(tmp, (size_t)l->iters, sizeof(double), cmp_double);
	l->cli_p50 = pct_sorted(tmp, l->iters, 50.0);
	l->cli_p99 = pct_sorted(tmp, l->iters, 99.0);
	for (int b = 0; b < l->nblocks; b++) {
		int lo = b * LAT_BLOCK;
		int hi = b == l->nblocks - 1 ? l->iters : lo + LAT_BLOCK;
		double pm, cm;

		memcpy(tmp, l->p2p_us + lo, sizeof(double) * (size_t)(hi - lo));
		pm = median_sorting(tmp, hi - lo);
		memcpy(tmp, l->cli_us + lo, sizeof(double) * (size_t)(hi - lo));
		cm = median_sorting(tmp, hi - lo);
		l->block_ratio[b] = pm / cm;
	}
	memcpy(rs, l->block_ratio, sizeof(double) * (size_t)l->nblocks);
	l->ratio_med = median_sorting(rs, l->nblocks);
	l->ratio_min = rs[0];
	l->ratio_max = rs[l->nblocks - 1];
	free(tmp);
	free(rs);
}

/* One round trip of a path into *us; a fresh pattern on A before it and
 * B's bytes checked after it, both untimed. */
static int lat_once(struct ctx *x, struct lat *l, int p2p, pprpc_buffer ba, pprpc_buffer bb,
		    uint64_t seq, double *us)
{
	uint8_t src[4096], host[4096], got[4096];
	double s;
	int rc;

	fill_pattern(src, (size_t)l->size, PATTERN_SEED ^ (seq * 0x9e37ull));
	rc = pprpc_tensor_set(x->a.c, ba, 0, src, l->size);
	if (rc < 0)
		return pprpc_err(x->a.c, "tensor_set(A)", rc);
	memset(host, 0x5a, sizeof(host));
	if (p2p)
		rc = p2p_once(x, ba, bb, l->size, &s, NULL, 0);
	else
		rc = client_once(x, ba, bb, host, l->size, &s);
	if (rc < 0)
		return -1;
	*us = s * 1e6;
	memset(got, 0xa5, sizeof(got));
	rc = pprpc_tensor_get(x->b.c, bb, 0, got, l->size);
	if (rc < 0)
		return pprpc_err(x->b.c, "tensor_get(B) (read-back)", rc);
	if (memcmp(got, src, (size_t)l->size) != 0) {
		if (!l->bad++)
			snprintf(l->first_bad, sizeof(l->first_bad), "%s, round trip %" PRIu64,
				 p2p ? "p2p" : "client path", seq);
	}
	return 0;
}

static int measure_lat(struct ctx *x, struct lat *l)
{
	pprpc_buffer ba = { 0 }, bb = { 0 };
	double junk;
	int rc, ret = -1;

	rc = pprpc_buffer_alloc(x->a.c, 0, l->size, &ba);
	if (rc < 0)
		return pprpc_err(x->a.c, "buffer_alloc(A)", rc);
	rc = pprpc_buffer_alloc(x->b.c, 0, l->size, &bb);
	if (rc < 0) {
		pprpc_err(x->b.c, "buffer_alloc(B)", rc);
		goto out;
	}
	for (int i = 0; i < 20; i++)
		if (lat_once(x, l, 1, ba, bb, (uint64_t)i, &junk) < 0 ||
		    lat_once(x, l, 0, ba, bb, (uint64_t)i, &junk) < 0)
			goto out;
	for (int i = 0; i < l->iters; i++) {
		int p2p_first = i % 2 == 1;
		double *first = p2p_first ? &l->p2p_us[i] : &l->cli_us[i];
		double *second = p2p_first ? &l->cli_us[i] : &l->p2p_us[i];

		if (lat_once(x, l, p2p_first, ba, bb, (uint64_t)i << 1, first) < 0 ||
		    lat_once(x, l, !p2p_first, ba, bb, ((uint64_t)i << 1) | 1, second) < 0)
			goto out;
	}
	lat_summarize(l);
	ret = 0;
out:
	if (bb.id && (rc = pprpc_buffer_free(x->b.c, bb)) < 0 && ret == 0)
		ret = pprpc_err(x->b.c, "buffer_free(B)", rc);
	if (ba.id && (rc = pprpc_buffer_free(x->a.c, ba)) < 0 && ret == 0)
		ret = pprpc_err(x->a.c, "buffer_free(A)", rc);
	return ret;
}

/* ---- boundary statistics ------------------------------------------------------------------------- */

/* B's receive boundary from peer: IPC bytes and IPC copy time so far (zeros
 * when STATS fails or there is none). */
static void recv_copy_stats(struct rank *r, const char *peer, uint64_t *bytes, uint64_t *copy_us)
{
	pprpc_stats *s = NULL;
	int i;

	if (pprpc_stats_get(r->c, &s) < 0)
		return;
	if ((i = stats_item(s, "boundaries", "peer", peer, "direction", "recv")) >= 0) {
		/* only what went by IPC: a transfer staged through the host has
		 * bytes but no copy time */
		*bytes = pprpc_stats_u64(s, "boundaries", i, "ipc_bytes");
		*copy_us = pprpc_stats_u64(s, "boundaries", i, "copy_us");
	}
	pprpc_stats_free(s);
}

/* Print rank r's boundaries now and what this run added; returns the
 * transfers this run added on (peer, dir), or -1 if STATS failed. */
static int64_t print_bstats(struct rank *r, const char *name, const char *peer, const char *dir,
			    FILE *json, int *json_first)
{
	pprpc_stats *s = NULL;
	int64_t added = 0;
	int rc = pprpc_stats_get(r->c, &s), nb;

	if (rc < 0) {
		pprpc_err(r->c, "stats_get", rc);
		return -1;
	}
	nb = pprpc_stats_count(s, "boundaries");
	printf("rank %s (%s): staging %" PRIu64 " MiB, %" PRIu64 " MiB in use; %d boundar%s\n", name, r->addr,
	       pprpc_stats_u64(s, NULL, 0, "staging_bytes") / MIB, pprpc_stats_u64(s, NULL, 0, "staging_used") / MIB,
	       nb, nb == 1 ? "y" : "ies");
	for (int i = 0; i < nb; i++) {
#define B(name) pprpc_stats_u64(s, "boundaries", i, name)
		const char *bpeer = pprpc_stats_str(s, "boundaries", i, "peer");
		const char *bdir = pprpc_stats_str(s, "boundaries", i, "direction");
		const char *bpath = pprpc_stats_str(s, "boundaries", i, "path");
		int i0 = r->stats0 ? stats_item(r->stats0, "boundaries", "peer", bpeer, "direction", bdir) : -1;
		uint64_t t0 = i0 < 0 ? 0 : pprpc_stats_u64(r->stats0, "boundaries", i0, "transfers");
		uint64_t by0 = i0 < 0 ? 0 : pprpc_stats_u64(r->stats0, "boundaries", i0, "bytes");
		uint64_t us0 = i0 < 0 ? 0 : pprpc_stats_u64(r->stats0, "boundaries", i0, "time_us");
		uint64_t dt = B("transfers") - t0, dby = B("bytes") - by0, dus = B("time_us") - us0;

		printf("  %-4s %-22s %-8s transfers %8" PRIu64 "  bytes %14" PRIu64 "  time %10.3f s  "
		       "errors %" PRIu64 "  | this run: +%" PRIu64 " transfers, +%.1f MiB, %.1f MiB/s\n",
		       bdir, bpeer, bpath, B("transfers"), B("bytes"), (double)B("time_us") * 1e-6, B("errors"), dt,
		       (double)dby / MIB, dus ? (double)dby / MIB / ((double)dus * 1e-6) : 0.0);
		if (!strcmp(bpeer, peer) && !strcmp(bdir, dir))
			added = (int64_t)dt;
		if (json) {
			fprintf(json, "%s\n    {\"rank\": \"%s\", \"addr\": \"%s\", \"direction\": \"%s\", "
				      "\"peer\": \"%s\", \"path\": \"%s\", \"transfers\": %" PRIu64
				      ", \"bytes\": %" PRIu64 ", \"time_us\": %" PRIu64 ", \"errors\": %" PRIu64
				      ", \"run_transfers\": %" PRIu64 ", \"run_bytes\": %" PRIu64
				      ", \"run_time_us\": %" PRIu64 "}",
				*json_first ? "" : ",", name, r->addr, bdir, bpeer, bpath, B("transfers"), B("bytes"),
				B("time_us"), B("errors"), dt, dby, dus);
			*json_first = 0;
		}
#undef B
	}
	pprpc_stats_free(s);
	return added;
}

/* ---- output ------------------------------------------------------------------------------------ */

static void print_header(const struct ctx *x, int spawned, const char *spawn_args)
{
	printf("bench-p2p: A %s -> B %s (%s), %ld CPUs online\n", x->a.addr, x->b.addr,
	       spawned ? spawn_args : "daemons not ours", sysconf(_SC_NPROCESSORS_ONLN));
	printf("p2p:    send_async(A) + recv_async(B), timed until synchronize(B) returned "
	       "(synchronize(A) right after, untimed)\n");
	printf("client: tensor_get(A -> host) + tensor_set(host -> B), timed to the SET's return\n");
	printf("%d pairs per size (%d from %" PRIu64 " MiB), alternating order; MiB/s = medians; "
	       "ratio = p2p/client throughput per pair: median [min..max], > 1 = p2p faster\n\n",
	       x->pairs, x->pairs_large, LARGE_SIZE / MIB);
	printf("%6s | %5s | %10s | %12s | %24s | %s\n", "size", "pairs", "p2p MiB/s", "client MiB/s",
	       "ratio p2p/client", "parity");
	printf("-------+-------+------------+--------------+--------------------------+-------\n");
	fflush(stdout);
}

static void print_row(const struct result *r)
{
	char lbl[32], rb[48];

	size_label(r->size, lbl, sizeof(lbl));
	if (r->skipped) {
		printf("%6s | skipped: %s\n", lbl, r->skip_msg);
		fflush(stdout);
		return;
	}
	snprintf(rb, sizeof(rb), "%.3f [%.3f..%.3f]", r->ratio_med, r->ratio_min, r->ratio_max);
	printf("%6s | %5d | %10.1f | %12.1f | %24s | %s\n", lbl, r->pairs, r->p2p_med, r->cli_med, rb,
	       r->parity_ok ? "ok" : "FAIL");
	fflush(stdout);
}

static void print_lat_header(int iters)
{
	printf("\nsmall-transfer latency: %d round trips per path, alternating; us; "
	       "ratio = p2p/client time, medians of blocks of %d: median [min..max], < 1 = p2p faster\n",
	       iters, LAT_BLOCK);
	printf("%6s | %9s %9s | %9s %9s | %24s | %s\n", "size", "p2p p50", "p2p p99", "cli p50",
	       "cli p99", "ratio p2p/client", "parity");
	printf("-------+---------------------+---------------------+--------------------------+-------\n");
	fflush(stdout);
}

static void print_lat_row(const struct lat *l)
{
	char lbl[32], rb[48];

	size_label(l->size, lbl, sizeof(lbl));
	snprintf(rb, sizeof(rb), "%.3f [%.3f..%.3f]", l->ratio_med, l->ratio_min, l->ratio_max);
	printf("%6s | %9.1f %9.1f | %9.1f %9.1f | %24s | %s\n", lbl, l->p2p_p50, l->p2p_p99, l->cli_p50,
	       l->cli_p99, rb, l->bad ? "FAIL" : "ok");
	fflush(stdout);
}

static void json_list(FILE *f, const double *v, int n, double scale_num, int invert)
{
	fputc('[', f);
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%.4f", i ? ", " : "", invert ? scale_num / v[i] : v[i] * scale_num);
	fputc(']', f);
}

static void json_results(FILE *f, const struct result *res, int n)
{
	fprintf(f, "  \"results\": [");
	for (int i = 0; i < n; i++) {
		const struct result *r = &res[i];
		double mib = (double)r->size / (double)MIB;

		fprintf(f, "%s\n    {\"size_bytes\": %" PRIu64 ", \"skipped\": %s", i ? "," : "", r->size,
			r->skipped ? "true" : "false");
		if (r->skipped) {
			fprintf(f, ", \"skip_reason\": \"");
			for (const char *p = r->skip_msg; *p; p++)
				fprintf(f, (*p == '"' || *p == '\\') ? "\\%c" : "%c", *p);
			fprintf(f, "\"}");
			continue;
		}
		fprintf(f, ", \"pairs\": %d, \"parity_ok\": %s,\n", r->pairs, r->parity_ok ? "true" : "false");
		fprintf(f, "     \"p2p_median_mib_s\": %.3f, \"client_median_mib_s\": %.3f,\n", r->p2p_med,
			r->cli_med);
		fprintf(f, "     \"ratio_median\": %.4f, \"ratio_min\": %.4f, \"ratio_max\": %.4f,\n",
			r->ratio_med, r->ratio_min, r->ratio_max);
		fprintf(f, "     \"p2p_mib_s\": ");
		json_list(f, r->p2p_s, r->pairs, mib, 1);
		fprintf(f, ",\n     \"p2p_both_mib_s\": ");
		json_list(f, r->p2p_both_s, r->pairs, mib, 1);
		fprintf(f, ",\n     \"client_mib_s\": ");
		json_list(f, r->cli_s, r->pairs, mib, 1);
		fprintf(f, ",\n     \"ratio\": ");
		json_list(f, r->ratio, r->pairs, 1.0, 0);
		fprintf(f, "}");
	}
	fprintf(f, "\n  ],\n");
}

static void json_lat(FILE *f, const struct lat *lat, int n)
{
	fprintf(f, "  \"latency\": [");
	for (int i = 0; i < n; i++) {
		const struct lat *l = &lat[i];

		fprintf(f, "%s\n    {\"size_bytes\": %" PRIu64 ", \"iters\": %d, \"parity_ok\": %s,\n", i ? "," : "",
			l->size, l->iters, l->bad ? "false" : "true");
		fprintf(f, "     \"p2p_p50_us\": %.3f, \"p2p_p99_us\": %.3f, \"client_p50_us\": %.3f, "
			   "\"client_p99_us\": %.3f,\n",
			l->p2p_p50, l->p2p_p99, l->cli_p50, l->cli_p99);
		fprintf(f, "     \"ratio_median\": %.4f, \"ratio_min\": %.4f, \"ratio_max\": %.4f, "
			   "\"block_ratio\": ",
			l->ratio_med, l->ratio_min, l->ratio_max);
		json_list(f, l->block_ratio, l->nblocks, 1.0, 0);
		fprintf(f, "}");
	}
	fprintf(f, "\n  ],\n");
}

/* ---- main ------------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench-p2p [options]\n"
		"  --ranks A,B          use two running pprpcd (HOST:PORT each; they must reach each other)\n"
		"                       default: start two on 127.0.0.1:0\n"
		"  --pprpcd PATH        daemon binary to start (default: next to this program, $PPRPCD, PATH)\n"
		"  --sizes LIST         transfer sizes, bytes with an optional K/M/G suffix\n"
		"                       (default 4K,64K,1M,16M,256M,1G)\n"
		"  --pairs K            interleaved pairs per size (default 7)\n"
		"  --pairs-large K      pairs per size from 512 MiB on (default 3)\n"
		"  --lat-iters N        round trips per path for the 4 KiB / 64 B latency (default 500; 0 = skip)\n"
		"  --burst K            also, per size, K p2p transfers back to back (one synchronize):\n"
		"                       the steady-state throughput, and the IPC copies' own (default 0 = skip)\n"
		"  --floor-mib N        spawned daemons' --memory-floor-mib (default 1024)\n"
		"  --staging-mib N      spawned daemons' --staging-mib (default: the daemon's)\n"
		"  --devices DEV,DEV    spawned daemons' devices, A then B (e.g. cuda:0,cuda:1: GPU to GPU)\n"
		"  --json FILE          also write the results as JSON\n"
		"  --help               this text\n"
		"Exit status: 0 ok, 1 a parity check failed, 2 usage or setup error.\n");
}

static int parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_sizes(const char *s, uint64_t *sizes, int *n)
{
	char *end;

	*n = 0;
	while (*s) {
		unsigned long long v;
		uint64_t mul = 1;

		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno || end == s || *s == '-')
			return -1;
		switch (*end) {
		case 'k': case 'K': mul = KIB; end++; break;
		case 'm': case 'M': mul = MIB; end++; break;
		case 'g': case 'G': mul = GIB; end++; break;
		default: break;
		}
		if (v == 0 || v > (16 * GIB) / mul || *n >= MAX_SIZES || (*end && *end != ','))
			return -1;
		sizes[(*n)++] = (uint64_t)v * mul;
		s = *end ? end + 1 : end;
	}
	return *n > 0 ? 0 : -1;
}

static int parse_ranks(const char *s, char *a, char *b, size_t len)
{
	const char *comma = strchr(s, ',');

	if (!comma || comma == s || !comma[1] || strchr(comma + 1, ',') || (size_t)(comma - s) >= len ||
	    strlen(comma + 1) >= len)
		return -1;
	snprintf(a, len, "%.*s", (int)(comma - s), s);
	snprintf(b, len, "%s", comma + 1);
	return 0;
}

static int connect_rank(struct rank *r, const char *name)
{
	char err[256] = "";
	pprpc_connect_opts o = { .client_name = "bench-p2p", .err_buf = err, .err_len = sizeof(err) };
	int rc = pprpc_connect(r->addr, &o, &r->c);

	if (rc < 0) {
		fprintf(stderr, "bench-p2p: connect rank %s (%s): %s (%s)\n", name, r->addr, pprpc_strerror(rc),
			err);
		return -1;
	}
	return 0;
}

/* The p2p path must exist before it can be measured: caps and a probe. */
static int check_p2p(struct ctx *x)
{
	pprpc_caps ca, cb;
	int rc;

	if (pprpc_get_caps(x->a.c, &ca) < 0 || pprpc_get_caps(x->b.c, &cb) < 0 || !ca.p2p || !cb.p2p) {
		fprintf(stderr, "bench-p2p: a daemon does not advertise p2p (A: %d, B: %d)\n", ca.p2p, cb.p2p);
		return -1;
	}
	rc = pprpc_probe_rank(x->b.c, x->a.addr, 5000);
	if (rc < 0)
		return pprpc_err(x->b.c, "probe_rank(B -> A)", rc);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "ranks", required_argument, NULL, 'r' },       { "pprpcd", required_argument, NULL, 'p' },
		{ "sizes", required_argument, NULL, 's' },       { "pairs", required_argument, NULL, 'k' },
		{ "pairs-large", required_argument, NULL, 'K' }, { "lat-iters", required_argument, NULL, 'n' },
		{ "floor-mib", required_argument, NULL, 'f' },   { "staging-mib", required_argument, NULL, 'S' },
		{ "json", required_argument, NULL, 'j' },        { "help", no_argument, NULL, 'h' },
		{ "devices", required_argument, NULL, 'D' },     { "burst", required_argument, NULL, 'B' },
		{ NULL, 0, NULL, 0 },
	};
	static struct result res[MAX_SIZES];
	static const uint64_t lat_sizes[2] = { 4096, 64 };
	struct lat lat[2];
	const char *ranks = NULL, *bin = NULL, *json = NULL;
	char binbuf[4096], addr_a[128], addr_b[128], floor_s[24] = "1024", staging_s[24] = "";
	char spawn_args[256], devs[2][32] = { "", "" };
	uint64_t sizes[MAX_SIZES];
	struct ctx x = { .pairs = 7, .pairs_large = 3, .lat_iters = 500 };
	int nsizes = 0, opt, ret = 2, parity_ok = 1, done = 0, lat_done = 0, v;
	int64_t sent_added = -1, recv_added = -1;
	FILE *jf = NULL, *bj = NULL;
	char *bjson = NULL;
	size_t bjson_len = 0;

	memset(lat, 0, sizeof(lat));
	parse_sizes("4K,64K,1M,16M,256M,1G", sizes, &nsizes);
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'r': ranks = optarg; break;
		case 'p': bin = optarg; break;
		case 'j': json = optarg; break;
		case 'D':
			if (parse_ranks(optarg, devs[0], devs[1], sizeof(devs[0])) < 0) {
				fprintf(stderr, "bench-p2p: --devices: expected DEV,DEV (e.g. cuda:0,cuda:1)\n");
				return 2;
			}
			break;
		case 's':
			if (parse_sizes(optarg, sizes, &nsizes) < 0) {
				fprintf(stderr, "bench-p2p: --sizes: expected up to %d sizes like 4K,1M,1G (max 16G)\n",
					MAX_SIZES);
				return 2;
			}
			break;
		case 'k':
		case 'K':
			if (parse_int(optarg, 1, MAX_PAIRS, &v) < 0) {
				fprintf(stderr, "bench-p2p: --%s: expected 1..%d\n", opt == 'k' ? "pairs" : "pairs-large",
					MAX_PAIRS);
				return 2;
			}
			*(opt == 'k' ? &x.pairs : &x.pairs_large) = v;
			break;
		case 'B':
			if (parse_int(optarg, 0, 64, &x.burst) < 0) {
				fprintf(stderr, "bench-p2p: --burst: expected 0..64\n");
				return 2;
			}
			break;
		case 'n':
			if (parse_int(optarg, 0, MAX_LAT_ITERS, &x.lat_iters) < 0) {
				fprintf(stderr, "bench-p2p: --lat-iters: expected 0..%d\n", MAX_LAT_ITERS);
				return 2;
			}
			break;
		case 'f':
		case 'S':
			if (parse_int(optarg, opt == 'f' ? 0 : 1, 1 << 20, &v) < 0) {
				fprintf(stderr, "bench-p2p: --%s: expected a number of MiB\n",
					opt == 'f' ? "floor-mib" : "staging-mib");
				return 2;
			}
			snprintf(opt == 'f' ? floor_s : staging_s, sizeof(floor_s), "%d", v);
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (ranks && parse_ranks(ranks, addr_a, addr_b, sizeof(addr_a)) < 0) {
		fprintf(stderr, "bench-p2p: --ranks: expected HOST:PORT,HOST:PORT\n");
		return 2;
	}
	if (!bin)
		bin = spawn_default_bin(argv[0], binbuf, sizeof(binbuf));
	signal(SIGPIPE, SIG_IGN);
	/* Ids unique among this source's transfers in flight, even next to
	 * another client of the same daemons. */
	x.next_id = ((uint64_t)getpid() << 32) | 1;

	if (ranks) {
		x.a.addr = addr_a;
		x.b.addr = addr_b;
		spawn_args[0] = '\0';
	} else {
		struct rank *rs[2] = { &x.a, &x.b };
		char err[512];

		snprintf(spawn_args, sizeof(spawn_args), "spawned: --memory-floor-mib %s%s%s%s%s,%s", floor_s,
			 staging_s[0] ? " --staging-mib " : "", staging_s, devs[0][0] ? "; devices " : "", devs[0],
			 devs[1]);
		for (int i = 0; i < 2; i++) {
			const char *extra[7] = { "--memory-floor-mib", floor_s };
			int k = 2;

			if (staging_s[0]) {
				extra[k++] = "--staging-mib";
				extra[k++] = staging_s;
			}
			if (devs[i][0]) {
				extra[k++] = "--devices";
				extra[k++] = devs[i];
			}
			extra[k] = NULL;
			if (spawn_daemon(bin, extra, 20000, &rs[i]->d, err, sizeof(err)) < 0) {
				fprintf(stderr, "bench-p2p: %s\n", err);
				spawn_dump_log(&rs[i]->d);
				goto out;
			}
			rs[i]->addr = rs[i]->d.addr;
		}
	}
	if (connect_rank(&x.a, "A") < 0 || connect_rank(&x.b, "B") < 0 || check_p2p(&x) < 0)
		goto out;
	if (pprpc_stats_get(x.a.c, &x.a.stats0) < 0 || pprpc_stats_get(x.b.c, &x.b.stats0) < 0) {
		fprintf(stderr, "bench-p2p: stats_get failed\n");
		goto out;
	}

	print_header(&x, x.a.d.pid > 0, spawn_args);
	for (int i = 0; i < nsizes; i++) {
		uint64_t cb0 = 0, cu0 = 0, cb1 = 0, cu1 = 0;

		memset(&res[i], 0, sizeof(res[i]));
		res[i].size = sizes[i];
		recv_copy_stats(&x.b, x.a.addr, &cb0, &cu0);
		if (measure(&x, &res[i]) < 0)
			goto out;
		done++;
		print_row(&res[i]);
		/* IPC (GPU to GPU on one host): the copies' own throughput at B,
		 * next to the end-to-end figure above (which adds the RPCs). */
		recv_copy_stats(&x.b, x.a.addr, &cb1, &cu1);
		if (cu1 > cu0)
			printf("       | IPC copies at B: %.3f MiB in %.3f ms = %.1f GB/s\n", (double)(cb1 - cb0) / MIB,
			       (double)(cu1 - cu0) * 1e-3, (double)(cb1 - cb0) / ((double)(cu1 - cu0) * 1e-6) / 1e9);
		if (!res[i].skipped && !res[i].parity_ok) {
			fprintf(stderr, "bench-p2p: PARITY FAILURE at %" PRIu64 " bytes: %s\n", res[i].size,
				res[i].parity_msg);
			parity_ok = 0;
		}
		if (x.burst && !res[i].skipped) {
			double bs = 0;
			int bpar = 0, brc;

			recv_copy_stats(&x.b, x.a.addr, &cb0, &cu0);
			brc = burst(&x, res[i].size, x.burst, &bs, &bpar);
			if (brc < 0)
				goto out;
			recv_copy_stats(&x.b, x.a.addr, &cb1, &cu1);
			if (brc == 1) {
				printf("       | burst: skipped (memory refused)\n");
			} else {
				printf("       | burst of %d back to back: %.1f GB/s end to end (%.3f ms), parity %s", x.burst,
				       (double)res[i].size * x.burst / bs / 1e9, bs * 1e3, bpar ? "ok" : "FAIL");
				if (cu1 > cu0)
					printf("; by IPC %.0f of %.0f MiB, IPC copies at B: %.1f GB/s", (double)(cb1 - cb0) / MIB,
					       (double)res[i].size * x.burst / MIB,
					       (double)(cb1 - cb0) / ((double)(cu1 - cu0) * 1e-6) / 1e9);
				printf("\n");
				if (!bpar) {
					fprintf(stderr, "bench-p2p: PARITY FAILURE in the burst at %" PRIu64 " bytes\n",
						res[i].size);
					parity_ok = 0;
				}
			}
		}
	}

	if (x.lat_iters > 0) {
		print_lat_header(x.lat_iters);
		for (int i = 0; i < 2; i++) {
			struct lat *l = &lat[i];

			l->size = lat_sizes[i];
			l->iters = x.lat_iters;
			l->nblocks = l->iters >= LAT_BLOCK ? l->iters / LAT_BLOCK : 1;
			l->p2p_us = calloc((size_t)l->iters, sizeof(double));
			l->cli_us = calloc((size_t)l->iters, sizeof(double));
			l->block_ratio = calloc((size_t)l->nblocks, sizeof(double));
			if (!l->p2p_us || !l->cli_us || !l->block_ratio) {
				fprintf(stderr, "bench-p2p: out of memory\n");
				goto out;
			}
			if (measure_lat(&x, l) < 0)
				goto out;
			lat_done++;
			print_lat_row(l);
			if (l->bad) {
				fprintf(stderr, "bench-p2p: PARITY FAILURE in the %" PRIu64 "-byte latency run: %" PRIu64
						" bad transfers; first: %s\n",
					l->size, l->bad, l->first_bad);
				parity_ok = 0;
			}
		}
	}

	/* The boundary rows go to the JSON file at the end, after the results. */
	if (json && !(bj = open_memstream(&bjson, &bjson_len))) {
		fprintf(stderr, "bench-p2p: open_memstream: %s\n", strerror(errno));
		goto out;
	}
	printf("\nboundary statistics (pprpc_stats_get), with what this run added:\n");
	{
		int first = 1;

		sent_added = print_bstats(&x.a, "A", x.b.addr, "send", bj, &first);
		recv_added = print_bstats(&x.b, "B", x.a.addr, "recv", bj, &first);
	}
	if (bj && fclose(bj) != 0)
		bjson_len = 0;
	bj = NULL;
	printf("p2p transfers completed by this run: %" PRIu64 "; A's send to B added %" PRId64
	       ", B's recv from A added %" PRId64 "%s\n",
	       x.p2p_done, sent_added, recv_added,
	       (sent_added == (int64_t)x.p2p_done && recv_added == (int64_t)x.p2p_done)
		       ? " (match: the bytes went daemon to daemon)"
		       : " (MISMATCH: not every p2p transfer is accounted for; another client?)");
	printf("\nparity: %s\n", parity_ok ? "all ok" : "FAILED");
	ret = parity_ok ? 0 : 1;
out:
	if (json && (done > 0 || lat_done > 0)) {
		jf = fopen(json, "w");
		if (!jf) {
			fprintf(stderr, "bench-p2p: %s: %s\n", json, strerror(errno));
			if (ret == 0)
				ret = 2;
		}
	}
	if (jf) {
		fprintf(jf, "{\n  \"bench\": \"p2p\",\n");
		fprintf(jf, "  \"rank_a\": \"%s\",\n  \"rank_b\": \"%s\",\n  \"spawned\": %s,\n",
			x.a.addr ? x.a.addr : "", x.b.addr ? x.b.addr : "", x.a.d.pid > 0 ? "true" : "false");
		fprintf(jf, "  \"cpus_online\": %ld,\n  \"pairs\": %d,\n  \"pairs_large\": %d,\n"
			    "  \"large_from_bytes\": %" PRIu64 ",\n",
			sysconf(_SC_NPROCESSORS_ONLN), x.pairs, x.pairs_large, LARGE_SIZE);
		fprintf(jf, "  \"timing\": \"p2p: send_async(A)+recv_async(B) until synchronize(B) returned; "
			    "p2p_both: until synchronize(A) returned after that; client: tensor_get(A)+tensor_set(B)\",\n");
		fprintf(jf, "  \"units\": \"MiB/s (2^20 bytes per second), us; ratio = p2p/client throughput "
			    "per pair (latency: p2p/client time per block)\",\n");
		json_results(jf, res, done);
		json_lat(jf, lat, lat_done);
		fprintf(jf, "  \"boundaries\": [%.*s\n  ],\n", (int)bjson_len, bjson ? bjson : "");
		fprintf(jf, "  \"p2p_transfers\": %" PRIu64 ",\n  \"parity_ok\": %s\n}\n", x.p2p_done,
			parity_ok ? "true" : "false");
		if (fclose(jf) != 0) {
			fprintf(stderr, "bench-p2p: %s: write failed\n", json);
			if (ret == 0)
				ret = 2;
		}
	}
	pprpc_close(x.a.c);
	pprpc_close(x.b.c);
	pprpc_stats_free(x.a.stats0);
	pprpc_stats_free(x.b.stats0);
	if (x.a.d.pid > 0 || x.a.d.dir[0])
		spawn_stop(&x.a.d, 0);
	if (x.b.d.pid > 0 || x.b.d.dir[0])
		spawn_stop(&x.b.d, 0);
	if (bj)
		fclose(bj);
	free(bjson);
	for (int i = 0; i < 2; i++) {
		free(lat[i].p2p_us);
		free(lat[i].cli_us);
		free(lat[i].block_ratio);
	}
	return ret;
}
