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

/* quantized types ggml-cpu cannot produce (no from_float; the same list as
 * ggml-cpu's supports_op for CPY and SET_ROWS) */
#define TB_NO_FROM_FLOAT (TB(GGML_TYPE_IQ3_XXS) | TB(GGML_TYPE_IQ3_S) | TB(GGML_TYPE_IQ2_XXS) | \
	TB(GGML_TYPE_IQ2_XS) | TB(GGML_TYPE_IQ2_S) | TB(GGML_TYPE_IQ1_S) | TB(GGML_TYPE_IQ1_M))

bool rules_can_quantize_to(enum ggml_type t)
{
	return ggml_is_quantized(t) && !(TB(t) & TB_NO_FROM_FLOAT) && t != GGML_TYPE_Q8_1;
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

/* src -> dst, dst being the node (its layout is the destination's) */
static int copy_types(struct rule_ctx *c, const struct ggml_tensor *src, const struct ggml_tensor *dst)
{
	const enum ggml_type st = src->type, dt = dst->type;

	if (st == dt) {
		/* ggml-cpu copies any layout byte-wise; ggml-cuda has element
		 * kernels for F32, F16, BF16 and I32 only and aborts on other
		 * types unless the copy is a (2-d) memcpy (its supports_op does not
		 * check for CONT and DUP) */
		if (!rules_type_is(src, TB_FLOAT | TB_I32))
			REQ(c, (ggml_is_contiguous(src) && ggml_is_contiguous(dst)) || memcpy_2d_ok(src, dst),
			    "a strided copy of %s", ggml_type_name(st));
		return 0;
	}
	if (rules_type_is(src, TB_FLOAT) && rules_type_is(dst, TB_FLOAT))
		return 0;
	if ((st == GGML_TYPE_F32 && dt == GGML_TYPE_I32) || (st == GGML_TYPE_I32 && dt == GGML_TYPE_F32))
		return 0;
	if (rules_type_is(src, TB_FLOAT) && ggml_is_quantized(dt)) {
		/* ggml-cpu dup_to_q: quantizes whole source rows into a dense destination */
		REQ(c, rules_can_quantize_to(dt), "cannot convert to %s", ggml_type_name(dt));
		TRY(rules_contiguous(c, dst, "destination"));
		TRY(rules_nb0(c, src, "src0"));
		REQ(c, src->ne[0] % ggml_blck_size(dt) == 0, "src0 rows of %lld elements cannot be quantized to %s",
		    (long long)src->ne[0], ggml_type_name(dt));
		return 0;
	}
	if (ggml_is_quantized(st) && dt == GGML_TYPE_F32) {
		/* ggml-cpu dup_from_q */
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

int rule_dup(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	TRY(rules_dup_or_inplace(c, rules_src(c, 0)));
	return copy_types(c, rules_src(c, 0), c->node);
}
