/*
 * rules_copy.c — CPY (ggml_cpy and ggml_cast), CONT, DUP.
 *
 * All three run ggml-cpu's ggml_compute_forward_dup (ggml-cuda's
 * ggml_cuda_cpy), whose type pairs are: same type (a byte copy), between
 * F32/F16/BF16, F32 <-> I32, F32/F16/BF16 -> a quantized type that has a
 * from_float (into a contiguous destination), and quantized -> F32.
 * ggml-cuda's supports_op lists its own, narrower, pairs.
 */
#include "rules_impl.h"

/* quantized types ggml-cpu can produce: type_traits_cpu[].from_float set
 * (cpu: ggml-cpu/ggml-cpu.c:215..415; NULL or commented out for IQ2_XXS,
 * IQ2_XS, IQ3_XXS, IQ3_S, IQ2_S, IQ1_S, IQ1_M, and dup_to_q aborts,
 * ggml-cpu/ops.cpp:292-294); Q8_1 and Q8_K have a from_float but no to_float
 * (ggml.c:745, ggml.c:880): intermediate types of the matmul, nothing can
 * read them back, so they are not produced either */
#define TB_CPU_FROM_FLOAT (TB(GGML_TYPE_Q1_0) | TB(GGML_TYPE_Q2_0) | TB(GGML_TYPE_Q4_0) | TB(GGML_TYPE_Q4_1) | \
	TB(GGML_TYPE_Q5_0) | TB(GGML_TYPE_Q5_1) | TB(GGML_TYPE_Q8_0) | TB(GGML_TYPE_MXFP4) | TB(GGML_TYPE_NVFP4) | \
	TB(GGML_TYPE_Q2_K) | TB(GGML_TYPE_Q3_K) | TB(GGML_TYPE_Q4_K) | TB(GGML_TYPE_Q5_K) | TB(GGML_TYPE_Q6_K) | \
	TB(GGML_TYPE_IQ4_NL) | TB(GGML_TYPE_IQ4_XS) | TB(GGML_TYPE_TQ1_0) | TB(GGML_TYPE_TQ2_0))

bool rules_can_quantize_to(enum ggml_type t)
{
	return ggml_is_quantized(t) && (TB(t) & TB_CPU_FROM_FLOAT) && rules_has_to_float(t);
}

/* ggml-cuda's same-type copy without an element kernel: a cudaMemcpy2D of
 * rows that are contiguous prefixes of both tensors (ggml_cuda_cpy_as_memcpy_2d) */
static bool memcpy_2d_ok(const struct ggml_tensor *src, const struct ggml_tensor *dst)
{
	if (!ggml_are_same_shape(src, dst))
		return false;
	size_t block = ggml_type_size(src->type);
	int d = 0;
	for (; d < GGML_MAX_DIMS; d++) {
		if (src->nb[d] != block || dst->nb[d] != block)
			break;
		block *= (size_t)src->ne[d];
	}
	if (d == 0 || d == GGML_MAX_DIMS)
		return false;
	for (int i = d + 1; i < GGML_MAX_DIMS; i++)
		if (src->ne[i] != 1)
			return false;
	return src->nb[d] >= block && dst->nb[d] >= block;
}

/*
 * ggml-cuda's float copies take a tiled transpose when src0 looks like a
 * transposed matrix (cuda: ggml-cuda/cpy.cu:461 can_be_transposed: nb01 ==
 * element size, ne03 == 1, nb02 == ne00*ne01*size).  That kernel ignores nb00
 * and the destination's strides: it reads src[imat*n + i00*ne01 + i01] and
 * writes dst[imat*n + i01*ne00 + i00] densely (cuda: ggml-cuda/cpy.cu:78,
 * cpy.cu:89).  Both are in bounds only if src0 really is that layout
 * (ne00 == 1 or nb00 == ne01*size) and the destination is dense.
 */
static int cuda_transpose_ok(struct rule_ctx *c, const struct ggml_tensor *src, const struct ggml_tensor *dst)
{
	const size_t es = ggml_type_size(src->type);
	const bool transposed = src->nb[1] == es && src->ne[3] == 1 &&
				src->nb[2] == (size_t)src->ne[0] * (size_t)src->ne[1] * es;
	if (!transposed || (src->type == dst->type && ggml_is_contiguous(src) && ggml_is_contiguous(dst)))
		return 0;
	REQ(c, src->ne[0] == 1 || src->nb[0] == (size_t)src->ne[1] * es,
	    "src0 nb " "[%zu,%zu,%zu] takes ggml-cuda's transpose copy but is not a transposed matrix",
	    src->nb[0], src->nb[1], src->nb[2]);
	return rules_contiguous(c, dst, "destination of a transposing copy");
}

/*
 * src -> dst, dst being the node (its layout is the destination's).
 * What the kernels read (paths under ext/llama.cpp-v0.5.0/ggml/src):
 * cpu: ggml-cpu/ops.cpp:526 dup dispatch: same type -> dup_bytes; F32/F16/BF16 <-> each other, F32 <-> I32 -> dup_flt; F32/F16/BF16 -> quantized -> dup_to_q; quantized -> F32 -> dup_from_q; anything else aborts
 * cpu: ggml-cpu/ops.cpp:346 dup_bytes: byte copy; rs = ne00*type_size (ops.cpp:375) is only right for block size 1, so a quantized type is copied only contiguous or same-shape by rows
 * cpu: ggml-cpu/ops.cpp:292 dup_to_q: dst contiguous, nb00 == sizeof(src_t), from_float set, else abort
 * cpu: ggml-cpu/ops.cpp:297 dup_to_q: scratch row of ne00 floats per thread in wdata, which ggml-cpu/ggml-cpu.c:2866 sizes as dst ne[0] floats per thread: src ne[0] <= dst ne[0]
 * cpu: ggml-cpu/ops.cpp:313 dup_to_q: quantize_row_q of ne00 elements: src ne[0] a whole number of dst blocks
 * cpu: ggml-cpu/ops.cpp:485 dup_from_q: to_float of src0's type, called without a NULL check
 * cpu: ggml-cpu/ops.cpp:491 dup_from_q: dst nb[0] == sizeof(float); ops.cpp:493 ne10 % qk == 0 or dst contiguous
 * cpu: ggml-cpu/ops.cpp:506 dup_from_q: uint32_t element index: nelements < 2^32
 * cuda: ggml-cuda/cpy.cu:466 same type and both contiguous -> memcpy; cpy.cu:395 same type, same shape, a contiguous prefix -> cudaMemcpy2D (memcpy_2d_ok below)
 * cuda: ggml-cuda/cpy.cu:479..616 type pairs with a kernel: F32/F16/BF16 among themselves, I32, I16 to themselves, F32 <-> I32, F32 <-> Q8_0/Q4_0/Q4_1/Q5_0/Q5_1, F32 -> IQ4_NL; others abort (cpy.cu:617) and are refused by its supports_op (ggml-cuda.cu:5315), which the engine asks too
 * cuda: ggml-cuda/cpy.cu:125 cpy_f32_q: qk source floats from a block start read densely: src nb[0] == 4 and ne00 % qk == 0
 * cuda: ggml-cuda/cpy.cu:152 cpy_q_f32: qk floats written densely per block: dst nb[0] == 4 and ne10 % qk == 0 or dst contiguous
 * cuda: ggml-cuda/cpy.cu:461 the transposing float copy (cuda_transpose_ok)
 * cuda: ggml-cuda/cpy.cu:200 num_blocks <= INT_MAX: nelements / 256 < 2^31, implied by nelements < 2^32
 */
static int copy_types(struct rule_ctx *c, const struct ggml_tensor *src, const struct ggml_tensor *dst)
{
	const enum ggml_type st = src->type, dt = dst->type;

	if (st == dt) {
		/* ggml-cpu copies any layout of a block-size-1 type byte-wise;
		 * ggml-cuda has element kernels for F32, F16, BF16 and I32 only and
		 * aborts on other types unless the copy is a (2-d) memcpy (its
		 * supports_op does not check for CONT and DUP) */
		if (!rules_type_is(src, TB_FLOAT | TB_I32))
			REQ(c, (ggml_is_contiguous(src) && ggml_is_contiguous(dst)) || memcpy_2d_ok(src, dst),
			    "a strided copy of %s", ggml_type_name(st));
		else
			TRY(cuda_transpose_ok(c, src, dst));
		return 0;
	}
	if (rules_type_is(src, TB_FLOAT) && rules_type_is(dst, TB_FLOAT))
		return cuda_transpose_ok(c, src, dst);
	if ((st == GGML_TYPE_F32 && dt == GGML_TYPE_I32) || (st == GGML_TYPE_I32 && dt == GGML_TYPE_F32))
		return 0;
	if (rules_type_is(src, TB_FLOAT) && ggml_is_quantized(dt)) {
		/* ggml-cpu dup_to_q: quantizes whole source rows into a dense destination */
		REQ(c, rules_can_quantize_to(dt), "cannot convert to %s", ggml_type_name(dt));
		TRY(rules_contiguous(c, dst, "destination"));
		TRY(rules_nb0(c, src, "src0"));
		REQ(c, src->ne[0] % ggml_blck_size(dt) == 0, "src0 rows of %lld elements cannot be quantized to %s",
		    (long long)src->ne[0], ggml_type_name(dt));
		/* the scratch row is sized from the destination's row, filled from the source's */
		REQ(c, src->ne[0] <= dst->ne[0], "src0 rows of %lld elements exceed the destination's rows of %lld "
		    "(ggml-cpu's scratch row)", (long long)src->ne[0], (long long)dst->ne[0]);
		return 0;
	}
	if (ggml_is_quantized(st) && dt == GGML_TYPE_F32) {
		/* ggml-cpu dup_from_q */
		REQ(c, rules_has_to_float(st), "%s has no dequantization (to_float)", ggml_type_name(st));
		REQ(c, (uint64_t)ggml_nelements(src) <= UINT32_MAX, "%lld elements (ggml-cpu indexes them in 32 bits)",
		    (long long)ggml_nelements(src));
		TRY(rules_nb0(c, dst, "destination"));
		REQ(c, dst->ne[0] % ggml_blck_size(st) == 0 || ggml_is_contiguous(dst),
		    "destination rows must hold whole %s blocks or be contiguous", ggml_type_name(st));
		return 0;
	}
	return rules_fail(c, "no kernel copies %s to %s", ggml_type_name(st), ggml_type_name(dt));
}

int rule_cpy(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0), *b = rules_src(c, 1);

	if (b == n) {
		/* ggml_cast: a new tensor that names itself as the destination */
		TRY(rules_new(c, n->type, a->ne));
	} else {
		REQ(c, ggml_nelements(a) == ggml_nelements(b), "src0 " NE_FMT " and destination " NE_FMT
		    " have different element counts", NE_ARGS(a), NE_ARGS(b));
		TRY(rules_view_tensor(c, b));
	}
	return copy_types(c, a, n);
}

/* the copy kernels of CPY (see rule_cpy: copy_types) over a new dense result */
int rule_cont(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);

	/* ggml_cont / ggml_cont_4d: a new tensor of a's type and element count */
	REQ(c, ggml_nelements(n) == ggml_nelements(a), "result " NE_FMT " and src0 " NE_FMT
	    " have different element counts", NE_ARGS(n), NE_ARGS(a));
	TRY(rules_new(c, a->type, n->ne));
	return copy_types(c, a, n);
}

/* the copy kernels of CPY (see rule_cpy: copy_types), the result new or src0 in place */
int rule_dup(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	TRY(rules_dup_or_inplace(c, rules_src(c, 0)));
	return copy_types(c, rules_src(c, 0), c->node);
}
