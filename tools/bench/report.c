/*
 * tools/bench/report.c — pprpc-bench's outputs: the daemons' counters
 * around each run, the table, the JSON results, the Perfetto trace and the
 * SVG Gantt chart of the traced pair (writers in tools/common/report.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"
#include "tools/common/measure.h"

const char *const mode_names[2] = { "seq", "pp" };

int snap_rank(struct ctx *x, int s, struct snap *o)
{
	pprpc_stats *st;
	int rc = pprpc_stats_get(x->st[s].c, &st);

	memset(o, 0, sizeof(*o));
	if (rc < 0)
		return rpc_fail(x, s, "stats_get", rc);
	o->creates = pprpc_stats_u64(st, "devices", 0, "graph_creates");
	o->runs = pprpc_stats_u64(st, "devices", 0, "graph_runs");
	o->captures = pprpc_stats_u64(st, "devices", 0, "graph_captures");
	o->replays = pprpc_stats_u64(st, "devices", 0, "graph_replays");
	o->free_bytes = pprpc_stats_u64(st, "devices", 0, "info.free_bytes");
	for (int i = 0; i < pprpc_stats_count(st, "boundaries"); i++) {
		if (!strcmp(pprpc_stats_str(st, "boundaries", i, "direction"), "send")) {
			o->b.bytes += pprpc_stats_u64(st, "boundaries", i, "bytes");
			o->b.transfers += pprpc_stats_u64(st, "boundaries", i, "transfers");
			o->b.send_us += pprpc_stats_u64(st, "boundaries", i, "time_us");
		} else {
			o->b.recv_us += pprpc_stats_u64(st, "boundaries", i, "time_us");
		}
	}
	pprpc_stats_free(st);
	return 0;
}

void acc_stats(struct ctx *x, struct mode_acc *a, const struct snap *before)
{
	for (int s = 0; s < x->S; s++) {
		struct snap n;

		if (snap_rank(x, s, &n) < 0)
			continue;
		a->creates[s] += n.creates - before[s].creates;
		a->runs[s] += n.runs - before[s].runs;
		a->captures[s] += n.captures - before[s].captures;
		a->replays[s] += n.replays - before[s].replays;
		if (!a->freemin[s] || n.free_bytes < a->freemin[s])
			a->freemin[s] = n.free_bytes;
		a->b[s].bytes += n.b.bytes - before[s].b.bytes;
		a->b[s].transfers += n.b.transfers - before[s].b.transfers;
		a->b[s].send_us += n.b.send_us - before[s].b.send_us;
		a->b[s].recv_us += n.b.recv_us - before[s].b.recv_us;
	}
}

double ideal_ratio(const struct ctx *x)
{
	double pp = 0;

	for (int u0 = 0; u0 < x->nub; u0 = batch_end(x, u0)) {
		int u1 = batch_end(x, u0);
		int toks = (u1 == x->nub ? x->m.P : u1 * x->m.ub) - u0 * x->m.ub;

		pp += toks + (double)(x->S - 1) * (toks < x->m.ub ? toks : x->m.ub);
	}
	return pp > 0 ? x->S * (double)x->m.P / pp : 0;
}

void print_table(const struct ctx *x, const struct mode_acc *acc, const struct ratio *q)
{
	printf("\n%-5s %12s %10s %12s %18s %8s %7s\n", "mode", "prompt_tok/s", "ttft_ms", "decode_tok/s",
	       "token_hash", "rpc_err", "runs");
	for (int mo = 0; mo < 2; mo++) {
		const struct mode_acc *a = &acc[mo];

		printf("%-5s %12.1f %10.2f %12.2f %016llx %8d %7d%s\n", mode_names[mo], median(a->tps, a->nrun),
		       median(a->ttft, a->nrun) * 1e3, median(a->dtps, a->nrun), (unsigned long long)a->hash,
		       a->rpc_errors, a->nrun, a->hash_mismatch ? "  HASH MISMATCH" : "");
	}
	printf("(medians over %d pairs after %d warm-up pair%s; graphs built once per (step, slot) before the pairs:",
	       acc[0].nrun, x->m.warmup, x->m.warmup == 1 ? "" : "s");
	for (int s = 0; s < x->S; s++)
		printf(" rank %d %llu", s, (unsigned long long)x->st[s].setup_creates);
	printf("; creates below are during the timed runs)\n");
	printf("\n%-5s %4s %-22s %14s %9s %9s %9s %9s\n", "mode", "rank", "addr", "free_min_MiB", "creates", "runs",
	       "captures", "replays");
	for (int mo = 0; mo < 2; mo++)
		for (int s = 0; s < x->S; s++)
			printf("%-5s %4d %-22s %14.1f %9llu %9llu %9llu %9llu\n", mode_names[mo], s, x->st[s].addr,
			       acc[mo].freemin[s] / 1048576.0, (unsigned long long)acc[mo].creates[s],
			       (unsigned long long)acc[mo].runs[s], (unsigned long long)acc[mo].captures[s],
			       (unsigned long long)acc[mo].replays[s]);
	if (x->S > 1) {
		printf("\n%-5s %-9s %10s %12s %12s %12s\n", "mode", "boundary", "transfers", "MiB", "send_ms", "recv_ms");
		for (int mo = 0; mo < 2; mo++)
			for (int s = 0; s + 1 < x->S; s++)
				printf("%-5s %4d->%-3d %10llu %12.3f %12.2f %12.2f\n", mode_names[mo], s, s + 1,
				       (unsigned long long)acc[mo].b[s].transfers, acc[mo].b[s].bytes / 1048576.0,
				       acc[mo].b[s].send_us / 1e3, acc[mo].b[s + 1].recv_us / 1e3);
	}
	printf("\npp/seq prompt throughput: geomean %.3f, bootstrap 95%% CI [%.3f, %.3f] over %d pairs; "
	       "ideal S*M/(S+M-1) %.3f\n", q->gm, q->lo, q->hi, q->pairs, q->ideal);
}

static void json_mode(FILE *f, const struct ctx *x, const struct mode_acc *a)
{
	fprintf(f, "{\"prompt_tok_s\":%.3f,\"ttft_ms\":%.4f,\"decode_tok_s\":%.3f,\"token_hash\":\"%016llx\","
		   "\"hash_mismatch\":%d,\"rpc_errors\":%d,\"runs\":%d,\"prompt_tok_s_pairs\":[",
		median(a->tps, a->nrun), median(a->ttft, a->nrun) * 1e3, median(a->dtps, a->nrun),
		(unsigned long long)a->hash, a->hash_mismatch, a->rpc_errors, a->nrun);
	for (int i = 0; i < a->nrun; i++)
		fprintf(f, "%s%.3f", i ? "," : "", a->tps[i]);
	fprintf(f, "],\"ranks\":[");
	for (int s = 0; s < x->S; s++) {
		fprintf(f, "%s{\"addr\":", s ? "," : "");
		json_string(f, x->st[s].addr);
		fprintf(f, ",\"free_bytes_min\":%llu,\"graph_creates_setup\":%llu,\"graph_creates\":%llu,"
			   "\"graph_runs\":%llu,\"graph_captures\":%llu,\"graph_replays\":%llu}",
			(unsigned long long)a->freemin[s], (unsigned long long)x->st[s].setup_creates,
			(unsigned long long)a->creates[s], (unsigned long long)a->runs[s],
			(unsigned long long)a->captures[s], (unsigned long long)a->replays[s]);
	}
	fprintf(f, "],\"boundaries\":[");
	for (int s = 0; s + 1 < x->S; s++)
		fprintf(f, "%s{\"from\":%d,\"to\":%d,\"transfers\":%llu,\"bytes\":%llu,\"send_us\":%llu,\"recv_us\":%llu}",
			s ? "," : "", s, s + 1, (unsigned long long)a->b[s].transfers, (unsigned long long)a->b[s].bytes,
			(unsigned long long)a->b[s].send_us, (unsigned long long)a->b[s + 1].recv_us);
	fprintf(f, "]}");
}

void json_result(FILE *f, const struct ctx *x, const struct mode_acc *acc, const struct ratio *q, int ok)
{
	fprintf(f, "{\"ubatch\":%d,\"ubatches\":%d,\"warmup_pairs\":%d,\"ok\":%s,\"hash_match\":%s,\"seq\":", x->m.ub,
		x->nub, x->m.warmup, ok ? "true" : "false",
		acc[0].hash == acc[1].hash && !acc[0].hash_mismatch && !acc[1].hash_mismatch ? "true" : "false");
	json_mode(f, x, &acc[0]);
	fprintf(f, ",\"pp\":");
	json_mode(f, x, &acc[1]);
	fprintf(f, ",\"ratio_pp_seq\":{\"geomean\":%.5f,\"ci95_lo\":%.5f,\"ci95_hi\":%.5f,\"pairs\":%d,\"ideal\":%.5f}}",
		q->gm, q->lo, q->hi, q->pairs, q->ideal);
}

int write_trace(const struct ctx *x, const char *path)
{
	struct trace t;
	char name[96];

	if (trace_open(&t, path, x->t0) < 0) {
		perror(path);
		return -1;
	}
	for (int s = 0; s < x->S; s++) {
		snprintf(name, sizeof(name), "rank %d %s", s, x->st[s].addr);
		trace_process(&t, s + 1, name);
		for (int mo = 0; mo < 2; mo++)
			trace_thread(&t, s + 1, mo + 1, mode_names[mo]);
	}
	for (int i = 0; i < x->nsl; i++) {
		const struct slice *sl = &x->sl[i];
		char args[32];

		if (sl->u >= 0)
			snprintf(name, sizeof(name), "ubatch %d", sl->u);
		else
			snprintf(name, sizeof(name), "decode %d", -1 - sl->u);
		snprintf(args, sizeof(args), "\"stage\":%d", sl->s);
		trace_slice(&t, sl->s + 1, sl->mode + 1, name, sl->a, sl->b, args);
	}
	if (trace_close(&t) < 0) {
		fprintf(stderr, "pprpc-bench: %s: write failed\n", path);
		return -1;
	}
	return 0;
}

int write_svg(const struct ctx *x, const char *path)
{
	struct gantt_slice *g = calloc((size_t)x->nsl + 1, sizeof(*g));
	char title[160];
	int n = 0, rc;

	if (!g)
		return -1;
	for (int i = 0; i < x->nsl; i++)
		if (x->sl[i].u >= 0)   /* the prefill */
			g[n++] = (struct gantt_slice){ x->sl[i].mode, x->sl[i].s, x->sl[i].u, x->sl[i].a, x->sl[i].b };
	snprintf(title, sizeof(title), "pprpc-bench prefill, traced pair: %d ubatches of %d over %d ranks", x->nub,
		 x->m.ub, x->S);
	rc = gantt_svg(path, title, mode_names, 2, x->S, g, n);
	free(g);
	return rc;
}
