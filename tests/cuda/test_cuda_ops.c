/*
 * tests/cuda/test_cuda_ops.c — every op on the GPU (kern_cuda_run) against
 * the CPU kernels (kern_cpu_run) on the same inputs.
 *
 * Plain C, no cmocka (the GPU machine has none): one line per case, then
 * "cuda ops: N passed, M failed"; exit status 1 when anything failed.  On a
 * host without a usable GPU it prints "no CUDA device: <reason>" and
 * "cuda ops: 0 passed, 0 failed" and exits 0, so CI can run it harmlessly.
 *
 * Inputs come from a fixed-seed LCG (tests/unit/ref.h), in contiguous and
 * non-contiguous layouts (permuted, gapped, padded views); each tensor's
 * whole extent is uploaded, so gaps are identical on both sides.
 *
 * Metrics and tolerances (per case, printed):
 *   exact  bytes of dst identical (CPY, CONCAT, GET_ROWS, SET_ROWS, ARGMAX:
 *          the CUDA conversions are the CPU's integer rounding code);
 *   rel    max |got - want| / (|want| + 1e-6 max|want|): f32 elementwise
 *          1e-6 (ADD, MUL, SCALE are the same IEEE operations), 1e-5 for
 *          the transcendental ones, norms, SOFTMAX, ROPE;
 *   norm   max |got - want| / max |want|: ATTENTION 1e-4, GATED_DELTA_NET
 *          serial form 1e-4 (o and the final state separately);
 *   rmse   sqrt(sum (got - want)^2 / sum want^2): MUL_MAT f32 and the
 *          Q8_0 direct kernel 1e-5, f16 weights 1e-3, bf16 5e-3, Q8_0 via
 *          f16 tensor cores 1e-3; GATED_DELTA_NET chunked form (bf16 tensor
 *          cores) against the CPU's serial form (the fp32 reference) 5e-3,
 *          o and the final state separately.
 * GATED_DELTA_NET cases also check kern_gdn_stats: the path that was
 * meant to run (serial, chunked with its C, or a fallback) is the one
 * counted.
 * Error paths: GET_ROWS / SET_ROWS with an id out of range (both reporting
 * modes: ctx->status and synchronous), SET_ROWS leaving the table
 * untouched, a workspace too small (PPRPC_ELIMIT).
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/quant.h"
#include "tests/unit/ref.h"

#define WS_BYTES ((size_t)512 << 20)

enum metric { M_EXACT, M_REL, M_NORM, M_RMSE, M_GDN, M_GDN_RMSE };

/* GATED_DELTA_NET path a case expects kern_gdn_stats to count. */
enum { GP_ANY = -1, GP_SERIAL = 0, GP_CHUNKED = 1 /* + log2(C / 16) */,
       GP_FALLBACK = 1 + KERN_GDN_NCHUNK /* + reason */ };

/* A tensor on both sides: same descriptor, host and device copies of its
 * whole extent. */
struct tt {
	struct kern_tensor h, d;
	uint64_t ext;
	bool alias;  /* shares another tt's memory: not freed */
};

struct env {
	struct kern_cpu_ctx cpu;
	struct kern_cuda_ctx gpu;
	int32_t *status;  /* device word */
	struct kern_gdn_stats gdn;  /* gpu.gdn_stats */
	int passed, failed;
};

static const int ORD_T01[4] = { 1, 0, 2, 3 };    /* ne[0] not innermost */
static const int ORD_R[4] = { 2, 0, 1, 3 };

static void tt_free(struct tt *t)
{
	if (!t->alias) {
		free(t->h.data);
		if (t->d.data)
			cudaFree(t->d.data);
	}
	memset(t, 0, sizeof(*t));
}

/* Layout as ref_alloc: order (NULL = contiguous), gap, pad. */
static int tt_new(struct tt *t, int dtype, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
		  const int *order, uint64_t gap, uint64_t pad)
{
	const int64_t ne[4] = { n0, n1, n2, n3 };

	memset(t, 0, sizeof(*t));
	if (ref_alloc(&t->h, dtype, ne, order, gap, pad) != 0 ||
	    kern_tensor_extent(&t->h, &t->ext) != 0)
		return -1;
	t->d = t->h;
	t->d.data = NULL;
	if (cudaMalloc(&t->d.data, t->ext ? t->ext : 1) != cudaSuccess)
		return -1;
	return 0;
}

/* Contiguous tensor from a descriptor (ne, dtype). */
static int tt_like(struct tt *t, const struct kern_tensor *want)
{
	return tt_new(t, want->dtype, want->ne[0], want->ne[1], want->ne[2], want->ne[3], NULL, 1,
		      0);
}

static int tt_up(struct tt *t)
{
	return cudaMemcpy(t->d.data, t->h.data, t->ext, cudaMemcpyHostToDevice) == cudaSuccess ? 0
												  : -1;
}

static void fill(struct tt *t, uint64_t seed, double lo, double hi)
{
	int64_t n = kern_tensor_nelements(&t->h), i[4];

	for (int64_t l = 0; l < n; l++) {
		double r = (ref_rand(&seed) + 1.0) / 2.0;

		ref_unravel(t->h.ne, l, i);
		ref_set(&t->h, i[0], i[1], i[2], i[3], lo + (hi - lo) * r);
	}
}

static void fill_i32(struct tt *t, uint64_t seed, int32_t lo, int32_t hi)
{
	int64_t n = kern_tensor_nelements(&t->h), i[4];

	for (int64_t l = 0; l < n; l++) {
		double r = (ref_rand(&seed) + 1.0) / 2.0;
		int32_t v = lo + (int32_t)(r * (double)(hi - lo + 1));

		if (v > hi)
			v = hi;
		ref_unravel(t->h.ne, l, i);
		*(int32_t *)ref_ptr(&t->h, i[0], i[1], i[2], i[3]) = v;
	}
}

static void set_i32(struct tt *t, int64_t i0, int64_t i1, int64_t i2, int32_t v)
{
	*(int32_t *)ref_ptr(&t->h, i0, i1, i2, 0) = v;
}

/* Q8_0 rows quantized from uniform values in [-amp, amp). */
static int fill_q8(struct tt *t, uint64_t seed, double amp)
{
	int64_t K = t->h.ne[0];
	float *row = malloc((size_t)K * sizeof(float));
	int rc = 0;

	if (!row)
		return -1;
	for (int64_t i3 = 0; i3 < t->h.ne[3]; i3++)
		for (int64_t i2 = 0; i2 < t->h.ne[2]; i2++)
			for (int64_t i1 = 0; i1 < t->h.ne[1]; i1++) {
				for (int64_t k = 0; k < K; k++)
					row[k] = (float)(amp * ref_rand(&seed));
				if (kern_q8_0_quantize_row(row, ref_ptr(&t->h, 0, i1, i2, i3), K))
					rc = -1;
			}
	free(row);
	return rc;
}

/* ---- one case ------------------------------------------------------------ */

struct tc {
	char name[160];
	int op;
	struct pprpc_op_params p;
	int nsrc;
	struct tt src[6];
	struct tt dst;
	enum metric metric;
	double tol;
	bool inplace;     /* dst is src[0]'s memory */
	bool sync_mode;   /* ctx->status = NULL */
	bool dst_ready;   /* dst made by the case (a view, or a prefilled table) */
	int expect;       /* expected code (0, or a data error) */
	size_t ws_limit;  /* nonzero: pretend the workspace has only this much */
	int64_t gdn_n_o;
	bool cpu_serial;  /* the CPU runs the serial form (i[1] = 0, i[2] = 1) */
	int gdn_path;     /* GP_*: which GATED_DELTA_NET path the GPU must count */
};

static void tc_init(struct tc *c, int op, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void tc_init(struct tc *c, int op, const char *fmt, ...)
{
	va_list ap;

	memset(c, 0, sizeof(*c));
	c->op = op;
	c->gdn_path = GP_ANY;
	c->nsrc = kern_op_nsrc(op);
	va_start(ap, fmt);
	vsnprintf(c->name, sizeof(c->name), fmt, ap);
	va_end(ap);
}

static void tc_free(struct tc *c)
{
	for (int i = 0; i < c->nsrc; i++)
		tt_free(&c->src[i]);
	tt_free(&c->dst);
}

/* Metric of got vs want over dst's logical elements (float dtypes). */
static double measure(enum metric m, const struct kern_tensor *got, const struct kern_tensor *want,
		      int64_t begin, int64_t end, bool *nan_mismatch)
{
	double maxw = 0.0, maxd = 0.0, sd = 0.0, sw = 0.0, worst = 0.0;
	int64_t i[4];

	for (int64_t l = begin; l < end; l++) {
		double w;

		ref_unravel(want->ne, l, i);
		w = ref_get(want, i[0], i[1], i[2], i[3]);
		if (isfinite(w) && fabs(w) > maxw)
			maxw = fabs(w);
	}
	for (int64_t l = begin; l < end; l++) {
		double g, w, d;

		ref_unravel(want->ne, l, i);
		g = ref_get(got, i[0], i[1], i[2], i[3]);
		w = ref_get(want, i[0], i[1], i[2], i[3]);
		if (isnan(g) || isnan(w) || isinf(g) || isinf(w)) {
			/* Specials must agree exactly (both NaN, or the same inf). */
			if (!(isnan(g) && isnan(w)) && g != w)
				*nan_mismatch = true;
			continue;
		}
		d = fabs(g - w);
		if (d > maxd)
			maxd = d;
		sd += d * d;
		sw += w * w;
		if (m == M_REL && d / (fabs(w) + 1e-6 * maxw) > worst)
			worst = d / (fabs(w) + 1e-6 * maxw);
	}
	if (m == M_REL)
		return worst;
	if (m == M_RMSE)
		return sw > 0 ? sqrt(sd / sw) : sqrt(sd);
	return maxw > 0 ? maxd / maxw : maxd;
}

static void report(struct env *e, const struct tc *c, bool ok, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void report(struct env *e, const struct tc *c, bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s %-15s %-62s ", ok ? "ok  " : "FAIL", kern_op_name(c->op), c->name);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		e->passed++;
	else
		e->failed++;
}

static void run_case(struct env *e, struct tc *c)
{
	struct kern_tensor *sh[6], *sd[6];
	struct kern_cuda_ctx g = e->gpu;
	char err[512] = "";
	int rc_cpu, rc_gpu;
	int32_t status = 0;
	void *got = NULL, *orig = NULL;
	size_t need;
	struct pprpc_op_params pc = c->p;
	struct kern_gdn_stats before = e->gdn;
	int path = GP_ANY;

	for (int i = 0; i < c->nsrc; i++) {
		if (tt_up(&c->src[i]))
			goto setup_fail;
		sh[i] = &c->src[i].h;
		sd[i] = &c->src[i].d;
	}
	if (c->inplace) {
		c->dst = c->src[0];
		c->dst.alias = true;
	} else if (!c->dst_ready) {
		struct kern_tensor want;

		if (kern_op_infer(c->op, &c->p, (const struct kern_tensor *const *)sh, c->nsrc, &want,
				  err, sizeof(err)) < 0 ||
		    tt_like(&c->dst, &want))
			goto setup_fail;
	}
	if (!c->inplace && tt_up(&c->dst))
		goto setup_fail;
	if (c->op == PPRPC_OP_GATED_DELTA_NET) {
		int64_t n_s;

		kern_gdn_layout(sh[0]->ne[0], sh[2]->ne[0], sh[2]->ne[1], sh[0]->ne[2],
				sh[0]->ne[3], &c->gdn_n_o, &n_s);
	}

	need = kern_cuda_workspace_bytes(c->op, &c->p, sd, c->nsrc, &c->dst.d);
	if (need > WS_BYTES) {
		report(e, c, false, "workspace %zu > %zu", need, WS_BYTES);
		return;
	}
	if (c->ws_limit)
		g.workspace_bytes = c->ws_limit;
	g.status = c->sync_mode ? NULL : e->status;
	if (cudaMemset(e->status, 0, sizeof(int32_t)) != cudaSuccess)
		goto setup_fail;

	orig = malloc(c->dst.ext ? c->dst.ext : 1);
	if (!orig)
		goto setup_fail;
	memcpy(orig, c->dst.h.data, c->dst.ext);
	if (c->cpu_serial) {
		pc.i[1] = 0;
		pc.i[2] = 1;
	}
	rc_cpu = kern_cpu_run(&e->cpu, c->op, &pc, sh, c->nsrc, &c->dst.h);
	rc_gpu = kern_cuda_run(&g, c->op, &c->p, sd, c->nsrc, &c->dst.d, err, sizeof(err));
	/* Which GATED_DELTA_NET path the GPU counted (exactly one). */
	if (e->gdn.serial != before.serial)
		path = GP_SERIAL;
	for (int i = 0; i < KERN_GDN_NCHUNK; i++)
		if (e->gdn.chunked[i] != before.chunked[i])
			path = GP_CHUNKED + i;
	for (int i = 0; i < KERN_GDN_FB_COUNT; i++)
		if (e->gdn.fallback[i] != before.fallback[i])
			path = GP_FALLBACK + i;
	if (c->gdn_path != GP_ANY && path != c->gdn_path) {
		report(e, c, false, "GATED_DELTA_NET path counted %d, expected %d", path,
		       c->gdn_path);
		goto out;
	}
	if (cudaStreamSynchronize((cudaStream_t)g.stream) != cudaSuccess ||
	    cudaMemcpy(&status, e->status, sizeof(status), cudaMemcpyDeviceToHost) != cudaSuccess) {
		report(e, c, false, "CUDA error after run: %s", cudaGetErrorString(cudaGetLastError()));
		return;
	}
	got = malloc(c->dst.ext ? c->dst.ext : 1);
	if (!got || cudaMemcpy(got, c->dst.d.data, c->dst.ext, cudaMemcpyDeviceToHost) != cudaSuccess)
		goto setup_fail;

	if (c->expect) {
		/* GPU: returned directly (sync mode, ELIMIT) or through status. */
		int gpu_code = rc_gpu ? rc_gpu : status;
		/* ELIMIT is the GPU's own limit: the CPU run just works. */
		bool cpu_ok = c->expect == PPRPC_ELIMIT ||
			      (rc_cpu == c->expect && memcmp(c->dst.h.data, orig, c->dst.ext) == 0);
		/* Nothing written on the device either. */
		bool untouched = memcmp(got, orig, c->dst.ext) == 0;

		report(e, c, gpu_code == c->expect && cpu_ok && untouched,
		       "expect %d: cpu %d, cuda rc %d status %d, dst %s%s%s", c->expect, rc_cpu,
		       rc_gpu, status, untouched ? "untouched" : "MODIFIED", err[0] ? " — " : "",
		       err);
		goto out;
	}
	if (rc_cpu || rc_gpu || status) {
		report(e, c, false, "cpu rc %d, cuda rc %d status %d: %s", rc_cpu, rc_gpu, status, err);
		goto out;
	}
	if (c->metric == M_EXACT) {
		uint64_t diff = 0;

		for (uint64_t b = 0; b < c->dst.ext; b++)
			diff += ((const unsigned char *)got)[b] != ((const unsigned char *)c->dst.h.data)[b];
		report(e, c, diff == 0, "exact: %llu of %llu bytes differ", (unsigned long long)diff,
		       (unsigned long long)c->dst.ext);
	} else {
		struct kern_tensor gt = c->dst.h;
		bool bad_special = false;
		int64_t n = kern_tensor_nelements(&c->dst.h);
		double m1, m2 = 0.0;

		gt.data = got;
		if (c->metric == M_GDN) {
			m1 = measure(M_NORM, &gt, &c->dst.h, 0, c->gdn_n_o, &bad_special);
			m2 = measure(M_NORM, &gt, &c->dst.h, c->gdn_n_o, n, &bad_special);
			report(e, c, !bad_special && m1 <= c->tol && m2 <= c->tol,
			       "norm err o %.3g, state %.3g (tol %.1g)%s", m1, m2, c->tol,
			       bad_special ? ", NaN/inf mismatch" : "");
		} else if (c->metric == M_GDN_RMSE) {
			m1 = measure(M_RMSE, &gt, &c->dst.h, 0, c->gdn_n_o, &bad_special);
			m2 = measure(M_RMSE, &gt, &c->dst.h, c->gdn_n_o, n, &bad_special);
			report(e, c, !bad_special && m1 <= c->tol && m2 <= c->tol,
			       "rmse/rms o %.3g, state %.3g (tol %.1g)%s", m1, m2, c->tol,
			       bad_special ? ", NaN/inf mismatch" : "");
		} else {
			static const char *const names[] = { "exact", "rel", "norm", "rmse" };

			m1 = measure(c->metric, &gt, &c->dst.h, 0, n, &bad_special);
			report(e, c, !bad_special && m1 <= c->tol, "%s err %.3g (tol %.1g)%s",
			       names[c->metric], m1, c->tol, bad_special ? ", NaN/inf mismatch" : "");
		}
	}
	goto out;

setup_fail:
	report(e, c, false, "test setup failed: %s %s", cudaGetErrorString(cudaGetLastError()), err);
out:
	free(got);
	free(orig);
}

/* Run and free. */
static void go(struct env *e, struct tc *c)
{
	run_case(e, c);
	tc_free(c);
}

/* ---- the cases ----------------------------------------------------------- */

static void t_binary(struct env *e)
{
	static const int b_types[3] = { PPRPC_F32, PPRPC_F16, PPRPC_BF16 };
	struct tc c;

	for (int op = PPRPC_OP_ADD; op <= PPRPC_OP_MUL; op++) {
		for (int bt = 0; bt < 3; bt++) {
			tc_init(&c, op, "a [33,7,5,2] permuted, b %s [33,1,5,1]",
				kern_dtype(b_types[bt])->name);
			tt_new(&c.src[0], PPRPC_F32, 33, 7, 5, 2, ORD_R, 1, 0);
			tt_new(&c.src[1], b_types[bt], 33, 1, 5, 1, NULL, 1, 0);
			fill(&c.src[0], 1, -2, 2);
			fill(&c.src[1], 2, -2, 2);
			c.metric = M_REL;
			c.tol = 1e-6;
			go(e, &c);
		}
		tc_init(&c, op, "a [64,9,3,2], b [1,9,1,2] gapped");
		tt_new(&c.src[0], PPRPC_F32, 64, 9, 3, 2, NULL, 1, 0);
		tt_new(&c.src[1], PPRPC_F32, 1, 9, 1, 2, NULL, 3, 0);
		fill(&c.src[0], 3, -2, 2);
		fill(&c.src[1], 4, -2, 2);
		c.metric = M_REL;
		c.tol = 1e-6;
		go(e, &c);

		tc_init(&c, op, "in place, a [4097,3], b [4097]");
		tt_new(&c.src[0], PPRPC_F32, 4097, 3, 1, 1, NULL, 1, 0);
		tt_new(&c.src[1], PPRPC_F32, 4097, 1, 1, 1, NULL, 1, 0);
		fill(&c.src[0], 5, -2, 2);
		fill(&c.src[1], 6, -2, 2);
		c.inplace = true;
		c.metric = M_REL;
		c.tol = 1e-6;
		go(e, &c);
	}
	tc_init(&c, PPRPC_OP_SCALE, "[100,7,3] transposed, x*0.37-1.5");
	tt_new(&c.src[0], PPRPC_F32, 100, 7, 3, 1, ORD_T01, 1, 0);
	fill(&c.src[0], 7, -4, 4);
	c.p.f[0] = 0.37f;
	c.p.f[1] = -1.5f;
	c.metric = M_REL;
	c.tol = 1e-6;
	go(e, &c);
}

static void t_cpy_concat(struct env *e)
{
	static const int types[3] = { PPRPC_F32, PPRPC_F16, PPRPC_BF16 };
	struct tc c;

	for (int s = 0; s < 3; s++)
		for (int d = 0; d < 3; d++) {
			tc_init(&c, PPRPC_OP_CPY, "%s [37,5,3,2] permuted -> %s", kern_dtype(types[s])->name,
				kern_dtype(types[d])->name);
			tt_new(&c.src[0], types[s], 37, 5, 3, 2, ORD_R, 1, 0);
			fill(&c.src[0], 10 + s * 3 + d, -70000, 70000);  /* f16 overflow too */
			c.p.i[0] = types[d];
			c.metric = M_EXACT;
			go(e, &c);
		}
	/* Into a view of another shape: a gapped, padded [15, 37*2] dst. */
	tc_init(&c, PPRPC_OP_CPY, "f32 [37,5,3,2] -> f16 view [15,74,1,1] gapped+padded");
	tt_new(&c.src[0], PPRPC_F32, 37, 5, 3, 2, NULL, 1, 0);
	fill(&c.src[0], 20, -3, 3);
	tt_new(&c.dst, PPRPC_F16, 15, 74, 1, 1, NULL, 2, 3);
	c.dst_ready = true;
	c.p.i[0] = PPRPC_F16;
	c.metric = M_EXACT;
	go(e, &c);

	for (int dim = 0; dim < 4; dim++)
		for (int t = 0; t < 2; t++) {
			int64_t na[4] = { 9, 4, 3, 2 }, nb[4] = { 9, 4, 3, 2 };

			nb[dim] = dim == 0 ? 5 : 1 + dim;
			tc_init(&c, PPRPC_OP_CONCAT, "%s dim %d, src0 permuted, src1 gapped",
				kern_dtype(types[t])->name, dim);
			tt_new(&c.src[0], types[t], na[0], na[1], na[2], na[3], ORD_R, 1, 0);
			tt_new(&c.src[1], types[t], nb[0], nb[1], nb[2], nb[3], NULL, 2, 1);
			fill(&c.src[0], 30 + dim, -1, 1);
			fill(&c.src[1], 40 + dim, -1, 1);
			c.p.i[0] = dim;
			c.metric = M_EXACT;
			go(e, &c);
		}
}

static void t_unary(struct env *e)
{
	static const int ops[] = { PPRPC_OP_SILU, PPRPC_OP_SIGMOID, PPRPC_OP_SOFTPLUS,
				   PPRPC_OP_EXP, PPRPC_OP_GELU, PPRPC_OP_SWIGLU };
	struct tc c;

	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
		double amp = ops[k] == PPRPC_OP_EXP ? 20.0 : 40.0;

		tc_init(&c, ops[k], "[1000,3,2] in [-%g,%g]", amp, amp);
		tt_new(&c.src[0], PPRPC_F32, 1000, 3, 2, 1, NULL, 1, 0);
		fill(&c.src[0], 50 + k, -amp, amp);
		if (ops[k] == PPRPC_OP_SWIGLU) {
			tt_new(&c.src[1], PPRPC_F32, 1000, 3, 2, 1, NULL, 1, 0);
			fill(&c.src[1], 60 + k, -3, 3);
		}
		c.metric = M_REL;
		c.tol = 1e-5;
		go(e, &c);

		tc_init(&c, ops[k], "[17,5,3,2] transposed%s", ops[k] == PPRPC_OP_SWIGLU ? ", b gapped" : "");
		tt_new(&c.src[0], PPRPC_F32, 17, 5, 3, 2, ORD_T01, 1, 0);
		fill(&c.src[0], 70 + k, -6, 6);
		if (ops[k] == PPRPC_OP_SWIGLU) {
			tt_new(&c.src[1], PPRPC_F32, 17, 5, 3, 2, NULL, 2, 1);
			fill(&c.src[1], 80 + k, -3, 3);
		}
		c.metric = M_REL;
		c.tol = 1e-5;
		go(e, &c);
	}
}

static void t_norm(struct env *e)
{
	struct tc c;

	for (int op = PPRPC_OP_RMS_NORM; op <= PPRPC_OP_L2_NORM; op++) {
		tc_init(&c, op, "[4096,3] eps 1e-6");
		tt_new(&c.src[0], PPRPC_F32, 4096, 3, 1, 1, NULL, 1, 0);
		fill(&c.src[0], 90, -3, 3);
		c.p.f[0] = 1e-6f;
		c.metric = M_REL;
		c.tol = 1e-5;
		go(e, &c);

		tc_init(&c, op, "[37,5,2,3] permuted eps 1e-5");
		tt_new(&c.src[0], PPRPC_F32, 37, 5, 2, 3, ORD_R, 1, 0);
		fill(&c.src[0], 91, -3, 3);
		c.p.f[0] = 1e-5f;
		c.metric = M_REL;
		c.tol = 1e-5;
		go(e, &c);

		tc_init(&c, op, "in place [5000,2], eps 0.5, tiny values");
		tt_new(&c.src[0], PPRPC_F32, 5000, 2, 1, 1, NULL, 1, 0);
		fill(&c.src[0], 92, -1e-3, 1e-3);
		c.p.f[0] = 0.5f;
		c.inplace = true;
		c.metric = M_REL;
		c.tol = 1e-5;
		go(e, &c);
	}
}

static void t_softmax(struct env *e)
{
	struct tc c;

	tc_init(&c, PPRPC_OP_SOFTMAX, "[100,7,3,2] causal past 93 scale 0.125");
	tt_new(&c.src[0], PPRPC_F32, 100, 7, 3, 2, NULL, 1, 0);
	fill(&c.src[0], 100, -30, 30);
	c.p.f[0] = 0.125f;
	c.p.i[0] = 1;
	c.p.i[1] = 93;
	c.metric = M_REL;
	c.tol = 1e-5;
	go(e, &c);

	tc_init(&c, PPRPC_OP_SOFTMAX, "[40,40] causal past 0, transposed");
	tt_new(&c.src[0], PPRPC_F32, 40, 40, 1, 1, ORD_T01, 1, 0);
	fill(&c.src[0], 101, -5, 5);
	c.p.f[0] = 1.0f;
	c.p.i[0] = 1;
	c.metric = M_REL;
	c.tol = 1e-5;
	go(e, &c);

	tc_init(&c, PPRPC_OP_SOFTMAX, "[50000,3] plain, in place");
	tt_new(&c.src[0], PPRPC_F32, 50000, 3, 1, 1, NULL, 1, 0);
	fill(&c.src[0], 102, -20, 20);
	c.p.f[0] = 1.0f;
	c.inplace = true;
	c.metric = M_REL;
	c.tol = 1e-5;
	go(e, &c);
}

static void t_argmax(struct env *e)
{
	struct tc c;
	int64_t n;

	tc_init(&c, PPRPC_OP_ARGMAX, "[1000,7,3] ties, NaNs, an all-NaN row");
	tt_new(&c.src[0], PPRPC_F32, 1000, 7, 3, 1, NULL, 1, 0);
	fill(&c.src[0], 110, -3, 3);
	n = kern_tensor_nelements(&c.src[0].h);
	for (int64_t l = 0; l < n; l++) {
		float *v = (float *)c.src[0].h.data + l;

		*v = roundf(*v * 2.0f) / 2.0f;  /* few levels: many ties */
		if (l % 97 == 5)
			*v = NAN;
	}
	for (int64_t i = 0; i < 1000; i++)
		((float *)c.src[0].h.data)[1000 * 4 + i] = NAN;
	c.metric = M_EXACT;
	go(e, &c);

	tc_init(&c, PPRPC_OP_ARGMAX, "[151936,2] transposed (vocab)");
	tt_new(&c.src[0], PPRPC_F32, 151936, 2, 1, 1, ORD_T01, 1, 0);
	fill(&c.src[0], 111, -10, 10);
	c.metric = M_EXACT;
	go(e, &c);

	tc_init(&c, PPRPC_OP_ARGMAX, "[5,4000] short rows");
	tt_new(&c.src[0], PPRPC_F32, 5, 4000, 1, 1, NULL, 1, 0);
	fill(&c.src[0], 112, -1, 1);
	c.metric = M_EXACT;
	go(e, &c);
}

static void t_rows(struct env *e)
{
	static const int types[4] = { PPRPC_F32, PPRPC_F16, PPRPC_BF16, PPRPC_Q8_0 };
	struct tc c;

	for (int t = 0; t < 4; t++) {
		tc_init(&c, PPRPC_OP_GET_ROWS, "%s table [64,50], ids [7,3,2] (table batch 1)",
			kern_dtype(types[t])->name);
		tt_new(&c.src[0], types[t], 64, 50, 1, 1, NULL, 1, 0);
		if (types[t] == PPRPC_Q8_0)
			fill_q8(&c.src[0], 120, 2.0);
		else
			fill(&c.src[0], 120, -2, 2);
		tt_new(&c.src[1], PPRPC_I32, 7, 3, 2, 1, NULL, 1, 0);
		fill_i32(&c.src[1], 121, 0, 49);
		c.metric = M_EXACT;
		go(e, &c);
	}
	tc_init(&c, PPRPC_OP_GET_ROWS, "f16 table [32,20,3,2] gapped, ids [5,3,2] permuted");
	tt_new(&c.src[0], PPRPC_F16, 32, 20, 3, 2, NULL, 2, 1);
	fill(&c.src[0], 122, -2, 2);
	tt_new(&c.src[1], PPRPC_I32, 5, 3, 2, 1, ORD_R, 1, 0);
	fill_i32(&c.src[1], 123, 0, 19);
	c.metric = M_EXACT;
	c.sync_mode = true;
	go(e, &c);

	for (int mode = 0; mode < 2; mode++)
		for (int bad = 0; bad < 2; bad++) {
			tc_init(&c, PPRPC_OP_GET_ROWS, "id %s (%s)", bad ? "-1" : "= V",
				mode ? "sync" : "status");
			tt_new(&c.src[0], PPRPC_F32, 16, 10, 1, 1, NULL, 1, 0);
			fill(&c.src[0], 124, -1, 1);
			tt_new(&c.src[1], PPRPC_I32, 6, 1, 1, 1, NULL, 1, 0);
			fill_i32(&c.src[1], 125, 0, 9);
			set_i32(&c.src[1], 4, 0, 0, bad ? -1 : 10);
			c.sync_mode = mode;
			c.expect = PPRPC_ERANGE;
			go(e, &c);
		}

	/* SET_ROWS: dst is a prefilled table; duplicates: last wins. */
	for (int t = 0; t < 3; t++) {
		tc_init(&c, PPRPC_OP_SET_ROWS, "%s table [64,40,2,3], vals [64,9,2,3] gapped, ids [9,1,3] dup",
			kern_dtype(types[t])->name);
		tt_new(&c.src[0], PPRPC_F32, 64, 9, 2, 3, NULL, 2, 0);
		fill(&c.src[0], 130, -70000, 70000);
		tt_new(&c.src[1], PPRPC_I32, 9, 1, 3, 1, NULL, 1, 0);
		fill_i32(&c.src[1], 131, 0, 39);
		set_i32(&c.src[1], 2, 0, 1, 7);
		set_i32(&c.src[1], 6, 0, 1, 7);
		set_i32(&c.src[1], 8, 0, 1, 7);
		tt_new(&c.dst, types[t], 64, 40, 2, 3, NULL, 1, 0);
		fill(&c.dst, 132, -1, 1);
		c.dst_ready = true;
		c.p.i[0] = 40;
		c.p.i[1] = types[t];
		c.metric = M_EXACT;
		go(e, &c);
	}
	tc_init(&c, PPRPC_OP_SET_ROWS, "f16 KV-cache write: vals [128,2048], ids 0..2047 reversed");
	tt_new(&c.src[0], PPRPC_F32, 128, 2048, 1, 1, NULL, 1, 0);
	fill(&c.src[0], 133, -2, 2);
	tt_new(&c.src[1], PPRPC_I32, 2048, 1, 1, 1, NULL, 1, 0);
	for (int i = 0; i < 2048; i++)
		set_i32(&c.src[1], i, 0, 0, 4095 - i);
	tt_new(&c.dst, PPRPC_F16, 128, 4096, 1, 1, NULL, 1, 0);
	fill(&c.dst, 134, -1, 1);
	c.dst_ready = true;
	c.p.i[0] = 4096;
	c.p.i[1] = PPRPC_F16;
	c.metric = M_EXACT;
	go(e, &c);

	for (int mode = 0; mode < 2; mode++) {
		tc_init(&c, PPRPC_OP_SET_ROWS, "id = V: nothing written (%s)", mode ? "sync" : "status");
		tt_new(&c.src[0], PPRPC_F32, 16, 5, 1, 1, NULL, 1, 0);
		fill(&c.src[0], 135, -1, 1);
		tt_new(&c.src[1], PPRPC_I32, 5, 1, 1, 1, NULL, 1, 0);
		fill_i32(&c.src[1], 136, 0, 7);
		set_i32(&c.src[1], 3, 0, 0, 8);
		tt_new(&c.dst, PPRPC_F32, 16, 8, 1, 1, NULL, 1, 0);
		fill(&c.dst, 137, -1, 1);
		c.dst_ready = true;
		c.p.i[0] = 8;
		c.sync_mode = mode;
		c.expect = PPRPC_ERANGE;
		go(e, &c);
	}
}

static void t_rope(struct env *e)
{
	struct tc c;

	for (int mode = 0; mode <= 2; mode += 2) {
		tc_init(&c, PPRPC_OP_ROPE, "%s [128,8,33] n_dims 128, pos up to 1e5",
			mode ? "neox" : "normal");
		tt_new(&c.src[0], PPRPC_F32, 128, 8, 33, 1, NULL, 1, 0);
		fill(&c.src[0], 140 + mode, -2, 2);
		tt_new(&c.src[1], PPRPC_I32, 33, 1, 1, 1, NULL, 1, 0);
		fill_i32(&c.src[1], 141 + mode, 0, 100000);
		c.p.i[0] = mode;
		c.p.i[1] = 128;
		c.p.f[0] = 1e6f;
		c.p.f[1] = 1.0f;
		c.metric = M_REL;
		c.tol = 1e-5;
		go(e, &c);

		tc_init(&c, PPRPC_OP_ROPE, "%s [80,5,7] permuted, n_dims 32, scale 0.25",
			mode ? "neox" : "normal");
		tt_new(&c.src[0], PPRPC_F32, 80, 5, 7, 1, ORD_R, 1, 0);
		fill(&c.src[0], 150 + mode, -2, 2);
		tt_new(&c.src[1], PPRPC_I32, 7, 1, 1, 1, NULL, 2, 0);
		fill_i32(&c.src[1], 151 + mode, 0, 5000);
		c.p.i[0] = mode;
		c.p.i[1] = 32;
		c.p.f[0] = 10000.0f;
		c.p.f[1] = 0.25f;
		c.metric = M_REL;
		c.tol = 1e-5;
		go(e, &c);

		tc_init(&c, PPRPC_OP_ROPE, "%s in place [64,4,3]", mode ? "neox" : "normal");
		tt_new(&c.src[0], PPRPC_F32, 64, 4, 3, 1, NULL, 1, 0);
		fill(&c.src[0], 160 + mode, -2, 2);
		tt_new(&c.src[1], PPRPC_I32, 3, 1, 1, 1, NULL, 1, 0);
		fill_i32(&c.src[1], 161 + mode, 0, 100);
		c.p.i[0] = mode;
		c.p.i[1] = 64;
		c.p.f[0] = 10000.0f;
		c.p.f[1] = 1.0f;
		c.inplace = true;
		c.metric = M_REL;
		c.tol = 1e-5;
		go(e, &c);
	}
}

/* q [D, H, n_q] as a view of a fused projection (row stride > D * H); k/v
 * [D, Hkv, n_kv] views of a cache of n_ctx > n_kv positions whose
 * positions from n_past + n_q on hold NaN: reading one would show. */
static void attn_case(struct env *e, int kv_type, int64_t D, int64_t H, int64_t Hkv,
		      int64_t n_q, int64_t n_past, int64_t n_kv, uint64_t seed)
{
	struct tc c;
	int64_t n_ctx = n_kv + 3;

	tc_init(&c, PPRPC_OP_ATTENTION, "%s D %lld H %lld/%lld n_q %lld n_past %lld n_kv %lld",
		kern_dtype(kv_type)->name, (long long)D, (long long)H, (long long)Hkv,
		(long long)n_q, (long long)n_past, (long long)n_kv);
	/* The fused buffer is [D*H + 16, n_q]; q views its first D*H floats. */
	tt_new(&c.src[0], PPRPC_F32, D * H + 16, n_q, 1, 1, NULL, 1, 0);
	fill(&c.src[0], seed, -1, 1);
	{
		struct kern_tensor *v = &c.src[0].h;

		v->ne[0] = D;
		v->ne[1] = H;
		v->ne[2] = n_q;
		v->ne[3] = 1;
		v->nb[1] = (uint64_t)D * 4;
		v->nb[2] = (uint64_t)(D * H + 16) * 4;
		v->nb[3] = v->nb[2] * (uint64_t)n_q;
		memcpy(c.src[0].d.ne, v->ne, sizeof(v->ne));
		memcpy(c.src[0].d.nb, v->nb, sizeof(v->nb));
	}
	for (int s = 1; s <= 2; s++) {
		struct tt *t = &c.src[s];

		tt_new(t, kv_type, D, Hkv, n_ctx, 1, NULL, 1, 0);
		fill(t, seed + s, -1, 1);
		for (int64_t pos = n_past + n_q; pos < n_ctx; pos++)
			for (int64_t h = 0; h < Hkv; h++)
				for (int64_t i = 0; i < D; i++)
					ref_set(&t->h, i, h, pos, 0, NAN);
		t->h.ne[2] = n_kv;
		t->d.ne[2] = n_kv;
		t->h.nb[3] = t->h.nb[2] * (uint64_t)n_kv;
		t->d.nb[3] = t->h.nb[3];
	}
	c.p.f[0] = 1.0f / sqrtf((float)D);
	c.p.i[0] = (int32_t)n_past;
	c.metric = M_NORM;
	c.tol = 1e-4;
	go(e, &c);
}

static void t_attention(struct env *e)
{
	attn_case(e, PPRPC_F32, 64, 8, 2, 1, 999, 1000, 170);
	attn_case(e, PPRPC_F16, 128, 16, 4, 1, 4095, 4100, 171);
	attn_case(e, PPRPC_F32, 128, 4, 4, 17, 0, 17, 172);
	attn_case(e, PPRPC_F16, 64, 6, 2, 33, 100, 140, 173);
	attn_case(e, PPRPC_F32, 80, 12, 3, 5, 3, 8, 174);
	attn_case(e, PPRPC_F16, 128, 8, 1, 300, 212, 512, 175);
	attn_case(e, PPRPC_F32, 256, 2, 2, 3, 1, 4, 176);
	attn_case(e, PPRPC_F32, 40, 3, 1, 1, 0, 1, 177);
}

/* q/k/v/g/beta as views of one fused [width, H, T, B] projection, like a
 * model's; state contiguous.  Log gates in [-2 gs - 0.01, -0.01]. */
static void gdn_build(struct tc *cp, int64_t d_k, int64_t d_v, int64_t Hk, int64_t Hv, int64_t T,
		      int64_t B, bool kda, bool l2, bool pos_gates, double gs, uint64_t seed)
{
	struct tc c;
	int64_t G = kda ? d_k : 1;
	/* fused row per token: q,k (Hk heads each), v, g, beta (Hv heads). */
	int64_t off_q = 0, off_k = d_k * Hk, off_v = 2 * d_k * Hk, off_g = off_v + d_v * Hv;
	int64_t off_b = off_g + G * Hv, width = off_b + Hv;
	struct tt fused;
	int64_t i[4], n;

	tc_init(&c, PPRPC_OP_GATED_DELTA_NET, "%s d_k %lld d_v %lld H %lld/%lld T %lld B %lld%s%s",
		kda ? "KDA" : "GDN", (long long)d_k, (long long)d_v, (long long)Hk, (long long)Hv,
		(long long)T, (long long)B, l2 ? " l2" : "", pos_gates ? " +gates" : "");
	if (gs != 0.3)
		snprintf(c.name + strlen(c.name), sizeof(c.name) - strlen(c.name), " g*%g", gs);
	tt_new(&fused, PPRPC_F32, width, T, B, 1, NULL, 1, 0);
	n = kern_tensor_nelements(&fused.h);
	for (int64_t l = 0; l < n; l++) {
		double r = ref_rand(&seed), v;
		int64_t col;

		ref_unravel(fused.h.ne, l, i);
		col = i[0];
		if (col < off_v)  /* q, k; without l2, keep ||k|| ~ 1 so it stays stable */
			v = l2 ? r : r / sqrt((double)d_k) * 1.7;
		else if (col < off_g)
			v = r;
		else if (col < off_b)  /* log-decay <= 0, a few positive when asked */
			v = pos_gates && l % 7 == 0 ? 0.5 : -gs * (r + 1.0) - 0.01;
		else
			v = 0.5 + 0.45 * r;  /* beta in (0.05, 0.95) */
		ref_set(&fused.h, i[0], i[1], i[2], i[3], v);
	}
	{
		const int64_t offs[5] = { off_q, off_k, off_v, off_g, off_b };
		const int64_t w0[5] = { d_k, d_k, d_v, G, 1 };
		const int64_t w1[5] = { Hk, Hk, Hv, Hv, Hv };

		for (int s = 0; s < 5; s++) {
			struct tt *t = &c.src[s];

			*t = fused;
			t->alias = s > 0;
			t->h.data = (char *)fused.h.data + offs[s] * 4;
			t->d.data = (char *)fused.d.data + offs[s] * 4;
			t->h.ne[0] = w0[s];
			t->h.ne[1] = w1[s];
			t->h.ne[2] = T;
			t->h.ne[3] = B;
			t->h.nb[0] = 4;
			t->h.nb[1] = (uint64_t)w0[s] * 4;
			t->h.nb[2] = (uint64_t)width * 4;
			t->h.nb[3] = (uint64_t)width * 4 * (uint64_t)T;
			memcpy(t->d.ne, t->h.ne, sizeof(t->h.ne));
			memcpy(t->d.nb, t->h.nb, sizeof(t->h.nb));
			/* Only src0 owns (and uploads) the fused buffer. */
			t->ext = s == 0 ? fused.ext : 0;
		}
		/* src0 keeps the base pointers for freeing: its view starts at 0. */
	}
	tt_new(&c.src[5], PPRPC_F32, d_k, d_v, Hv, B, NULL, 1, 0);
	fill(&c.src[5], seed + 1, -0.5, 0.5);
	c.p.f[0] = 1.0f / sqrtf((float)d_k);
	c.p.i[0] = l2;
	c.p.f[1] = l2 ? 1e-6f : 0.0f;
	*cp = c;
}

/* The serial CUDA form (i[2] = 1) against the CPU's, fp32 both. */
static void gdn_case(struct env *e, int64_t d_k, int64_t d_v, int64_t Hk, int64_t Hv, int64_t T,
		     int64_t B, bool kda, bool l2, bool pos_gates, uint64_t seed)
{
	struct tc c;

	gdn_build(&c, d_k, d_v, Hk, Hv, T, B, kda, l2, pos_gates, 0.3, seed);
	c.p.i[2] = 1;
	c.gdn_path = GP_SERIAL;
	c.metric = M_GDN;
	c.tol = 1e-4;
	go(e, &c);
}

static int chunk_path(int chunk)
{
	return GP_CHUNKED + (chunk == 16 ? 0 : chunk == 32 ? 1 : 2);
}

/* The chunked CUDA form (i[1] = chunk; 0 = automatic, then path says what
 * must run) against the CPU's serial form. */
static void gdn_chunk_case(struct env *e, int64_t d_k, int64_t Hk, int64_t Hv, int64_t T,
			   int64_t B, bool kda, double gs, int chunk, int path, uint64_t seed)
{
	struct tc c;

	gdn_build(&c, d_k, d_k, Hk, Hv, T, B, kda, true, false, gs, seed);
	snprintf(c.name + strlen(c.name), sizeof(c.name) - strlen(c.name), " C=%d", chunk);
	c.p.i[1] = chunk;
	c.cpu_serial = true;
	c.gdn_path = path;
	c.metric = M_GDN_RMSE;
	c.tol = 5e-3;
	go(e, &c);
}

/* The chunked form captured into a CUDA graph (as pprpcd runs graphs) and
 * replayed: bytes identical to a direct run (the kernels are
 * deterministic), so nothing in the launch path breaks capture. */
static void gdn_graph_case(struct env *e)
{
	struct tc c;
	struct kern_tensor *sh[6], *sd[6], want;
	cudaStream_t st = (cudaStream_t)e->gpu.stream;
	cudaGraph_t graph = NULL;
	cudaGraphExec_t exec = NULL;
	void *direct = NULL, *replay = NULL;
	char err[512] = "";
	int rc;
	cudaError_t ce;

	gdn_build(&c, 128, 128, 2, 4, 300, 2, true, true, false, 0.3, 400);
	snprintf(c.name + strlen(c.name), sizeof(c.name) - strlen(c.name), " C=32 graph");
	c.p.i[1] = 32;
	for (int i = 0; i < 6; i++) {
		if (tt_up(&c.src[i]))
			goto setup_fail;
		sh[i] = &c.src[i].h;
		sd[i] = &c.src[i].d;
	}
	if (kern_op_infer(c.op, &c.p, (const struct kern_tensor *const *)sh, 6, &want, err,
			  sizeof(err)) < 0 ||
	    tt_like(&c.dst, &want))
		goto setup_fail;
	direct = malloc(c.dst.ext);
	replay = malloc(c.dst.ext);
	if (!direct || !replay)
		goto setup_fail;
	rc = kern_cuda_run(&e->gpu, c.op, &c.p, sd, 6, &c.dst.d, err, sizeof(err));
	if (rc || cudaStreamSynchronize(st) != cudaSuccess ||
	    cudaMemcpy(direct, c.dst.d.data, c.dst.ext, cudaMemcpyDeviceToHost) != cudaSuccess ||
	    cudaMemset(c.dst.d.data, 0, c.dst.ext) != cudaSuccess)
		goto setup_fail;
	if (cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) != cudaSuccess)
		goto setup_fail;
	rc = kern_cuda_run(&e->gpu, c.op, &c.p, sd, 6, &c.dst.d, err, sizeof(err));
	ce = cudaStreamEndCapture(st, &graph);
	if (rc || ce != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
		report(e, &c, false, "capture failed: rc %d, %s %s", rc, cudaGetErrorString(ce), err);
		cudaGetLastError();
		goto out;
	}
	if (cudaGraphLaunch(exec, st) != cudaSuccess || cudaStreamSynchronize(st) != cudaSuccess ||
	    cudaMemcpy(replay, c.dst.d.data, c.dst.ext, cudaMemcpyDeviceToHost) != cudaSuccess)
		goto setup_fail;
	rc = memcmp(direct, replay, c.dst.ext);
	report(e, &c, rc == 0, "graph replay %s the direct run's bytes",
	       rc == 0 ? "matches" : "DIFFERS from");
	goto out;
setup_fail:
	report(e, &c, false, "test setup failed: %s %s", cudaGetErrorString(cudaGetLastError()), err);
out:
	if (exec)
		cudaGraphExecDestroy(exec);
	if (graph)
		cudaGraphDestroy(graph);
	free(direct);
	free(replay);
	tc_free(&c);
}

/* Switch a built case to the tiled head order (ops.h, i[3] = 1). */
static void gdn_tiled(struct tc *c)
{
	c->p.i[3] = 1;
	snprintf(c->name + strlen(c->name), sizeof(c->name) - strlen(c->name), " tiled");
}

/* The chunked form with split operands (i[4] = 1) against the CPU's
 * serial form, held to RMSE / RMS <= 1e-4 (the bf16 form's 5e-3 would
 * fail it by about 30x): chunk 0 = automatic; tiled: ggml's head order
 * without the in-op L2 norm, as the ggml engine runs it; ws_one: a
 * workspace for one (b, h) only, so the (b, h) run in groups. */
static void gdn_split_case(struct env *e, int64_t d, int64_t Hk, int64_t Hv, int64_t T, int64_t B,
			   bool kda, double gs, int chunk, int path, bool tiled, bool ws_one,
			   uint64_t seed)
{
	struct tc c;

	gdn_build(&c, d, d, Hk, Hv, T, B, kda, !tiled, false, gs, seed);
	if (tiled)
		gdn_tiled(&c);
	snprintf(c.name + strlen(c.name), sizeof(c.name) - strlen(c.name), " C=%d split%s", chunk,
		 ws_one ? ", groups of 1" : "");
	c.p.i[1] = chunk;
	c.p.i[4] = 1;
	if (ws_one)
		c.ws_limit = kern_cuda_gdn_ws_bytes(d, d, 1, T, 1, chunk ? chunk : 16, true);
	c.cpu_serial = true;
	c.gdn_path = path;
	c.metric = M_GDN_RMSE;
	c.tol = 1e-4;
	go(e, &c);
}

static void t_gdn(struct env *e)
{
	static const int64_t Ts[] = { 1, 2, 31, 32, 33, 128, 512, 2048, 8192 };
	static const int chunks[] = { 16, 32, 64 };
	uint64_t seed = 300;
	struct tc c;

	gdn_case(e, 128, 128, 2, 4, 1, 2, false, true, false, 180);
	gdn_case(e, 128, 128, 2, 4, 64, 1, false, true, false, 181);
	gdn_case(e, 64, 64, 2, 2, 2048, 1, false, true, false, 182);
	gdn_case(e, 128, 96, 1, 2, 300, 2, true, true, false, 183);
	gdn_case(e, 32, 40, 3, 3, 50, 1, false, false, false, 184);
	gdn_case(e, 80, 33, 2, 4, 40, 2, true, true, true, 185);
	gdn_case(e, 200, 16, 1, 1, 20, 1, false, true, true, 186);
	gdn_case(e, 300, 24, 1, 2, 8, 1, true, true, false, 187);

	/* Chunked parity: every listed T, d 64 and 128, GDN and KDA, value
	 * heads a multiple of q/k heads, the chunk length rotating; B = 2 for
	 * the shorter ones (several sequences). */
	for (int kda = 0; kda < 2; kda++)
		for (int d = 64; d <= 128; d += 64)
			for (size_t i = 0; i < sizeof(Ts) / sizeof(Ts[0]); i++) {
				const int chunk = chunks[(i + (size_t)d / 64 + (size_t)kda) % 3];

				gdn_chunk_case(e, d, 2, 4, Ts[i], Ts[i] <= 512 ? 2 : 1, kda, 0.3, chunk,
					       chunk_path(chunk), seed++);
			}
	/* Weak decay (the state remembers the whole sequence) and very strong
	 * per-channel decay (cumulative gates near -1300 in a chunk of 64: no
	 * exp of a positive difference may appear). */
	gdn_chunk_case(e, 128, 1, 3, 2048, 1, true, 0.01, 64, chunk_path(64), seed++);
	gdn_chunk_case(e, 128, 1, 3, 2048, 1, false, 0.01, 64, chunk_path(64), seed++);
	gdn_chunk_case(e, 128, 2, 2, 1000, 1, true, 10.0, 64, chunk_path(64), seed++);
	gdn_chunk_case(e, 64, 2, 2, 1000, 1, true, 10.0, 16, chunk_path(16), seed++);
	/* Automatic choice (cuda_gdn_select.cu): C = 16 (few or many (b, h),
	 * short or long T), serial below T = 8. */
	gdn_chunk_case(e, 128, 2, 4, 2048, 1, true, 0.3, 0, chunk_path(16), seed++);
	gdn_chunk_case(e, 64, 8, 64, 2048, 1, true, 0.3, 0, chunk_path(16), seed++);
	gdn_chunk_case(e, 128, 2, 4, 8, 2, false, 0.3, 0, chunk_path(16), seed++);
	gdn_chunk_case(e, 128, 2, 4, 7, 2, true, 0.3, 0, GP_SERIAL, seed++);
	gdn_chunk_case(e, 128, 2, 4, 1, 2, true, 0.3, 0, GP_SERIAL, seed++);
	/* Fallbacks to the serial form, counted with their reason: d_v not a
	 * multiple of 32; a workspace below one (b, h)'s share.  And a
	 * workspace for one (b, h) only: the (b, h) run in groups. */
	gdn_build(&c, 64, 48, 2, 2, 256, 1, true, true, false, 0.3, seed++);
	c.p.i[1] = 32;
	c.gdn_path = GP_FALLBACK + KERN_GDN_FB_LAYOUT;
	c.metric = M_GDN;
	c.tol = 1e-4;
	go(e, &c);
	gdn_build(&c, 64, 64, 2, 2, 256, 1, false, true, false, 0.3, seed++);
	c.p.i[1] = 32;
	c.ws_limit = kern_cuda_gdn_ws_bytes(64, 64, 1, 256, 1, 32, false) - 512;
	c.gdn_path = GP_FALLBACK + KERN_GDN_FB_NOMEM;
	c.metric = M_GDN;
	c.tol = 1e-4;
	go(e, &c);
	gdn_build(&c, 128, 128, 1, 3, 700, 2, true, true, false, 0.3, seed++);
	snprintf(c.name + strlen(c.name), sizeof(c.name) - strlen(c.name), " C=32, groups of 1");
	c.p.i[1] = 32;
	c.ws_limit = kern_cuda_gdn_ws_bytes(128, 128, 1, 700, 1, 32, false);
	c.cpu_serial = true;
	c.gdn_path = chunk_path(32);
	c.metric = M_GDN_RMSE;
	c.tol = 5e-3;
	go(e, &c);
	gdn_graph_case(e);
	/* The split precision: every chunk length, d 64 and 128, GDN and KDA,
	 * ragged and long T, strong decay, the automatic choice, ggml's head
	 * order, groups of one (b, h); C = 64 at d = 128 does not fit the
	 * shared memory with two planes and falls back ("arch"). */
	for (int kda = 0; kda < 2; kda++) {
		gdn_split_case(e, 128, 2, 4, 300, 2, kda, 0.3, 16, chunk_path(16), false, false, seed++);
		gdn_split_case(e, 128, 2, 4, 2048, 1, kda, 0.3, 32, chunk_path(32), false, false, seed++);
		gdn_split_case(e, 64, 2, 4, 513, 2, kda, 0.3, 64, chunk_path(64), false, false, seed++);
		gdn_split_case(e, 64, 2, 2, 1000, 1, kda, 10.0, 16, chunk_path(16), false, false, seed++);
		gdn_split_case(e, 128, 1, 3, 8192, 1, kda, 0.01, 0, chunk_path(16), false, false, seed++);
		gdn_split_case(e, 128, 2, 6, 300, 2, kda, 0.3, 0, chunk_path(16), true, false, seed++);
		gdn_split_case(e, 64, 3, 6, 90, 2, kda, 0.3, 0, chunk_path(16), true, true, seed++);
	}
	gdn_split_case(e, 128, 2, 2, 256, 1, true, 0.3, 64, GP_FALLBACK + KERN_GDN_FB_ARCH, false,
		       false, seed++);
	/* ggml's head order (i[3] = 1: value head h reads q/k head h % H_k),
	 * as the ggml engine runs ggml's op, without the in-op L2 norm:
	 * serial, chunked, and chunked with the (b, h) in groups of one. */
	for (int kda = 0; kda < 2; kda++) {
		gdn_build(&c, 128, 128, 2, 6, 100, 2, kda, false, false, 0.3, seed++);
		gdn_tiled(&c);
		c.p.i[2] = 1;
		c.gdn_path = GP_SERIAL;
		c.metric = M_GDN;
		c.tol = 1e-4;
		go(e, &c);
		gdn_build(&c, 128, 128, 2, 6, 300, 2, kda, false, false, 0.3, seed++);
		gdn_tiled(&c);
		c.cpu_serial = true;
		c.gdn_path = chunk_path(16);
		c.metric = M_GDN_RMSE;
		c.tol = 5e-3;
		go(e, &c);
		gdn_build(&c, 64, 64, 3, 6, 90, 2, kda, false, false, 0.3, seed++);
		gdn_tiled(&c);
		snprintf(c.name + strlen(c.name), sizeof(c.name) - strlen(c.name), " groups of 1");
		c.ws_limit = kern_cuda_gdn_ws_bytes(64, 64, 1, 90, 1, 16, false);
		c.cpu_serial = true;
		c.gdn_path = chunk_path(16);
		c.metric = M_GDN_RMSE;
		c.tol = 5e-3;
		go(e, &c);
	}
}

/* MUL_MAT: weights [K, N, B2, B3] of wt, activations [K, M, C2, C3]. */
static void mm_case(struct env *e, int wt, int64_t K, int64_t N, int64_t M, int64_t B2,
		    int64_t B3, int64_t C2, int64_t C3, const int *w_order, uint64_t w_gap,
		    const int *x_order, double tol, uint64_t seed)
{
	struct tc c;

	tc_init(&c, PPRPC_OP_MUL_MAT, "%s K %lld N %lld M %lld w[%lld,%lld] x[%lld,%lld]%s%s",
		kern_dtype(wt)->name, (long long)K, (long long)N, (long long)M, (long long)B2,
		(long long)B3, (long long)C2, (long long)C3, w_order || w_gap > 1 ? " w-strided" : "",
		x_order ? " x-transposed" : "");
	tt_new(&c.src[0], wt, K, N, B2, B3, w_order, w_gap, 0);
	if (wt == PPRPC_Q8_0)
		fill_q8(&c.src[0], seed, 1.0);
	else
		fill(&c.src[0], seed, -1, 1);
	tt_new(&c.src[1], PPRPC_F32, K, M, C2, C3, x_order, 1, 0);
	fill(&c.src[1], seed + 1, -1, 1);
	c.metric = M_RMSE;
	c.tol = tol;
	go(e, &c);
}

static void t_mul_mat(struct env *e)
{
	struct tc c;

	mm_case(e, PPRPC_F32, 64, 48, 5, 1, 1, 1, 1, NULL, 1, NULL, 1e-5, 190);
	mm_case(e, PPRPC_F32, 33, 17, 1, 1, 1, 1, 1, NULL, 1, NULL, 1e-5, 191);
	mm_case(e, PPRPC_F32, 96, 40, 7, 2, 1, 6, 2, NULL, 1, NULL, 1e-5, 192);
	mm_case(e, PPRPC_F32, 96, 40, 7, 3, 2, 3, 2, NULL, 1, NULL, 1e-5, 193);
	mm_case(e, PPRPC_F32, 70, 30, 9, 1, 1, 2, 1, ORD_T01, 1, ORD_T01, 1e-5, 194);
	mm_case(e, PPRPC_F32, 1024, 1000, 128, 1, 1, 1, 1, NULL, 1, NULL, 1e-5, 195);
	mm_case(e, PPRPC_F16, 256, 96, 33, 1, 1, 1, 1, NULL, 1, NULL, 1e-3, 196);
	mm_case(e, PPRPC_F16, 4096, 512, 1, 1, 1, 1, 1, NULL, 1, NULL, 1e-3, 197);
	mm_case(e, PPRPC_F16, 4096, 1024, 77, 1, 1, 1, 1, NULL, 1, NULL, 1e-3, 198);
	mm_case(e, PPRPC_F16, 64, 24, 5, 2, 1, 4, 3, NULL, 2, ORD_T01, 1e-3, 199);
	mm_case(e, PPRPC_BF16, 256, 96, 33, 1, 1, 1, 1, NULL, 1, NULL, 5e-3, 200);
	mm_case(e, PPRPC_BF16, 2048, 300, 3, 1, 1, 2, 1, NULL, 1, NULL, 5e-3, 201);
	mm_case(e, PPRPC_BF16, 128, 64, 16, 3, 1, 3, 1, ORD_T01, 1, NULL, 5e-3, 202);
	/* Q8_0: direct kernel up to M = 16, f16 tensor cores above. */
	mm_case(e, PPRPC_Q8_0, 4096, 512, 1, 1, 1, 1, 1, NULL, 1, NULL, 1e-5, 203);
	mm_case(e, PPRPC_Q8_0, 256, 100, 7, 1, 1, 1, 1, NULL, 1, NULL, 1e-5, 204);
	mm_case(e, PPRPC_Q8_0, 512, 64, 16, 2, 1, 4, 2, NULL, 1, ORD_T01, 1e-5, 205);
	mm_case(e, PPRPC_Q8_0, 512, 64, 17, 1, 1, 1, 1, NULL, 1, NULL, 1e-3, 206);
	mm_case(e, PPRPC_Q8_0, 2048, 700, 130, 1, 1, 1, 1, NULL, 1, NULL, 1e-3, 207);
	mm_case(e, PPRPC_Q8_0, 96, 40, 33, 2, 1, 6, 2, NULL, 1, ORD_T01, 1e-3, 208);

	tc_init(&c, PPRPC_OP_MUL_MAT, "f16 with a 1 KiB workspace: PPRPC_ELIMIT");
	tt_new(&c.src[0], PPRPC_F16, 256, 64, 1, 1, NULL, 1, 0);
	fill(&c.src[0], 209, -1, 1);
	tt_new(&c.src[1], PPRPC_F32, 256, 32, 1, 1, NULL, 1, 0);
	fill(&c.src[1], 210, -1, 1);
	c.ws_limit = 1024;
	c.expect = PPRPC_ELIMIT;
	go(e, &c);
}

int main(void)
{
	struct env e = { 0 };
	cudaStream_t stream = NULL;
	void *blas = NULL;
	char err[512] = "";
	int ndev = 0, rc;
	cudaError_t ce;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	ce = cudaGetDeviceCount(&ndev);
	if (ce != cudaSuccess || ndev < 1) {
		printf("no CUDA device: %s\n", ce != cudaSuccess ? cudaGetErrorString(ce)
								  : "device count is 0");
		printf("cuda ops: 0 passed, 0 failed\n");
		return 0;
	}
	e.cpu.nthreads = ncpu > 0 ? (int)(ncpu > 64 ? 64 : ncpu) : 1;
	if (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess ||
	    cudaMalloc(&e.gpu.workspace, WS_BYTES) != cudaSuccess ||
	    cudaMalloc((void **)&e.status, sizeof(int32_t)) != cudaSuccess) {
		printf("FAIL setup: %s\n", cudaGetErrorString(cudaGetLastError()));
		printf("cuda ops: 0 passed, 1 failed\n");
		return 1;
	}
	{
		struct cudaDeviceProp prop;

		if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
			printf("device 0: %s (sm_%d%d), %d CPU threads for the reference\n", prop.name,
			       prop.major, prop.minor, e.cpu.nthreads);
	}
	e.gpu.stream = stream;
	e.gpu.workspace_bytes = WS_BYTES;
	e.gpu.gdn_stats = &e.gdn;

	rc = kern_cuda_preload(err, sizeof(err));
	printf("%s %-15s %-62s %s\n", rc ? "FAIL" : "ok  ", "preload", "every kernel loaded",
	       rc ? err : "");
	rc ? e.failed++ : e.passed++;
	rc = kern_cuda_blas_create(stream, &blas, err, sizeof(err));
	printf("%s %-15s %-62s %s\n", rc ? "FAIL" : "ok  ", "cublas", "dlopen + handle",
	       rc ? err : "");
	rc ? e.failed++ : e.passed++;
	e.gpu.blas = blas;

	t_binary(&e);
	t_cpy_concat(&e);
	t_unary(&e);
	t_norm(&e);
	t_softmax(&e);
	t_argmax(&e);
	t_rows(&e);
	t_rope(&e);
	t_attention(&e);
	t_gdn(&e);
	t_mul_mat(&e);

	kern_cuda_blas_destroy(blas);
	cudaFree(e.gpu.workspace);
	cudaFree(e.status);
	cudaStreamDestroy(stream);
	printf("cuda ops: %d passed, %d failed\n", e.passed, e.failed);
	return e.failed ? 1 : 0;
}
