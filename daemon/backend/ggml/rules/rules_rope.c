/*
 * rules_rope.c — ROPE and ROPE_BACK.
 *
 * op_params (int32 slots): [1] n_dims, [2] mode, [4] n_ctx_orig, [5..10]
 * freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow (float),
 * [11..14] M-RoPE sections, [15] n_offs (ggml_rope_set_offset).
 *
 * Beyond the asserts: n_dims must be > 0 (ggml-cpu's copy of the unrotated
 * channels steps by n_dims - 2 and never ends otherwise), and the M-RoPE
 * sections must be non-negative with a positive sum (the sector is taken
 * modulo their sum).
 */
#include "rules_impl.h"

/*
 * cpu: ggml-cpu/ops.cpp:6091 src0 F32 or F16; ops.cpp:6092 positions I32, read as pos[i2] (pos[i2 + k*ne2] for k < 4 in M-RoPE, ops.cpp:6191): ne[2] (4*ne[2]) positions, dense
 * cpu: ggml-cpu/ops.cpp:6118 nb0 == nb00; ops.cpp:6119 nb0 == sizeof(T)
 * cpu: ggml-cpu/ops.cpp:6126 n_dims <= ne0; ops.cpp:6127 n_dims even; ops.cpp:6223 the tail copy steps i0 += n_dims - 2: n_dims > 0 (0 never ends)
 * cpu: ggml-cpu/ops.cpp:6129 n_offs >= 0, even (ops.cpp:6130), n_offs + n_dims <= ne0 (ops.cpp:6131)
 * cpu: ggml-cpu/ops.cpp:6153 M-RoPE: a non-empty section among the first three; ops.cpp:6008 sector = (i0/2) % sum of sections: sum > 0, sections >= 0 and sum <= ne0 (ops.cpp:6003)
 * cpu: ggml-cpu/ops.cpp:6157 vision: n_dims == ne0/2 and n_offs == 0 (ops.cpp:6158)
 * cpu: ggml-cpu/ops.cpp:6163 freq factors F32; ops.cpp:5981 (NORMAL, NEOX) and ops.cpp:6006 (MROPE, VISION, IMROPE) read freq_factors[i0/2] for every i0 < ne0: ne0/2 factors, more than the n_dims/2 asserted at ops.cpp:6164
 * cpu: ggml-cpu/ops.cpp:6183 cache of ne0 floats per thread in wdata, planned from the result's ne[0] (same as src0's: a dup)
 * cuda: ggml-cuda/rope.cu:560 src0 F32/F16, dst the same type (rope.cu:564); rope.cu:571 strides used in elements: nb multiples of the element size
 * cuda: ggml-cuda/rope.cu:109, rope.cu:184, rope.cu:278 freq_factors[iw/2] for iw < n_dims; rope.cu:343 (vision) freq_factors[i0/2]: within ne0/2
 * cuda: ggml-cuda/rope.cu:612 M-RoPE sections as on the cpu; rope.cu:616 vision n_dims == ne00/2, rope.cu:617 no offset
 * cuda: ggml-cuda/rope.cu:193 rows read in pairs (x[ix + n_dims/2]): ne0 even
 */
int rule_rope(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0x4));
	const struct ggml_tensor *n = c->node, *a = rules_src(c, 0), *pos = rules_src(c, 1), *ff = rules_src(c, 2);
	const int32_t n_dims = rules_i32(n, 1), mode = rules_i32(n, 2), n_offs = rules_i32(n, 15);
	const int64_t ne0 = a->ne[0];

	REQ(c, mode == GGML_ROPE_TYPE_NORMAL || mode == GGML_ROPE_TYPE_NEOX || mode == GGML_ROPE_TYPE_MROPE ||
	       mode == GGML_ROPE_TYPE_VISION || mode == GGML_ROPE_TYPE_IMROPE, "unknown mode %d", mode);
	const bool mrope = (mode & GGML_ROPE_TYPE_MROPE) != 0;
	const bool vision = mode == GGML_ROPE_TYPE_VISION;

	REQ(c, ggml_is_vector(pos), "positions must be a vector, are " NE_FMT, NE_ARGS(pos));
	TRY(rules_type(c, pos, "positions", TB_I32));
	if (mrope)
		REQ(c, a->ne[2] * 4 == pos->ne[0], "M-RoPE needs 4 positions per token: %lld for %lld tokens",
		    (long long)pos->ne[0], (long long)a->ne[2]);
	else
		REQ(c, a->ne[2] == pos->ne[0], "%lld positions for %lld tokens", (long long)pos->ne[0], (long long)a->ne[2]);
	TRY(rules_nb0(c, pos, "positions"));
	TRY(rules_contiguous(c, pos, "positions"));

	REQ(c, n_dims > 0 && n_dims % 2 == 0 && n_dims <= ne0, "n_dims=%d (must be even, in 1..%lld)", n_dims,
	    (long long)ne0);
	REQ(c, n_offs >= 0 && n_offs % 2 == 0 && (int64_t)n_offs + n_dims <= ne0,
	    "n_offs=%d (must be even, with n_offs + n_dims <= %lld)", n_offs, (long long)ne0);
	if (vision) {
		REQ(c, n_dims == ne0 / 2, "vision RoPE needs n_dims == ne[0]/2");
		REQ(c, n_offs == 0, "vision RoPE takes no offset");
	}
	if (mrope) {
		int64_t sum = 0;
		for (int i = 0; i < GGML_MROPE_SECTIONS; i++) {
			const int32_t s = rules_i32(n, 11 + i);
			REQ(c, s >= 0, "M-RoPE section %d is negative", i);
			sum += s;
		}
		REQ(c, rules_i32(n, 11) > 0 || rules_i32(n, 12) > 0 || rules_i32(n, 13) > 0,
		    "M-RoPE needs a non-empty section among the first three");
		REQ(c, sum <= ne0, "M-RoPE sections sum to %lld > ne[0]=%lld", (long long)sum, (long long)ne0);
	}
	if (ff) {
		TRY(rules_type(c, ff, "freq factors", TB_F32));
		/* ggml-cpu's cache covers the whole row in every mode (ops.cpp:5981,
		 * ops.cpp:6006: freq_factors[i0/2] for i0 < ne0), more than the
		 * constructor's n_dims/2 (ops.cpp:6164) or ggml-cuda's iw/2 */
		REQ(c, ff->ne[0] >= ne0 / 2, "%lld freq factors for rows of %lld (ggml-cpu reads ne[0]/2)",
		    (long long)ff->ne[0], (long long)ne0);
		TRY(rules_contiguous(c, ff, "freq factors"));
	}

	TRY(rules_type(c, a, "src0", TB_F32 | TB_F16));
	TRY(rules_dup_or_inplace(c, a));
	/* ggml-cpu: nb0 == nb00 == element size; ggml-cuda: even rows,
	 * contiguous in dims 0, 2, 3 (its supports_op) */
	TRY(rules_nb0(c, a, "src0"));
	TRY(rules_nb0(c, n, "result"));
	TRY(rules_strides_elems(c, a, "src0"));
	TRY(rules_strides_elems(c, n, "result"));
	REQ(c, ne0 % 2 == 0, "rows of %lld elements (must be even)", (long long)ne0);
	return 0;
}
