/*
 * rules_attn.c — SOFT_MAX (with optional mask and attention sinks) and
 * FLASH_ATTN_EXT.
 */
#include "rules_impl.h"

/* K/V types with a vec_dot / to_float in ggml-cpu (the matmul weight types) */
#define TB_KV (TB_FLOAT | TB(GGML_TYPE_Q1_0) | TB(GGML_TYPE_Q2_0) | TB(GGML_TYPE_Q4_0) | \
	TB(GGML_TYPE_Q4_1) | TB(GGML_TYPE_Q5_0) | TB(GGML_TYPE_Q5_1) | TB(GGML_TYPE_Q8_0) | \
	TB(GGML_TYPE_MXFP4) | TB(GGML_TYPE_NVFP4) | TB(GGML_TYPE_Q2_K) | TB(GGML_TYPE_Q3_K) | \
	TB(GGML_TYPE_Q4_K) | TB(GGML_TYPE_Q5_K) | TB(GGML_TYPE_Q6_K) | TB(GGML_TYPE_IQ4_NL) | \
	TB(GGML_TYPE_IQ4_XS))

static int sinks_check(struct rule_ctx *c, const struct ggml_tensor *sinks, int64_t n_head)
{
	TRY(rules_type(c, sinks, "sinks", TB_F32));
	REQ(c, sinks->ne[0] == n_head, "%lld sinks for %lld heads", (long long)sinks->ne[0], (long long)n_head);
	return rules_contiguous(c, sinks, "sinks");
}

/*
 * SOFT_MAX preconditions:
 * cpu: ggml-cpu/ops.cpp:5621 scratch (ne00 + CACHE_LINE_SIZE_F32)*ith floats; ggml-cpu.c:2936 plans ne0*n_tasks (+ a cache line per thread)
 * cpu: ggml-cpu/ops.cpp:5643 mask rows i01 (< mask ne1), i02 % ne12, i03 % ne13, ne00 elements each: mask ne0 == ne00, ne1 >= ne01, ne12/ne13 > 0 dividing
 * cpu: ggml-cpu/ops.cpp:5639 src0, dst by nb01..03 (index-bounded); ops.cpp:5626 sinks[i02]: one per head
 * cpu: ggml-cpu/ops.cpp:5615 ALiBi slopes from n_head = ne02 (log2 of 0 never reached: no rows)
 * cuda: ggml-cuda/softmax.cu:395 asserts F32 src0/dst, softmax.cu:398 mask F16 or F32
 * cuda: ggml-cuda/softmax.cu:340 grid (ne01, ne02, ne03): ne02, ne03 <= 65535 or the launch fails (CUDA_CHECK aborts)
 * cuda: ggml-cuda/softmax.cu:66 the flat row index is int, softmax.cu:72 rows read flat at rowx*ncols: contiguous src0/dst
 */
int rule_soft_max(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0x6));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0), *mask = rules_src(c, 1), *sinks = rules_src(c, 2);

	TRY(rules_contiguous(c, a, "src0"));
	TRY(rules_type(c, a, "src0", TB_F32));
	REQ(c, a->ne[2] <= 65535 && a->ne[3] <= 65535 && ggml_nrows(a) <= INT32_MAX,
	    "src0 " NE_FMT " exceeds ggml-cuda's grid (ne[2], ne[3] <= 65535, int rows)", NE_ARGS(a));
	if (mask) {
		TRY(rules_type(c, mask, "mask", TB_F16 | TB_F32));
		TRY(rules_contiguous(c, mask, "mask"));
		REQ(c, mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] && mask->ne[2] > 0 && mask->ne[3] > 0 &&
		       a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0,
		    "mask " NE_FMT " does not cover src0 " NE_FMT, NE_ARGS(mask), NE_ARGS(a));
	}
	REQ(c, !(rules_f32(n, 1) > 0.0f) || mask, "ALiBi (max_bias > 0) needs a mask");
	if (sinks)
		TRY(sinks_check(c, sinks, a->ne[2]));
	TRY(rules_dup_or_inplace(c, a));
	return rules_contiguous(c, n, "result");
}

/*
 * FLASH_ATTN_EXT preconditions:
 * cpu: ggml-cpu/ggml-cpu.c:2997 scratch from neq2, DK = k->ne[0], DV = v->ne[0] and n_tasks
 * cpu: ggml-cpu/ops.cpp:8690 K through its type's vec_dot, Q by vec_dot_type's from_float (asserted, 8693); ops.cpp:8691 V by to_float (asserted, 8694)
 * cpu: ggml-cpu/ops.cpp:8732 Q converted DK at a time: DK a multiple of K's vec_dot block (DK == k->ne[0], block-checked)
 * cpu: ggml-cpu/ops.cpp:8721 mask row iq1 (< mask ne1), KV positions < mask ne0, heads iq2 % mask ne2, iq3 % mask ne3
 * cpu: ggml-cpu/ops.cpp:8662 rk2 = neq2/nek2, ops.cpp:8725 divides by it (8665/8729 for V): neq2 a positive multiple of nek2, nev2
 * cuda: ggml-cuda/fattn.cu:772 supports_op is "a kernel exists for these head sizes and types" (ggml_cuda_get_best_fattn_kernel), which the engine asks before a run
 * cuda: ggml-cuda/fattn-common.cuh:994 Q and the result F32; fattn-common.cuh:997 nb[0] of Q, K, V the element size; fattn-common.cuh:1001 mask F16
 * cuda: ggml-cuda/fattn.cu:142 the sparse path only for n_kv_max > 0 (op_params[4]), then n_kv_max <= K rows (fattn-common.cuh:1101)
 */
int rule_flash_attn_ext(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x7, 0x18));
	const struct ggml_tensor *n = c->node, *q = rules_src(c, 0), *k = rules_src(c, 1), *v = rules_src(c, 2);
	const struct ggml_tensor *mask = rules_src(c, 3), *sinks = rules_src(c, 4);

	/* ggml_can_mul_mat(k, q), guarded, and the batch dims */
	REQ(c, k->ne[0] == q->ne[0], "k head size %lld != q head size %lld", (long long)k->ne[0], (long long)q->ne[0]);
	REQ(c, k->ne[2] > 0 && k->ne[3] > 0 && q->ne[2] % k->ne[2] == 0 && q->ne[3] % k->ne[3] == 0,
	    "k " NE_FMT " cannot be broadcast over q " NE_FMT, NE_ARGS(k), NE_ARGS(q));
	REQ(c, q->ne[3] == k->ne[3] && q->ne[3] == v->ne[3], "q, k and v must have the same ne[3]");
	/* the kernels walk V with K's row index and head ratio (ggml-cpu
	 * divides by neq2 / nev2) */
	REQ(c, v->ne[1] == k->ne[1], "v has %lld rows, k %lld", (long long)v->ne[1], (long long)k->ne[1]);
	REQ(c, v->ne[2] > 0 && q->ne[2] % v->ne[2] == 0, "v " NE_FMT " cannot be broadcast over q " NE_FMT,
	    NE_ARGS(v), NE_ARGS(q));
	if (mask) {
		TRY(rules_type(c, mask, "mask", TB_F16));
		TRY(rules_contiguous(c, mask, "mask"));
		REQ(c, mask->ne[2] > 0 && mask->ne[3] > 0 && q->ne[2] % mask->ne[2] == 0 && q->ne[3] % mask->ne[3] == 0,
		    "mask " NE_FMT " cannot be broadcast over q " NE_FMT, NE_ARGS(mask), NE_ARGS(q));
		/* ggml-cpu reads mask[iq1][ic] for every query row and KV position */
		REQ(c, mask->ne[0] >= k->ne[1] && mask->ne[1] >= q->ne[1],
		    "mask " NE_FMT " smaller than %lld KV x %lld queries", NE_ARGS(mask), (long long)k->ne[1],
		    (long long)q->ne[1]);
	}
	REQ(c, !(rules_f32(n, 1) > 0.0f) || mask, "ALiBi (max_bias > 0) needs a mask");
	if (sinks)
		TRY(sinks_check(c, sinks, q->ne[2]));

	const int32_t prec = rules_i32(n, 3), n_kv_max = rules_i32(n, 4);
	REQ(c, prec == GGML_PREC_DEFAULT || prec == GGML_PREC_F32, "unknown precision %d", prec);
	REQ(c, n_kv_max >= 0 && n_kv_max <= k->ne[1], "n_kv_max=%d outside 0..%lld", n_kv_max, (long long)k->ne[1]);

	TRY(rules_new4(c, GGML_TYPE_F32, v->ne[0], q->ne[2], q->ne[1], q->ne[3]));

	/* both kernels read Q as F32 rows; K needs a vec_dot, V a to_float */
	TRY(rules_type(c, q, "q", TB_F32));
	TRY(rules_type(c, k, "k", TB_KV));
	TRY(rules_type(c, v, "v", TB_KV));
	TRY(rules_nb0(c, q, "q"));
	TRY(rules_nb0(c, k, "k"));
	TRY(rules_nb0(c, v, "v"));
	/* the mask lists types; the trait is what the kernel calls */
	REQ(c, ggml_get_type_traits(k->type)->to_float && ggml_get_type_traits(v->type)->to_float,
	    "k %s / v %s without to_float", ggml_type_name(k->type), ggml_type_name(v->type));
	return 0;
}
