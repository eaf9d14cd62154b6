/*
 * rules_matmul.c — MUL_MAT, MUL_MAT_ID and OUT_PROD.
 */
#include "rules_impl.h"

/* src0 types both ggml-cpu (a vec_dot in type_traits_cpu: Q8_1 and Q8_K have
 * none, integer types neither) and ggml-cuda's supports_op accept, plus TQ*
 * (CPU only; CUDA's supports_op refuses them). */
#define TB_MATMUL_W (TB_FLOAT | TB(GGML_TYPE_Q1_0) | TB(GGML_TYPE_Q2_0) | TB(GGML_TYPE_Q4_0) | \
	TB(GGML_TYPE_Q4_1) | TB(GGML_TYPE_Q5_0) | TB(GGML_TYPE_Q5_1) | TB(GGML_TYPE_Q8_0) | \
	TB(GGML_TYPE_MXFP4) | TB(GGML_TYPE_NVFP4) | TB(GGML_TYPE_Q2_K) | TB(GGML_TYPE_Q3_K) | \
	TB(GGML_TYPE_Q4_K) | TB(GGML_TYPE_Q5_K) | TB(GGML_TYPE_Q6_K) | TB(GGML_TYPE_IQ2_XXS) | \
	TB(GGML_TYPE_IQ2_XS) | TB(GGML_TYPE_IQ3_XXS) | TB(GGML_TYPE_IQ3_S) | TB(GGML_TYPE_IQ2_S) | \
	TB(GGML_TYPE_IQ1_S) | TB(GGML_TYPE_IQ1_M) | TB(GGML_TYPE_IQ4_NL) | TB(GGML_TYPE_IQ4_XS) | \
	TB(GGML_TYPE_TQ1_0) | TB(GGML_TYPE_TQ2_0))

/* src1 is F32, or already in src0's vec_dot type for the float types
 * (ggml-cpu converts anything else from F32 and asserts src1 is F32;
 * ggml-cuda refuses F16 activations with non-F16 weights). */
static int matmul_types(struct rule_ctx *c, const struct ggml_tensor *a, const struct ggml_tensor *b)
{
	TRY(rules_type(c, a, "src0", TB_MATMUL_W));
	if (b->type == GGML_TYPE_F32)
		return 0;
	REQ(c, (b->type == GGML_TYPE_F16 && a->type == GGML_TYPE_F16) ||
	       (b->type == GGML_TYPE_BF16 && a->type == GGML_TYPE_BF16),
	    "src1 type %s with src0 type %s (src1 must be F32, or F16/BF16 like src0)",
	    ggml_type_name(b->type), ggml_type_name(a->type));
	return 0;
}

/* The precision parameters of MUL_MAT and MUL_MAT_ID: op_params[0] the
 * accumulator, [3] what src1 may be converted to (v0.5.0's ggml_prec_set_acc /
 * ggml_prec_set_src; [2] is src0's slot, which ggml never sets).  ggml-cpu
 * reads none of them; ggml-cuda's mat-vec takes any nonzero accumulator as
 * F32 and its supports_op refuses MUL_MAT_ID with src1 F32.  v0.4.0 knows
 * op_params[0] alone, as DEFAULT or F32. */
static bool prec_known(int32_t p, bool src)
{
#if PPRPC_LLAMA_RELEASE_NUM >= 500
	return p == GGML_PREC_UNDEFINED || p == GGML_PREC_F32 || p == GGML_PREC_BF16 || p == GGML_PREC_F16 ||
	       (src && (p == GGML_PREC_Q8 || p == GGML_PREC_Q4));
#else
	return p == GGML_PREC_DEFAULT || p == GGML_PREC_F32 || (src && p == 0);
#endif
}

static int matmul_prec(struct rule_ctx *c)
{
	const int32_t acc = rules_i32(c->node, 0), src0 = rules_i32(c->node, 2), src1 = rules_i32(c->node, 3);

	REQ(c, prec_known(acc, false), "unknown accumulator precision %d", acc);
	REQ(c, src0 == 0, "src0 precision %d: ggml sets none", src0);
	REQ(c, prec_known(src1, true), "unknown src1 precision %d", src1);
#if PPRPC_LLAMA_RELEASE_NUM < 500
	REQ(c, src1 == 0, "src1 precision %d: this ggml has none", src1);
#endif
	return 0;
}

/* both kernels: rows of src0 and src1 are contiguous, dst is not permuted */
static int matmul_layout(struct rule_ctx *c, const struct ggml_tensor *a, const struct ggml_tensor *b)
{
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_nb0(c, b, "src1"));
	TRY(rules_strides_elems(c, b, "src1"));
	if (ggml_blck_size(a->type) == 1)
		TRY(rules_strides_elems(c, a, "src0"));
	return 0;
}

/*
 * MUL_MAT preconditions:
 * cpu: ggml-cpu/ggml-cpu.c:1277 asserts dst [ne01, ne11, ne12, ne13] (1277-1280)
 * cpu: ggml-cpu/ggml-cpu.c:1283 asserts nb00, nb10 the element sizes; ggml-cpu.c:1287 nb0 == 4 and nb0 <= nb1 <= nb2 <= nb3 (1288-1290)
 * cpu: ggml-cpu/ggml-cpu.c:1298 r2 = ne12 / ne02, r3 = ne13 / ne03: ne02, ne03 > 0 and dividing
 * cpu: ggml-cpu/ggml-cpu.c:1306 llamafile_sgemm on a contiguous src1 with lda = nb01 / type size, ldb = nb11 / type size (used for rows < ne only)
 * cpu: ggml-cpu/ggml-cpu.c:1332 src1 converted by vec_dot_type's from_float must be F32 (or F16 into an F32 vec_dot_type, 1334)
 * cpu: ggml-cpu/ggml-cpu.c:2892 scratch = row_size(vec_dot_type, nelements(src1)); vec_dot_type blocks (Q8_0 32, Q8_1 32, Q8_K 256) divide every accepted src0 block (Q1_0 128, Q2_0 64, NVFP4 64, K 256)
 * cpu: ggml-cpu/ggml-cpu.c:1526 src1 columns flat (i11 + i12*ne11 + ...)*row_size when contiguous or converted, else by nb11..13
 * cuda: ggml-cuda/ggml-cuda.cu:1426 s01 = nb01 / type size, ggml-cuda.cu:1432 s11 = nb11 / type size, passed to cuBLAS as lda / ldb (1546-1567): >= ne00, or CUBLAS_CHECK aborts
 * cuda: ggml-cuda/ggml-cuda.cu:1425 asserts nb00, nb10 the element sizes
 * cuda: ggml-cuda supports_op refuses F16 src1 with non-F16 weights and TQ* weights (rules: matmul_types)
 */
int rule_mul_mat(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0), *b = rules_src(c, 1);

	/* ggml_can_mul_mat, with the modulo guarded (a zero ne[2] would trap) */
	REQ(c, a->ne[0] == b->ne[0], "src0 ne[0]=%lld != src1 ne[0]=%lld", (long long)a->ne[0], (long long)b->ne[0]);
	REQ(c, a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0,
	    "src0 " NE_FMT " cannot be broadcast over src1 " NE_FMT, NE_ARGS(a), NE_ARGS(b));
	REQ(c, !ggml_is_transposed(a), "src0 must not be transposed");
	TRY(rules_new4(c, GGML_TYPE_F32, a->ne[1], b->ne[1], b->ne[2], b->ne[3]));

	const int32_t hint = rules_i32(n, 1);
	TRY(matmul_prec(c));
	REQ(c, hint == GGML_HINT_NONE || hint == GGML_HINT_SRC0_IS_HADAMARD, "unknown hint %d", hint);

	TRY(matmul_types(c, a, b));
	TRY(matmul_layout(c, a, b));
	/* ggml-cuda's cuBLAS paths take nb01 / nb11 in elements as lda / ldb,
	 * which cuBLAS refuses (and CUBLAS_CHECK aborts) below the row length;
	 * for a size-1 dim ggml_is_contiguous lets any stride through.
	 * (ggml_row_size's plain assert on the block holds: ggml_wire.c checks it.) */
	REQ(c, a->nb[1] >= ggml_row_size(a->type, a->ne[0]), "src0 nb[1]=%zu below its row size %zu", a->nb[1],
	    ggml_row_size(a->type, a->ne[0]));
	REQ(c, b->nb[1] >= ggml_row_size(b->type, b->ne[0]), "src1 nb[1]=%zu below its row size %zu", b->nb[1],
	    ggml_row_size(b->type, b->ne[0]));
	if (hint == GGML_HINT_SRC0_IS_HADAMARD) {
		/* ggml-cpu's fwht writes ne10 floats per result row and asserts a power
		 * of two; ggml-cuda's asserts src1 and the result have the same shape */
		REQ(c, a->ne[0] == a->ne[1], "Hadamard src0 must be square, is " NE_FMT, NE_ARGS(a));
		REQ(c, (b->ne[0] & (b->ne[0] - 1)) == 0, "Hadamard size %lld is not a power of two", (long long)b->ne[0]);
		TRY(rules_type(c, b, "src1 (Hadamard)", TB_F32));
	}
	return 0;
}

/*
 * MUL_MAT_ID preconditions:
 * cpu: ggml-cpu/ggml-cpu.c:1571 asserts nb00, nb10 the element sizes; ggml-cpu.c:1575 dst nb0 == 4, not permuted (1576-1578)
 * cpu: ggml-cpu/ggml-cpu.c:1609 asserts wsize covers src1 converted + n_as counters + n_as*ids->ne[0]*ids->ne[1] row maps (planned at ggml-cpu.c:2908-2917: charged by the engine, F7)
 * cpu: ggml-cpu/ggml-cpu.c:1620 asserts src1 F32 when it is not vec_dot_type
 * cpu: ggml-cpu/ggml-cpu.c:1659 matrix_row_counts[id] with the id read from data (ggml_guard.c)
 * cuda: ggml-cuda/mmid.cu:136 asserts n_tokens < 2^22; mmid.cu:137 n_expert_used < 2^10; mmid.cu:147 shared memory for them
 * cuda: ggml-cuda/ggml-cuda.cu:1915 asserts src1 F32 whatever src0 is (its supports_op, ggml-cuda.cu:5199, lets F16 x F16 through)
 * cuda: ggml-cuda/ggml-cuda.cu:1955 asserts nb12 % nb11 == 0 and nb2 % nb1 == 0 on the gather path
 *  as  -> [cols, rows, n_expert]
 *  b   -> [cols, n_expert_used (or 1, broadcast), n_tokens]
 *  ids -> [n_expert_used, n_tokens] (i32)
 *  dst -> [rows, n_expert_used, n_tokens]
 */
int rule_mul_mat_id(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x7, 0));
	const struct ggml_tensor *as = rules_src(c, 0), *b = rules_src(c, 1), *ids = rules_src(c, 2);

	REQ(c, !ggml_is_transposed(as), "src0 must not be transposed");
	TRY(rules_type(c, ids, "ids", TB_I32));
	REQ(c, as->ne[3] == 1, "src0 must be 3-d, is " NE_FMT, NE_ARGS(as));
	REQ(c, b->ne[3] == 1, "src1 must be 3-d, is " NE_FMT, NE_ARGS(b));
	REQ(c, ids->ne[2] == 1 && ids->ne[3] == 1, "ids must be 2-d, is " NE_FMT, NE_ARGS(ids));
	REQ(c, ids->ne[1] == b->ne[2], "ids ne[1]=%lld != src1 ne[2]=%lld", (long long)ids->ne[1], (long long)b->ne[2]);
	REQ(c, as->ne[0] == b->ne[0], "src0 ne[0]=%lld != src1 ne[0]=%lld", (long long)as->ne[0], (long long)b->ne[0]);
	REQ(c, b->ne[1] > 0 && ids->ne[0] % b->ne[1] == 0, "ids ne[0]=%lld is not a multiple of src1 ne[1]=%lld",
	    (long long)ids->ne[0], (long long)b->ne[1]);
	TRY(rules_new4(c, GGML_TYPE_F32, as->ne[1], ids->ne[0], b->ne[2], 1));
	TRY(matmul_prec(c));

	TRY(matmul_types(c, as, b));
	/* ggml-cuda's MUL_MAT_ID aborts on any other src1 */
	TRY(rules_type(c, b, "src1 (MUL_MAT_ID)", TB_F32));
	TRY(matmul_layout(c, as, b));
	TRY(rules_nb0(c, ids, "ids"));
	TRY(rules_strides_elems(c, ids, "ids"));
	/* ggml-cuda: mm_ids_helper packs (token, slot) in 22 + 10 bits; the
	 * grouped paths index src1 rows by nb12 / nb11 */
	REQ(c, ids->ne[0] < (1 << 10), "%lld experts per token exceed the 1023 ggml-cuda handles", (long long)ids->ne[0]);
	REQ(c, ids->ne[1] < (1 << 22), "%lld tokens exceed the 2^22 ggml-cuda handles", (long long)ids->ne[1]);
	REQ(c, b->nb[1] > 0 && b->nb[2] % b->nb[1] == 0, "src1 nb[2]=%zu must be a multiple of nb[1]=%zu",
	    b->nb[2], b->nb[1]);
	return 0;
}

/*
 * ggml_out_prod(a, b): [a->ne[0], b->ne[0], b->ne[2], b->ne[3]] (training; F32 on both backends)
 * cpu: ggml-cpu/ops.cpp:4371 F32: dst rows by nb, src0 by nb01..03 with i02 = i12 / (ne12/ne02): ne02, ne03 > 0 and dividing
 * cuda: ggml-cuda/out-prod.cu:33 asserts F32 x3; out-prod.cu:37 ne01 == ne11, ne0 == ne00, ne1 == ne10 (37-39); out-prod.cu:41 broadcast divisible (41-42)
 */
int rule_out_prod(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *a = rules_src(c, 0), *b = rules_src(c, 1);

	REQ(c, a->ne[1] == b->ne[1], "src0 ne[1]=%lld != src1 ne[1]=%lld", (long long)a->ne[1], (long long)b->ne[1]);
	REQ(c, a->ne[2] > 0 && a->ne[3] > 0 && b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0,
	    "src0 " NE_FMT " cannot be broadcast over src1 " NE_FMT, NE_ARGS(a), NE_ARGS(b));
	REQ(c, !ggml_is_transposed(a), "src0 must not be transposed");
	TRY(rules_new4(c, GGML_TYPE_F32, a->ne[0], b->ne[0], b->ne[2], b->ne[3]));
	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_type(c, b, "src1", TB_F32));
	TRY(rules_nb0(c, a, "src0"));
	return 0;
}
