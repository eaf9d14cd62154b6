/*
 * pprpc-bench — the main benchmark: a hybrid transformer (KDA and attention
 * layers, SwiGLU MLPs, embedding + final norm + LM head + greedy ARGMAX on
 * the device) split over the ranks, run as a prefill (ubatches) then a
 * greedy decode, sequential vs pipelined, in paired A/B runs.
 *
 * This file: options, the pairs, parity and the summary.  The model and its
 * graphs, the runs and the reports live in tools/bench/ (bench.h says which
 * file does what); the bootstrap interval and the trace / SVG writers in
 * tools/common/ (shared with pp-fence-test).
 *
 * Pairs: after --warmup untimed pairs (a graph's first runs pay one-time
 * costs the pipeline has nothing to do with), each timed pair runs seq and
 * pp in alternating order; with --trace / --svg one more pair runs traced
 * and is not counted (polling the stages' timelines costs client time).
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"
#include "tools/common/bootstrap.h"
#include "tools/common/measure.h"
#include "tools/common/spawn.h"
#include "util/hash.h"
#include "util/list.h"

#define MAX_SWEEP INT_LIST_MAX

static const char usage[] =
	"usage: pprpc-bench [--ranks HOST:PORT[,...] | --spawn N] [options]\n"
	"\n"
	"Builds a hybrid transformer (KDA + attention layers with RoPE and a KV cache,\n"
	"RMSNorm, SwiGLU MLPs, embedding, LM head and greedy ARGMAX on the device) with\n"
	"seeded weights, splits its layers over the ranks, and runs a prefill of the\n"
	"prompt in ubatches plus a greedy decode, in paired seq/pp runs (alternating\n"
	"order).  Reports prompt tok/s, TTFT, decode tok/s, the output token hash (must\n"
	"match between modes), memory, RPC errors, graph reuse, stage boundaries, and\n"
	"the geometric-mean pp/seq prompt-throughput ratio with a bootstrap 95% CI next\n"
	"to the ideal S*M/(S+M-1).  Both modes run the same commands through\n"
	"pprpc_pipeline_run: pp one run per logical batch, seq one run per ubatch.\n"
	"Exit 0 when every run produced the same tokens and no RPC failed; 1 otherwise;\n"
	"2 for bad usage.\n"
	"\n"
	"  --ranks LIST           use running daemons (one stage each, in order)\n"
	"  --spawn N              start N local pprpcd (--threads 1) and stop them after\n"
	"  --spawn-devices LIST   with --spawn: rank i serves device LIST[i] (default cpu)\n"
	"  --spawn-arg ARG        with --spawn: extra daemon argument (repeatable)\n"
	"  --d-model N            hidden size (default 256)\n"
	"  --heads N              attention heads and KDA heads (default 4)\n"
	"  --head-dim N           head size (default 64)\n"
	"  --ff N                 MLP hidden size (default 2 * d-model)\n"
	"  --layers N             layers (default 8)\n"
	"  --kda-ratio R          R KDA layers per attention layer (default 3)\n"
	"  --vocab N              vocabulary (default 1024)\n"
	"  --wtype f16|bf16|q8_0  projection / embedding / head weights (default f16)\n"
	"  --split A,B,...        layers per rank (default: even)\n"
	"  --prompt-tokens N      deterministic prompt of N ids (default 256)\n"
	"  --prompt-file FILE     prompt ids (integers, whitespace or comma separated)\n"
	"  --ubatch N             prefill ubatch (default 64)\n"
	"  --batch N              logical batch (as llama_decode's n_batch): pp pipelines\n"
	"                         the ubatches of one batch and synchronizes between\n"
	"                         batches; rounded down to whole ubatches (default: the\n"
	"                         whole prompt)\n"
	"  --ubatch-sweep LIST    run the benchmark for each ubatch of LIST, skipping those\n"
	"                         whose buffers would cross a rank's memory floor\n"
	"  --gen N                generated tokens (default 8)\n"
	"  --pairs K              paired seq/pp runs (default 3)\n"
	"  --warmup N             untimed seq/pp pairs first (default 1): the first runs of\n"
	"                         a graph pay one-time costs (page faults of its scratch\n"
	"                         arena, CUDA graph capture) that are not the pipeline's\n"
	"  --seed S               weights and prompt (default 1)\n"
	"  --json FILE            results as JSON\n"
	"  --trace FILE           Chrome trace-event JSON of one extra, untimed pair\n"
	"                         (client timestamps; stage completions polled)\n"
	"  --svg FILE             SVG Gantt chart of that pair's prefill\n"
	"  --help\n";

static int32_t *read_prompt(const char *path, int *n)
{
	FILE *f = fopen(path, "r");
	int32_t *v = NULL;
	int cap = 0, c = 0;
	long t;

	if (!f)
		return NULL;
	while (fscanf(f, " %ld", &t) == 1) {
		if (c == cap) {
			int32_t *nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 256) * 4);

			if (!nv)
				break;
			v = nv;
		}
		v[c++] = (int32_t)t;
		(void)fscanf(f, " ,");
	}
	fclose(f);
	*n = c;
	return v;
}

/* One seq/pp pair (order alternating with k); timed pairs accumulate into
 * acc.  Returns 0, or -1 after a failed run. */
static int run_pair(struct ctx *x, int k, struct mode_acc *acc, struct run_res *r, uint64_t *ref_hash, int timed,
		    const char *what)
{
	for (int j = 0; j < 2; j++) {
		int mo = (k % 2) ? 1 - j : j;   /* alternate the order */
		struct mode_acc *a = &acc[mo];
		struct snap before[MAX_RANKS];
		int e0 = x->rpc_errors;

		for (int s = 0; s < x->S && timed; s++)
			snap_rank(x, s, &before[s]);
		fprintf(stderr, "\rpprpc-bench: ubatch %d %s %-3s ...          ", x->m.ub, what, mode_names[mo]);
		if (run_once(x, mo, r) < 0) {
			a->rpc_errors += x->rpc_errors - e0;
			return -1;
		}
		a->rpc_errors += x->rpc_errors - e0;
		/* Every run, timed or not, must produce the same tokens. */
		if (!*ref_hash)
			*ref_hash = r->hash;
		if (r->hash != *ref_hash)
			a->hash_mismatch = 1;
		fprintf(stderr, "\rpprpc-bench: ubatch %d %s %-3s %9.1f prompt tok/s, TTFT %.1f ms, hash %016llx   ",
			x->m.ub, what, mode_names[mo], x->m.P / r->prefill_s, r->ttft_s * 1e3,
			(unsigned long long)r->hash);
		if (!timed)
			continue;
		acc_stats(x, a, before);
		a->tps[a->nrun] = x->m.P / r->prefill_s;
		a->ttft[a->nrun] = r->ttft_s;
		a->dtps[a->nrun] = x->m.gen > 1 ? (x->m.gen - 1) / r->decode_s : 0;
		if (a->nrun == 0)
			a->hash = r->hash;
		a->nrun++;
	}
	return 0;
}

/* Run the pairs at the current ubatch; returns 1 if all runs agreed and no
 * RPC failed. */
static int bench_ubatch(struct ctx *x, FILE *json, int first_json)
{
	struct mode_acc acc[2];
	struct run_res r;
	struct ratio q;
	uint64_t ref_hash = 0;
	char what[48];
	int ok = 1, rpc0;

	memset(acc, 0, sizeof(acc));
	r.toks = calloc((size_t)x->m.gen, 4);
	if (!r.toks)
		return 0;
	rpc0 = x->rpc_errors;
	for (int s = 0; s < x->S; s++) {
		struct snap sn;

		snap_rank(x, s, &sn);
		x->st[s].setup_creates = sn.creates;
	}
	if (setup_ubatch(x) < 0) {
		teardown_ubatch(x);
		free(r.toks);
		return 0;
	}
	for (int s = 0; s < x->S; s++) {
		struct snap sn;

		snap_rank(x, s, &sn);
		x->st[s].setup_creates = sn.creates - x->st[s].setup_creates;
	}
	for (int k = 0; k < x->m.warmup && ok; k++) {
		snprintf(what, sizeof(what), "warm-up %d/%d", k + 1, x->m.warmup);
		ok = run_pair(x, k, acc, &r, &ref_hash, 0, what) == 0;
	}
	for (int k = 0; k < x->m.pairs && ok; k++) {
		snprintf(what, sizeof(what), "pair %d/%d", k + 1, x->m.pairs);
		ok = run_pair(x, k, acc, &r, &ref_hash, 1, what) == 0;
	}
	if (ok && x->trace_req) {
		x->nsl = 0;   /* the trace shows the last ubatch size's pair */
		x->trace_on = 1;
		ok = run_pair(x, 0, acc, &r, &ref_hash, 0, "traced pair") == 0;
		x->trace_on = 0;
	}
	fprintf(stderr, "\n");
	if (x->m.gen > 0 && acc[0].nrun) {
		printf("generated ids:");
		for (int i = 0; i < x->m.gen && i < 16; i++)
			printf(" %d", r.toks[i]);
		printf("%s\n", x->m.gen > 16 ? " ..." : "");
	}
	q.pairs = acc[0].nrun < acc[1].nrun ? acc[0].nrun : acc[1].nrun;
	ratio_ci(acc[1].tps, acc[0].tps, q.pairs, &q.gm, &q.lo, &q.hi);
	q.ideal = ideal_ratio(x);
	if (acc[0].hash != acc[1].hash || acc[0].hash_mismatch || acc[1].hash_mismatch || !acc[0].nrun ||
	    !acc[1].nrun)
		ok = 0;
	if (x->rpc_errors != rpc0)
		ok = 0;
	print_table(x, acc, &q);
	if (json) {
		if (!first_json)
			fputc(',', json);
		json_result(json, x, acc, &q, ok);
	}
	teardown_ubatch(x);
	free(r.toks);
	return ok;
}

/* A whole int option value; anything else is a usage error, not 0. */
static int int_arg(const char *opt, const char *v, int *out)
{
	char *e;
	long x;

	errno = 0;
	x = strtol(v, &e, 10);
	if (errno || e == v || *e || x < INT_MIN || x > INT_MAX) {
		fprintf(stderr, "pprpc-bench: %s needs an integer, got '%s'\n", opt, v);
		return -1;
	}
	*out = (int)x;
	return 0;
}

int main(int argc, char **argv)
{
	static struct ctx X;
	struct ctx *x = &X;
	struct cfg *m = &x->m;
	struct spawned sp[MAX_RANKS];
	char addrs[MAX_RANKS][64], spawn_dev[MAX_RANKS][64], binbuf[4096], err[512];
	const char *ranks = NULL, *json_path = NULL, *trace = NULL, *svg = NULL, *split = NULL;
	const char *spawn_devices = NULL, *spawn_args[16], *prompt_file = NULL, *sweep = NULL;
	int nspawn_args = 0, nspawn = 0, nranks = 0, ret = 1, splitv[MAX_RANKS], sweepv[MAX_SWEEP];
	int nsweep = 0, all_ok = 1, nrun_ub = 0;
	char skipped[MAX_SWEEP][200];
	FILE *json = NULL;

	signal(SIGPIPE, SIG_IGN);
	memset(sp, 0, sizeof(sp));
	*m = (struct cfg){ .E = 256, .H = 4, .D = 64, .F = 0, .L = 8, .ratio = 3, .V = 1024, .wtype = WT_F16,
			   .P = 256, .ub = 64, .gen = 8, .pairs = 3, .warmup = 1, .seed = 1 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		if (!v) {
			fprintf(stderr, "pprpc-bench: %s needs a value (or is unknown)\n%s", a, usage);
			return 2;
		}
		i++;
		if (!strcmp(a, "--ranks")) ranks = v;
		else if (!strcmp(a, "--spawn")) {
			if (int_arg(a, v, &nspawn) < 0)
				return 2;
		}
		else if (!strcmp(a, "--spawn-devices")) spawn_devices = v;
		else if (!strcmp(a, "--spawn-arg")) {
			if (nspawn_args == 16) {
				fprintf(stderr, "pprpc-bench: at most 16 --spawn-arg\n");
				return 2;
			}
			spawn_args[nspawn_args++] = v;
		}
		else if (!strcmp(a, "--d-model")) {
			if (int_arg(a, v, &m->E) < 0)
				return 2;
		}
		else if (!strcmp(a, "--heads")) {
			if (int_arg(a, v, &m->H) < 0)
				return 2;
		}
		else if (!strcmp(a, "--head-dim")) {
			if (int_arg(a, v, &m->D) < 0)
				return 2;
		}
		else if (!strcmp(a, "--ff")) {
			if (int_arg(a, v, &m->F) < 0)
				return 2;
		}
		else if (!strcmp(a, "--layers")) {
			if (int_arg(a, v, &m->L) < 0)
				return 2;
		}
		else if (!strcmp(a, "--kda-ratio")) {
			if (int_arg(a, v, &m->ratio) < 0)
				return 2;
		}
		else if (!strcmp(a, "--vocab")) {
			if (int_arg(a, v, &m->V) < 0)
				return 2;
		}
		else if (!strcmp(a, "--wtype")) {
			if (!strcmp(v, "f16")) m->wtype = WT_F16;
			else if (!strcmp(v, "bf16")) m->wtype = WT_BF16;
			else if (!strcmp(v, "q8_0")) m->wtype = WT_Q8;
			else {
				fprintf(stderr, "pprpc-bench: --wtype f16|bf16|q8_0\n");
				return 2;
			}
		}
		else if (!strcmp(a, "--split")) split = v;
		else if (!strcmp(a, "--prompt-tokens")) {
			if (int_arg(a, v, &m->P) < 0)
				return 2;
		}
		else if (!strcmp(a, "--prompt-file")) prompt_file = v;
		else if (!strcmp(a, "--ubatch")) {
			if (int_arg(a, v, &m->ub) < 0)
				return 2;
		}
		else if (!strcmp(a, "--batch")) {
			if (int_arg(a, v, &m->batch) < 0)
				return 2;
		}
		else if (!strcmp(a, "--ubatch-sweep")) sweep = v;
		else if (!strcmp(a, "--gen")) {
			if (int_arg(a, v, &m->gen) < 0)
				return 2;
		}
		else if (!strcmp(a, "--pairs")) {
			if (int_arg(a, v, &m->pairs) < 0)
				return 2;
		}
		else if (!strcmp(a, "--warmup")) {
			if (int_arg(a, v, &m->warmup) < 0)
				return 2;
		}
		else if (!strcmp(a, "--seed")) {
			char *e;

			errno = 0;
			m->seed = strtoull(v, &e, 10);
			if (errno || e == v || *e || *v == '-') {
				fprintf(stderr, "pprpc-bench: --seed needs an unsigned integer, got '%s'\n", v);
				return 2;
			}
		}
		else if (!strcmp(a, "--json")) json_path = v;
		else if (!strcmp(a, "--trace")) trace = v;
		else if (!strcmp(a, "--svg")) svg = v;
		else {
			fprintf(stderr, "pprpc-bench: unknown option %s\n%s", a, usage);
			return 2;
		}
	}
	if (!m->F)
		m->F = 2 * m->E;
	if (!ranks == !nspawn || nspawn < 0 || nspawn > MAX_RANKS) {
		fprintf(stderr, "pprpc-bench: give one of --ranks LIST or --spawn N (1..%d)\n", MAX_RANKS);
		return 2;
	}
	if (m->E < 1 || m->E > 65536 || m->H < 1 || m->D < 2 || m->D % 2 || m->L < 1 || m->L > MAX_LAYERS ||
	    m->ratio < 0 || m->V < 2 || m->F < 1 || m->ub < 1 || m->gen < 1 || m->pairs < 1 ||
	    m->pairs > MAX_PAIRS || m->P < 1 || m->batch < 0 || m->warmup < 0 || m->warmup > 16) {
		fprintf(stderr, "pprpc-bench: bad model or run sizes (see --help; --pairs 1..%d, --warmup 0..16, "
				"--gen >= 1, --head-dim even)\n", MAX_PAIRS);
		return 2;
	}
	if (m->wtype == WT_Q8 && (m->E % 32 || m->F % 32 || (m->H * m->D) % 32)) {
		fprintf(stderr, "pprpc-bench: q8_0 needs --d-model, --ff and heads*head-dim multiples of 32\n");
		return 2;
	}
	if (prompt_file) {
		if (!(m->prompt = read_prompt(prompt_file, &m->P)) || m->P < 1) {
			fprintf(stderr, "pprpc-bench: %s: no token ids\n", prompt_file);
			return 2;
		}
		for (int i = 0; i < m->P; i++)
			if (m->prompt[i] < 0 || m->prompt[i] >= m->V) {
				fprintf(stderr, "pprpc-bench: %s: id %d outside [0, %d)\n", prompt_file, m->prompt[i], m->V);
				return 2;
			}
	} else {
		uint64_t r = splitmix64(m->seed ^ 0x9120ull);

		if (!(m->prompt = malloc((size_t)m->P * 4)))
			return 1;
		for (int i = 0; i < m->P; i++) {
			r = splitmix64(r);
			m->prompt[i] = (int32_t)(r % (uint64_t)m->V);
		}
	}
	m->n_ctx = m->P + m->gen;
	if (sweep) {
		struct int_list l;

		if (list_ints(sweep, &l, 1, INT_MAX) < 0) {
			fprintf(stderr, "pprpc-bench: bad --ubatch-sweep list (1..%d values >= 1)\n", INT_LIST_MAX);
			return 2;
		}
		for (nsweep = 0; nsweep < l.n; nsweep++)
			sweepv[nsweep] = (int)l.v[nsweep];
	}
	for (int i = 0; i < MAX_RANKS; i++)
		snprintf(spawn_dev[i], sizeof(spawn_dev[i]), "cpu");
	if (spawn_devices && list_split(spawn_devices, spawn_dev, MAX_RANKS) < 1) {
		fprintf(stderr, "pprpc-bench: bad --spawn-devices list\n");
		return 2;
	}
	if (ranks) {
		if ((nranks = list_split(ranks, addrs, MAX_RANKS)) < 1) {
			fprintf(stderr, "pprpc-bench: bad --ranks list (1..%d addresses)\n", MAX_RANKS);
			return 2;
		}
	} else {
		nranks = nspawn;
	}
	x->S = nranks;
	if (nranks > m->L) {
		fprintf(stderr, "pprpc-bench: %d ranks but only %d layers\n", nranks, m->L);
		return 2;
	}
	if (split) {
		struct int_list l;
		int n = list_ints(split, &l, 1, MAX_LAYERS), sum = 0;

		for (int i = 0; i < n; i++)
			sum += (int)(splitv[i] = (int)l.v[i]);
		if (n != nranks || sum != m->L) {
			fprintf(stderr, "pprpc-bench: --split needs %d counts >= 1 summing to --layers %d\n", nranks, m->L);
			return 2;
		}
	} else {
		for (int i = 0; i < nranks; i++)
			splitv[i] = m->L / nranks + (i < m->L % nranks);
	}
	for (int i = 0, l = 0; i < nranks; i++) {
		x->st[i].l0 = l;
		x->st[i].l1 = (l += splitv[i]);
	}
	if (nspawn) {
		const char *bin = spawn_default_bin(argv[0], binbuf, sizeof(binbuf));

		setenv("OPENBLAS_NUM_THREADS", "1", 0);
		for (int s = 0; s < nspawn; s++) {
			const char *extra[24] = { "--threads", "1", "--devices", spawn_dev[s] };

			for (int k = 0; k < nspawn_args; k++)
				extra[4 + k] = spawn_args[k];
			extra[4 + nspawn_args] = NULL;
			if (spawn_daemon(bin, extra, 30000, &sp[s], err, sizeof(err)) < 0) {
				fprintf(stderr, "pprpc-bench: %s\n", err);
				spawn_dump_log(&sp[s]);
				spawn_stop(&sp[s], 0);
				goto out;
			}
			snprintf(addrs[s], sizeof(addrs[0]), "%s", sp[s].addr);
			fprintf(stderr, "started pprpcd pid %d on %s (--threads 1 --devices %s)\n", (int)sp[s].pid,
				sp[s].addr, spawn_dev[s]);
		}
	}
	x->t0 = now_s();
	x->trace_req = trace || svg;
	for (int s = 0; s < x->S; s++) {
		pprpc_connect_opts o = { .client_name = "pprpc-bench", .err_buf = err, .err_len = sizeof(err) };
		struct stage *st = &x->st[s];
		int rc = pprpc_connect(addrs[s], &o, &st->c);

		st->addr = addrs[s];
		if (rc < 0) {
			fprintf(stderr, "pprpc-bench: rank %d (%s): %s\n", s, addrs[s], err);
			x->rpc_errors++;
			goto out;
		}
		plan_stage(x, st, s);
	}
	printf("pprpc-bench: %d layers (%d KDA : 1 attention), d_model %d, %d heads x %d, ff %d, vocab %d, "
	       "weights %s, seed %llu\n",
	       m->L, m->ratio, m->E, m->H, m->D, m->F, m->V,
	       wtype_name(m->wtype), (unsigned long long)m->seed);
	printf("prompt %d tokens, gen %d, %d pairs after %d warm-up, %d ranks:", m->P, m->gen, m->pairs, m->warmup,
	       x->S);
	for (int s = 0; s < x->S; s++)
		printf(" [%s layers %d-%d]", addrs[s], x->st[s].l0, x->st[s].l1 - 1);
	printf("\n");
	if (!nsweep)
		sweepv[nsweep++] = m->ub;
	/* Memory check before allocating anything: weights + states + io per rank. */
	for (int i = 0; i < nsweep; i++) {
		int fits = 1;

		for (int s = 0; s < x->S; s++) {
			pprpc_device_info di;
			uint64_t need = x->st[s].wbytes + x->st[s].sbytes + io_bytes(x, s, sweepv[i]);

			if (pprpc_device_get(x->st[s].c, 0, &di) < 0)
				continue;
			if (di.free_bytes < di.floor_bytes || need > di.free_bytes - di.floor_bytes) {
				snprintf(skipped[i], sizeof(skipped[i]),
					 "rank %d needs %.1f MiB, has %.1f MiB free above its %.1f MiB floor", s,
					 need / 1048576.0,
					 di.free_bytes > di.floor_bytes ? (di.free_bytes - di.floor_bytes) / 1048576.0 : 0.0,
					 di.floor_bytes / 1048576.0);
				printf("ubatch %d: skipped: %s\n", sweepv[i], skipped[i]);
				fits = 0;
				break;
			}
		}
		if (!fits)
			sweepv[i] = -sweepv[i];
	}
	for (int s = 0; s < x->S; s++)
		if (upload_weights(x, s) < 0)
			goto out;
	if (json_path && !(json = fopen(json_path, "w"))) {
		fprintf(stderr, "pprpc-bench: %s: %s\n", json_path, strerror(errno));
		goto out;
	}
	if (json)
		fprintf(json, "{\"tool\":\"pprpc-bench\",\"model\":{\"d_model\":%d,\"heads\":%d,\"head_dim\":%d,"
			      "\"ff\":%d,\"layers\":%d,\"kda_ratio\":%d,\"vocab\":%d,\"wtype\":\"%s\",\"seed\":%llu},"
			      "\"prompt_tokens\":%d,\"gen\":%d,\"pairs\":%d,\"warmup_pairs\":%d,\"ranks\":%d,"
			      "\"results\":[",
			m->E, m->H, m->D, m->F, m->L, m->ratio, m->V, wtype_name(m->wtype), (unsigned long long)m->seed,
			m->P, m->gen, m->pairs, m->warmup, x->S);
	for (int i = 0; i < nsweep; i++) {
		if (sweepv[i] < 0)
			continue;
		m->ub = sweepv[i];
		if (m->batch > 0 && m->batch / m->ub < (m->P + m->ub - 1) / m->ub)
			printf("\n== ubatch %d, logical batch %d tokens (%d ubatches)\n", m->ub,
			       (m->batch / m->ub > 0 ? m->batch / m->ub : 1) * m->ub,
			       m->batch / m->ub > 0 ? m->batch / m->ub : 1);
		else
			printf("\n== ubatch %d, logical batch = the whole prompt\n", m->ub);
		if (!bench_ubatch(x, json, nrun_ub == 0))
			all_ok = 0;
		nrun_ub++;
	}
	if (json) {
		fprintf(json, "],\"skipped\":[");
		for (int i = 0, n = 0; i < nsweep; i++)
			if (sweepv[i] < 0)
				fprintf(json, "%s{\"ubatch\":%d,\"reason\":\"%s\"}", n++ ? "," : "", -sweepv[i],
					skipped[i]);
		fprintf(json, "],\"ok\":%s}\n", all_ok && nrun_ub ? "true" : "false");
		if (fclose(json))
			all_ok = 0;
		json = NULL;
	}
	if (trace && write_trace(x, trace) < 0)
		all_ok = 0;
	if (svg && write_svg(x, svg) < 0)
		all_ok = 0;
	ret = all_ok && nrun_ub && x->rpc_errors == 0 ? 0 : 1;
	printf("\npprpc-bench: %s (%d RPC errors)\n", ret ? "FAIL" : "PASS", x->rpc_errors);
out:
	if (json)
		fclose(json);
	for (int s = 0; s < MAX_RANKS; s++)
		pprpc_close(x->st[s].c);
	for (int s = 0; s < MAX_RANKS; s++)
		if (sp[s].pid > 0)
			spawn_stop(&sp[s], 0);
	free(x->sl);
	free(m->prompt);
	return ret;
}
