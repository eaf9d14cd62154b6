/*
 * rules_misc.c — SET (ggml_set*: write a strided block into a copy of, or
 * in place into, a tensor), ARANGE and POOL_2D (MiniMax-M3's block-sparse
 * attention), and DeepSeek's LIGHTNING_INDEXER and DSV4_HC_COMB/PRE/POST
 * (hyper-connections).
 */
#include <math.h>

#include "rules_impl.h"

/*
 * cpu: ggml-cpu/ops.cpp:4777 src0 and dst contiguous, same shape (ops.cpp:4776); ops.cpp:4818 src1 nb[0] == sizeof(float)
 * cpu: ggml-cpu/ops.cpp:4781 nb1..nb3 and offset int32 op_params taken as size_t: negative ones wrap; ops.cpp:4816 bound check lets the last element start at nbytes (<=)
 * cpu: ggml-cpu/ops.cpp:4834 ggml_vec_cpy_f32 to dst + i3*nb3 + i2*nb2 + i1*nb1 + offset: strides and offset multiples of the element size (UBSan: misaligned float store)
 * cuda: ggml-cuda/set.cu:8 F32 or I32, all three of one type (set.cu:9); set.cu:12 dst, src0 (set.cu:13), src1 (set.cu:14) contiguous
 * cuda: ggml-cuda/set.cu:27 ggml_cuda_cpy(src1, a view at dst + offset with strides nb1..nb3): the same bounds and alignment
 */
int rule_set(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0), *b = rules_src(c, 1);
	const int32_t nb1 = rules_i32(n, 0), nb2 = rules_i32(n, 1), nb3 = rules_i32(n, 2);
	const int32_t offset = rules_i32(n, 3), inplace = rules_i32(n, 4);

	REQ(c, ggml_nelements(a) >= ggml_nelements(b), "src1 has more elements than src0");
	REQ(c, inplace == (n->view_src != NULL), "inplace=%d but the result %s a view", inplace,
	    n->view_src ? "is" : "is not");
	TRY(rules_dup_or_inplace(c, a));
	/* ggml-cpu: F32 or I32, contiguous; ggml-cuda also wants src1 contiguous */
	TRY(rules_type(c, a, "src0", TB_F32 | TB_I32));
	REQ(c, b->type == a->type, "src1 type %s != src0 type %s", ggml_type_name(b->type), ggml_type_name(a->type));
	TRY(rules_contiguous(c, a, "src0"));
	TRY(rules_contiguous(c, b, "src1"));
	TRY(rules_contiguous(c, n, "result"));

	/* the strides and offset are int32 in op_params and size_t in the kernel:
	 * a negative one wraps.  ggml-cpu's own bound check lets the last element
	 * start at nbytes (<=); the whole last element must fit. */
	REQ(c, nb1 >= 0 && nb2 >= 0 && nb3 >= 0 && offset >= 0 && offset < (1 << 30),
	    "negative stride or offset (%d, %d, %d, %d)", nb1, nb2, nb3, offset);
	const uint64_t es = ggml_type_size(a->type);
	/* both kernels store elements at dst + offset + i*nb as float / int32 */
	REQ(c, offset % es == 0 && nb1 % es == 0 && nb2 % es == 0 && nb3 % es == 0,
	    "strides (%d, %d, %d) or offset %d not a multiple of the element size", nb1, nb2, nb3, offset);
	uint64_t last = (uint64_t)offset;
	const int64_t st[4] = { (int64_t)es, nb1, nb2, nb3 };
	for (int i = 0; i < GGML_MAX_DIMS; i++)
		if (b->ne[i] > 0)
			last += (uint64_t)(b->ne[i] - 1) * (uint64_t)st[i];
	REQ(c, ggml_is_empty(b) || last + es <= ggml_nbytes(n), "the block ends past the %zu bytes of the result",
	    ggml_nbytes(n));
	return 0;
}

/*
 * cpu: ggml-cpu/ops.cpp:8390 dst nb[0] == sizeof(float); ops.cpp:8399 steps = ceilf((stop - start) / step) in float, ops.cpp:8401 asserted equal to nelements(dst): the rule computes the same float expression
 * cuda: ggml-cuda/arange.cu:21 F32; arange.cu:30 the same steps, asserted at arange.cu:31
 */
int rule_arange(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0, 0));
	const struct ggml_tensor *n = c->node;
	const float start = rules_f32(n, 0), stop = rules_f32(n, 1), step = rules_f32(n, 2);

	REQ(c, isfinite(start) && isfinite(stop) && isfinite(step) && step > 0.0f && stop > start,
	    "start=%g stop=%g step=%g (finite, start < stop, step > 0)", start, stop, step);
	const float steps = ceilf((stop - start) / step);
	REQ(c, steps <= (float)INT32_MAX, "%g steps", steps);
	return rules_new4(c, GGML_TYPE_F32, (int64_t)steps, 1, 1, 1);
}

/*
 * cpu: ggml-cpu/ops.cpp:7775 F32 or F16 source (the rule takes F32, ggml-cuda's only type, cuda: ggml-cuda/pool2d.cu:71)
 * cpu: ggml-cpu/ops.cpp:7803 planes walked as while (cdata < data + nbytes) { ...; cdata += nb[2] (ops.cpp:7849); dplane += ne0*ne1 }: the number of planes written is ceil(nbytes / nb[2]), which must be ne[2]*ne[3]: nb[2] is the dense plane size (nb[3] = nb[2]*ne[2]), or for a single plane at least it; nb[2] == 0 never ends
 * cpu: ggml-cpu/ops.cpp:7824 rows at nb[1]*(iy+ky) for iy+ky < ne[1], element j read as ((float *)row)[j]: nb[0] == 4
 * cpu: ggml-cpu/ops.cpp:7816 ix = ox*s0 - p0 in int: padding bounded, k, s > 0 (average divides by k0*k1, ops.cpp:7840)
 * cuda: ggml-cuda/pool2d.cu:19 reads src + nc*ih*iw + i*iw + j, ignoring every stride: the source dense in all dims of size > 1
 * cuda: ggml-cuda/pool2d.cu:91 parallel_elements = N*OC*OH*OW and nc*I_HW are int: nelements of src and dst < 2^31
 */
int rule_pool_2d(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);
	const int32_t op = rules_i32(n, 0), k0 = rules_i32(n, 1), k1 = rules_i32(n, 2);
	const int32_t s0 = rules_i32(n, 3), s1 = rules_i32(n, 4), p0 = rules_i32(n, 5), p1 = rules_i32(n, 6);

	REQ(c, op == GGML_OP_POOL_MAX || op == GGML_OP_POOL_AVG, "unknown pooling %d", op);
	REQ(c, k0 > 0 && k1 > 0 && s0 > 0 && s1 > 0 && p0 >= 0 && p1 >= 0 && p0 < (1 << 20) && p1 < (1 << 20),
	    "kernel %dx%d, stride %dx%d, padding %dx%d", k0, k1, s0, s1, p0, p1);
	const int64_t w = a->ne[0] + 2 * (int64_t)p0 - k0, h = a->ne[1] + 2 * (int64_t)p1 - k1;
	REQ(c, w >= 0 && h >= 0, "the kernel is larger than the padded input");
	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_contiguous(c, a, "src0"));
	/* the plane walk steps by nb[2] even where ne[2] == 1 */
	const size_t plane = (size_t)a->ne[0] * (size_t)a->ne[1] * sizeof(float);
	REQ(c, a->nb[2] == plane || (a->ne[2] * a->ne[3] == 1 && a->nb[2] >= plane),
	    "src0 nb[2]=%zu, ggml-cpu steps planes by it (plane of %zu bytes)", a->nb[2], plane);
	REQ(c, ggml_nelements(a) <= INT32_MAX, "src0 has %lld elements (ggml-cuda indexes in int)",
	    (long long)ggml_nelements(a));
	TRY(rules_new4(c, GGML_TYPE_F32, w / s0 + 1, h / s1 + 1, a->ne[2], a->ne[3]));
	REQ(c, ggml_nelements(n) <= INT32_MAX, "result too large for ggml-cuda's int index");
	return 0;
}

/* K types with a to_float */
#define TB_INDEXER_K (TB_FLOAT | TB(GGML_TYPE_Q8_0) | TB(GGML_TYPE_Q4_0) | TB(GGML_TYPE_Q4_1) | \
	TB(GGML_TYPE_Q5_0) | TB(GGML_TYPE_Q5_1))

/*
 * cpu: ggml-cpu/ops.cpp:12135 dst, q, weights F32, mask F16 (ops.cpp:12138); ops.cpp:12151 nb[0] the element size of dst, q, k, weights, mask (ops.cpp:12152..12155)
 * cpu: ggml-cpu/ops.cpp:12163 k's to_float, asserted unless F32 (ops.cpp:12164): K types with one (TB_INDEXER_K)
 * cpu: ggml-cpu/ops.cpp:12171 scratch row of n_embd = q ne[0] floats per thread, planned as k ne[0] floats (ggml-cpu/ggml-cpu.c:3047): q ne[0] == k ne[0]
 * cpu: ggml-cpu/ops.cpp:12183 mask rows t*nbm1 + (s % nem3)*nbm3: mask ne[3] > 0 dividing the streams; ops.cpp:12186 k rows ik*nbk2 for ik < n_kv = k ne[2] == mask ne[0]
 * cuda: ggml-cuda/lightning-indexer.cu:406 the same types; lightning-indexer.cu:423 nb[0] the element sizes; lightning-indexer.cu:429 dst nb[0] == 4 and not permuted (lightning-indexer.cu:430..432): a new tensor
 */
int rule_lightning_indexer(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0xf, 0));
	const struct ggml_tensor *q = rules_src(c, 0), *k = rules_src(c, 1), *w = rules_src(c, 2), *m = rules_src(c, 3);

	TRY(rules_type(c, q, "q", TB_F32));
	TRY(rules_type(c, w, "weights", TB_F32));
	TRY(rules_type(c, m, "mask", TB_F16));
	TRY(rules_type(c, k, "k", TB_INDEXER_K));
	REQ(c, q->ne[0] == k->ne[0] && m->ne[0] == k->ne[2] && q->ne[1] == w->ne[0] && k->ne[1] == 1 &&
	       m->ne[1] == q->ne[2] && q->ne[2] == w->ne[1] && w->ne[2] == 1 && m->ne[2] == 1 &&
	       q->ne[3] == k->ne[3] && k->ne[3] == w->ne[3],
	    "q " NE_FMT ", k " NE_FMT ", weights " NE_FMT ", mask " NE_FMT " do not match", NE_ARGS(q), NE_ARGS(k),
	    NE_ARGS(w), NE_ARGS(m));
	REQ(c, m->ne[3] > 0 && w->ne[3] % m->ne[3] == 0, "mask streams do not divide the weights'");
	TRY(rules_new4(c, GGML_TYPE_F32, k->ne[2], q->ne[2], 1, q->ne[3]));
	TRY(rules_nb0(c, q, "q"));
	TRY(rules_nb0(c, k, "k"));
	TRY(rules_nb0(c, w, "weights"));
	return rules_nb0(c, m, "mask");
}

/*
 * cpu: ggml-cpu/ops.cpp:11149 all four tensors F32; ops.cpp:11159 mixes->ne[0] == 24 (hc fixed at 4), dst [4, 4, n_tokens], scale->ne[0] >= 3, base->ne[0] == 24
 * cpu: ggml-cpu/ops.cpp:11183 reads scale[2] and mixes/base by their byte strides, per token of mixes->ne[1]; ops.cpp:11173 n_iter > 0, iterated per token
 * cuda: ggml-cuda/dsv4-hc.cu:202 the same types and shapes asserted; dsv4-hc.cu:230 strides passed in floats (nb / sizeof(float)), one thread per token (grid of n_tokens / 256)
 */
int rule_dsv4_hc_comb(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x7, 0));
	const struct ggml_tensor *n = c->node, *mixes = rules_src(c, 0), *scale = rules_src(c, 1), *base = rules_src(c, 2);
	const int32_t n_iter = rules_i32(n, 1);

	for (int i = 0; i < 3; i++)
		TRY(rules_type(c, rules_src(c, i), "input", TB_F32));
	/* the constructor derives hc from (2 + hc) * hc == mixes->ne[0] and
	 * asserts hc == 4; both kernels hard-code it */
	REQ(c, mixes->ne[0] == 24 && mixes->ne[2] == 1 && mixes->ne[3] == 1, "mixes " NE_FMT " must be [24, n_tokens]",
	    NE_ARGS(mixes));
	REQ(c, scale->ne[0] >= 3 && scale->ne[1] == 1 && scale->ne[2] == 1 && scale->ne[3] == 1,
	    "scale " NE_FMT " must be a vector of >= 3", NE_ARGS(scale));
	REQ(c, base->ne[0] == 24 && base->ne[1] == 1 && base->ne[2] == 1 && base->ne[3] == 1,
	    "base " NE_FMT " must be a vector of 24", NE_ARGS(base));
	/* the Sinkhorn iterations run per token: bounded so a node cannot stall the device */
	REQ(c, n_iter > 0 && n_iter <= 1000, "n_iter=%d (1..1000)", n_iter);
	TRY(rules_strides_elems(c, mixes, "mixes"));
	TRY(rules_strides_elems(c, scale, "scale"));
	TRY(rules_strides_elems(c, base, "base"));
	return rules_new4(c, GGML_TYPE_F32, 4, 4, mixes->ne[1], 1);
}

/*
 * cpu: ggml-cpu/ops.cpp:11255 x, weights, dst F32; ops.cpp:11266 dst [n_embd, n_tokens]; gated: weights [n_embd, hc, n_tokens], else [hc, n_tokens] (ops.cpp:11268)
 * cpu: ggml-cpu/ops.cpp:11294 x read at i0*nb0 + ih*nb1 + it*nb2 (x->ne[3] never read: must be 1), weights by their strides
 * cuda: ggml-cuda/dsv4-hc.cu:244 the same types; dsv4-hc.cu:252 the same extents, strides in floats, one thread per result element (grid of n_embd*n_tokens / 256)
 */
int rule_dsv4_hc_pre(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *x = rules_src(c, 0), *w = rules_src(c, 1);

	TRY(rules_type(c, x, "x", TB_F32));
	TRY(rules_type(c, w, "weights", TB_F32));
	REQ(c, x->ne[1] > 0 && x->ne[3] == 1, "x " NE_FMT " must be [n_embd, hc, n_tokens]", NE_ARGS(x));
#if PPRPC_LLAMA_RELEASE_NUM >= 500
	/* v0.5.0: f32[0] scales the result, i32[1] = 1 makes the weights a
	 * per-element gate of x's shape (ggml_dsv4_hc_pre_gated); both kernels
	 * take any nonzero flag as gated and read the weights by that shape */
	const int32_t gated = rules_i32(c->node, 1);
	const float scale = rules_f32(c->node, 0);
	REQ(c, gated == 0 || gated == 1, "gated flag %d (0 or 1)", gated);
	REQ(c, isfinite(scale), "scale is not finite");
	if (gated) {
		REQ(c, w->ne[0] == x->ne[0] && w->ne[1] == x->ne[1] && w->ne[2] == x->ne[2] && w->ne[3] == 1,
		    "gate " NE_FMT " does not match x " NE_FMT, NE_ARGS(w), NE_ARGS(x));
	} else {
		/* the ungated constructor always writes 1 (a zero would be a graph
		 * of v0.4.0, whose kernel ignored the scale) */
		REQ(c, scale == 1.0f, "scale %g of the ungated form (ggml writes 1)", (double)scale);
		REQ(c, w->ne[0] == x->ne[1] && w->ne[1] == x->ne[2] && w->ne[2] == 1 && w->ne[3] == 1,
		    "weights " NE_FMT " do not match x " NE_FMT, NE_ARGS(w), NE_ARGS(x));
	}
#else
	REQ(c, w->ne[0] == x->ne[1] && w->ne[1] == x->ne[2] && w->ne[2] == 1 && w->ne[3] == 1,
	    "weights " NE_FMT " do not match x " NE_FMT, NE_ARGS(w), NE_ARGS(x));
#endif
	TRY(rules_strides_elems(c, x, "x"));
	TRY(rules_strides_elems(c, w, "weights"));
	return rules_new4(c, GGML_TYPE_F32, x->ne[0], x->ne[2], 1, 1);
}

/*
 * cpu: ggml-cpu/ops.cpp:11335 x, residual, post, dst F32; ops.cpp:11346 dst [n_embd, hc, n_tokens], residual [n_embd, hc, n_tokens], post [hc, n_tokens]
 * cpu: ggml-cpu/ops.cpp:11357 comb optional (identity), else F32 [hc, hc, n_tokens]; every input read by its byte strides (ops.cpp:11391)
 * cuda: ggml-cuda/dsv4-hc.cu:281 the same types, comb may be absent; dsv4-hc.cu:292 strides in floats; one thread per result element (grid of n_embd*hc*n_tokens / 256)
 */
int rule_dsv4_hc_post(struct rule_ctx *c)
{
#if PPRPC_LLAMA_RELEASE_NUM >= 500
	/* v0.5.0: no comb = the identity (the kernels read the residual only) */
	TRY(rules_srcs(c, 0x7, 0x8));
#else
	TRY(rules_srcs(c, 0xf, 0));
#endif
	const struct ggml_tensor *x = rules_src(c, 0), *res = rules_src(c, 1), *post = rules_src(c, 2), *comb = rules_src(c, 3);
	const int nsrc = comb ? 4 : 3;

	for (int i = 0; i < nsrc; i++)
		TRY(rules_type(c, rules_src(c, i), "input", TB_F32));
	const int64_t n_embd = x->ne[0], n_tokens = x->ne[1], hc = res->ne[1];
	REQ(c, hc > 0 && x->ne[2] == 1 && x->ne[3] == 1, "x " NE_FMT " must be [n_embd, n_tokens]", NE_ARGS(x));
	REQ(c, res->ne[0] == n_embd && res->ne[2] == n_tokens && res->ne[3] == 1,
	    "residual " NE_FMT " does not match x " NE_FMT, NE_ARGS(res), NE_ARGS(x));
	REQ(c, post->ne[0] == hc && post->ne[1] == n_tokens && post->ne[2] == 1 && post->ne[3] == 1,
	    "post " NE_FMT " must be [%lld, %lld]", NE_ARGS(post), (long long)hc, (long long)n_tokens);
	REQ(c, !comb || (comb->ne[0] == hc && comb->ne[1] == hc && comb->ne[2] == n_tokens && comb->ne[3] == 1),
	    "comb " NE_FMT " must be [%lld, %lld, %lld]", NE_ARGS(comb), (long long)hc, (long long)hc, (long long)n_tokens);
	for (int i = 0; i < nsrc; i++)
		TRY(rules_strides_elems(c, rules_src(c, i), "input"));
	return rules_new4(c, GGML_TYPE_F32, n_embd, hc, n_tokens, 1);
}
