/*
 * rules_reduce.c — reductions and shape-changing copies: SUM, SUM_ROWS, MEAN,
 * CUMSUM, REPEAT, CONCAT, PAD.
 */
#include "rules_impl.h"

/*
 * cpu: ggml-cpu/ops.cpp:1294 a scalar result; ops.cpp:1295 nb[0] == sizeof(float); ops.cpp:1306 rows summed at i01*nb01 + i02*nb02 + i03*nb03 (loops by counts)
 * cuda: ggml-cuda/sum.cu:28 F32; sum.cu:30 contiguously allocated: sum.cu:35 (ne = ggml_nelements) walks ggml_nelements densely
 */
int rule_sum(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	/* ggml-cuda: F32 and contiguously allocated (its supports_op only checks rows) */
	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_contiguous(c, a, "src0"));
	return rules_new4(c, a->type, 1, 1, 1, 1);
}

/*
 * cpu: ggml-cpu/ops.cpp:1470 nb[0] == sizeof(float) for src0 and dst (ops.cpp:1471); ops.cpp:1475 result [1, ne1, ne2, ne3]
 * cuda: ggml-cuda/sumrows.cu:25 F32 in and out; sumrows.cu:27 contiguous rows, strides read in floats: nb multiples of 4
 */
int rule_sum_rows(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_nb0(c, a, "src0"));
	/* ggml-cuda (v0.5.0) takes strided rows and reads them as floats */
	TRY(rules_strides_elems(c, a, "src0"));
	TRY(rules_new4(c, a->type, 1, a->ne[1], a->ne[2], a->ne[3]));
	return 0;
}

/*
 * cpu: ggml-cpu/ops.cpp:1523 nb[0] == sizeof(float); ops.cpp:1527 result [1, ne1, ne2, ne3]
 * cuda: ggml-cuda/mean.cu:19 F32 in and out; mean.cu:21 contiguous rows, strides in floats
 */
int rule_mean(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_strides_elems(c, a, "src0"));
	return rules_new4(c, GGML_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3]);
}

/*
 * cpu: ggml-cpu/ops.cpp:1416 nb[0] == sizeof(float) for src0 and dst (ops.cpp:1417); ops.cpp:1421 the result has src0's shape
 * cuda: ggml-cuda/cumsum.cu:271 dst of src0's type (F32 here); strides read in elements
 */
int rule_cumsum(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);

	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_strides_elems(c, a, "src0"));
	return rules_new(c, a->type, a->ne);
}

/*
 * cpu: ggml-cpu/ops.cpp:1708 ggml_can_repeat(src0, dst) (loops by counts: copies of src0's rows at its strides); ops.cpp:1719 nb0 == nb00 == sizeof(float) (the 2-byte path the same for its size)
 * cuda: ggml-cuda/ggml-cuda.cu:5378 supports_op lists F32 and F16 (the engine asks it); ggml-cuda/binbcast.cu:433 runs it as a broadcast of src0 over dst, strides read in elements
 */
int rule_repeat(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);

	/* ggml_repeat / ggml_repeat_4d: the result is a whole number of copies */
	REQ(c, ggml_can_repeat(a, n), "src0 " NE_FMT " does not tile the result " NE_FMT, NE_ARGS(a), NE_ARGS(n));
	/* ggml-cpu: F32/I32 (4-byte) and F16/BF16/I16 (2-byte) paths; ggml-cuda
	 * lists F32 and F16 in its supports_op */
	TRY(rules_type(c, a, "src0", TB_FLOAT | TB_I32 | TB(GGML_TYPE_I16)));
	TRY(rules_nb0(c, a, "src0"));
	return rules_new(c, a->type, n->ne);
}

/*
 * cpu: ggml-cpu/ops.cpp:2080 dispatch by type size: 1, 2, 4 bytes element-wise at the sources' strides (ops.cpp:2044 for 4), any other type ggml_compute_forward_concat_any (ops.cpp:1899)
 * cpu: ggml-cpu/ops.cpp:1914 concat_any: contiguous rows of both sources (ops.cpp:1915), memcpy of whole rows (ops.cpp:1934); ops.cpp:1920 ne[0] whole blocks
 * cuda: ggml-cuda/concat.cu:205 one type for all three; concat.cu:210 quantized: contiguous (dim 3) or contiguous_to_3, else aborts; concat.cu:222 block size 1 otherwise; its supports_op (ggml-cuda.cu:5387) checks the same, the engine asks it
 */
int rule_concat(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0), *b = rules_src(c, 1);
	const int32_t dim = rules_i32(n, 0);
	int64_t ne[GGML_MAX_DIMS];

	REQ(c, dim >= 0 && dim < GGML_MAX_DIMS, "dim=%d out of range", dim);
	REQ(c, a->type == b->type, "src0 type %s != src1 type %s", ggml_type_name(a->type), ggml_type_name(b->type));
	for (int d = 0; d < GGML_MAX_DIMS; d++) {
		REQ(c, d == dim || a->ne[d] == b->ne[d], "src0 " NE_FMT " and src1 " NE_FMT " differ outside dim %d",
		    NE_ARGS(a), NE_ARGS(b), dim);
		ne[d] = d == dim ? a->ne[d] + b->ne[d] : a->ne[d];
	}
	TRY(rules_new(c, a->type, ne));
	/* ggml-cpu concat_any (types other than 1, 2, 4 bytes): whole rows */
	if (ggml_blck_size(a->type) != 1 || !rules_type_is(a, TB_FLOAT | TB_I32 | TB(GGML_TYPE_I16) | TB(GGML_TYPE_I8))) {
		TRY(rules_contiguous_rows(c, a, "src0"));
		TRY(rules_contiguous_rows(c, b, "src1"));
	}
	return 0;
}

/*
 * cpu: ggml-cpu/ops.cpp:8267 F32 source only (else abort, ops.cpp:8277); ops.cpp:8202 dst nb[0] == sizeof(float), written densely at i3*ne0*ne1*ne2 + ... (ops.cpp:8227)
 * cpu: ggml-cpu/ops.cpp:8228 circular: ggml_wrap_around(i - lp, ne_src) = (i - lp + ne_src) % ne_src (ops.cpp:7006): for i = 0 it is negative (a read before the source) unless lp <= ne_src, in every dim
 * cpu: ggml-cpu/ops.cpp:8247 zero padding: reads (i - lp) * nb for lp <= i < ne - rp only: in bounds when ne = ne_src + lp + rp
 * cuda: ggml-cuda/pad.cu:84 F32 in and out; pad.cu:97 strides used in elements (nb / 4): nb a multiple of 4
 * cuda: ggml-cuda/pad.cu:7 wrap_around the same (coord + size) % size with size = ne - lp - rp (pad.cu:47): lp <= ne_src
 * cuda: ggml-cuda/pad.cu:13 ne0..ne3, lp, rp and the indices are int; pad.cu:28 dst_idx = i3*(ne0*ne1*ne2) in int: nelements(dst) < 2^31
 * cuda: ggml-cuda/pad.cu:70 grid (ne0/256, ne1, ne2*ne3): ne1 and ne2*ne3 at most 65535
 */
int rule_pad(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0);
	const int32_t circular = rules_i32(n, 8);
	int64_t ne[GGML_MAX_DIMS];

	REQ(c, circular == 0 || circular == 1, "circular=%d", circular);
	/* circular padding wraps modulo the source extent */
	REQ(c, !circular || !ggml_is_empty(a), "circular padding of an empty tensor");
	for (int d = 0; d < GGML_MAX_DIMS; d++) {
		const int32_t lp = rules_i32(n, 2 * d), rp = rules_i32(n, 2 * d + 1);
		REQ(c, lp >= 0 && rp >= 0, "negative padding (%d, %d) in dim %d", lp, rp, d);
		/* the wrapped index of the first output element is lp before the source */
		REQ(c, !circular || lp <= a->ne[d], "circular left padding %d in dim %d exceeds the source's %lld",
		    lp, d, (long long)a->ne[d]);
		ne[d] = a->ne[d] + lp + rp;
	}
	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_strides_elems(c, a, "src0"));
	TRY(rules_new(c, GGML_TYPE_F32, ne));
	REQ(c, ggml_nelements(n) <= INT32_MAX && n->ne[1] <= 65535 && n->ne[2] * n->ne[3] <= 65535,
	    "result " NE_FMT " exceeds ggml-cuda's int indices or grid", NE_ARGS(n));
	return 0;
}
