/*
 * rules_ssm.c — recurrent / state-space ops: SSM_CONV, SSM_SCAN,
 * GATED_DELTA_NET (scalar gate, and the KDA form with a per-channel gate),
 * SOLVE_TRI, TRI.  All F32.
 */
#include "rules_impl.h"

/*
 * SSM_CONV preconditions:
 * cpu: ggml-cpu/ops.cpp:9718 asserts dst ne0 == d_inner; ops.cpp:9719-9721 nb00 == nb10 == 4 and src0 rows dense (nb01 == ne00*4)
 * cpu: ggml-cpu/ops.cpp:9712 d_conv, row length, d_inner, tokens and sequences held in int
 * cpu: ggml-cpu/ops.cpp:9735 src0 at ir*nb01 + i2*nb00 + i3*nb02, weights at ir*nb11, read flat within a row of d_conv
 * cuda: ggml-cuda/ssm-conv.cu:181 the same nb asserts (181-183); ssm-conv.cu:156 aborts unless d_conv is 3, 4, 5, 9 or 15
 * cuda: ggml-cuda/ssm-conv.cu:132 asserts d_inner % threads == 0 (supports_op, ggml-cuda.cu:5489, refuses d_inner % 128)
 * cuda: ggml-cuda/ssm-conv.cu:143 grid (n_s, d_inner / 128, n_t / 32): y and z <= 65535; ssm-conv.cu:127 byte strides passed as int
 */
int rule_ssm_conv(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *sx = rules_src(c, 0), *w = rules_src(c, 1);

	REQ(c, ggml_is_3d(sx), "src0 must be 3-d, is " NE_FMT, NE_ARGS(sx));
	REQ(c, ggml_is_matrix(w), "weights must be 2-d, are " NE_FMT, NE_ARGS(w));
	const int64_t d_conv = w->ne[0], d_inner = w->ne[1], n_t = sx->ne[0] - d_conv + 1, n_s = sx->ne[2];
	REQ(c, sx->ne[1] == d_inner, "src0 ne[1]=%lld != d_inner=%lld", (long long)sx->ne[1], (long long)d_inner);
	REQ(c, n_t >= 0, "src0 rows (%lld) shorter than the kernel (%lld)", (long long)sx->ne[0], (long long)d_conv);
	TRY(rules_type(c, sx, "src0", TB_F32));
	TRY(rules_type(c, w, "weights", TB_F32));
	TRY(rules_new4(c, GGML_TYPE_F32, d_inner, n_t, n_s, 1));
	/* ggml-cpu: dense rows of src0, and the weights walked densely */
	TRY(rules_nb0(c, sx, "src0"));
	REQ(c, sx->nb[1] == (size_t)sx->ne[0] * sizeof(float), "src0 rows must be dense");
	TRY(rules_contiguous(c, w, "weights"));
	/* ggml-cuda's grid (y = d_inner / 128, z = n_t / 32, at most 65535) and
	 * its int byte strides */
	REQ(c, d_inner / 128 < 65535 && n_t / 32 < 65535 && n_s <= INT32_MAX,
	    "src0 " NE_FMT " exceeds ggml-cuda's grid", NE_ARGS(sx));
	REQ(c, sx->nb[2] <= INT32_MAX && w->nb[1] <= INT32_MAX && c->node->nb[2] <= INT32_MAX,
	    "strides beyond ggml-cuda's int byte offsets");
	/* ggml-cuda aborts on other kernel sizes (its supports_op does not check) */
	REQ(c, d_conv == 3 || d_conv == 4 || d_conv == 5 || d_conv == 9 || d_conv == 15,
	    "kernel size %lld (3, 4, 5, 9 or 15)", (long long)d_conv);
	return 0;
}

/*
 * SSM_SCAN preconditions:
 * cpu: ggml-cpu/ops.cpp:9798 asserts K >= 1 and dst = nelements(x) + K*state elements (9799)
 * cpu: ggml-cpu/ops.cpp:9800 asserts nb[0] the element size for all seven sources (9800-9806)
 * cpu: ggml-cpu/ops.cpp:9807 asserts n_head % n_group == 0; ops.cpp:9808 Mamba-1 (A->ne[0] != 1) only with K == 1
 * cpu: ggml-cpu/ops.cpp:9820 reads state ids[i3]*s->nb[3] (ids are data: ggml_guard.c)
 * cpu: ggml-cpu/ops.cpp:9821 WRITES the result state at i3*s->nb[3] + s_off for i3 < n_seqs: s->nb[3] stepped even when s->ne[3] == 1
 * cpu: ggml-cpu/ops.cpp:9824 x, dt, B, C by their nb[1..3] (index-bounded), rows dense
 * cuda: ggml-cuda/ssm-scan.cu:827 picks Mamba-2 by A->nb[1] == 4 while supports_op (ggml-cuda.cu:5473) looks at A->ne[0]: a size-1 A with another nb[1] reaches ssm-scan.cu:274 GGML_ASSERT(K == 1) and 276-278
 * cuda: ggml-cuda/ssm-scan.cu:241 strides passed as int; ssm-scan.cu:270, 340 abort on other d_state (supports_op refuses them)
 */
int rule_ssm_scan(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x7f, 0));
	const struct ggml_tensor *n = c->node, *s = rules_src(c, 0), *x = rules_src(c, 1), *dt = rules_src(c, 2);
	const struct ggml_tensor *A = rules_src(c, 3), *B = rules_src(c, 4), *C = rules_src(c, 5), *ids = rules_src(c, 6);
	const int32_t K = rules_i32(n, 0);

	REQ(c, K >= 1, "K=%d must be >= 1", K);
	TRY(rules_contiguous(c, s, "s"));
	TRY(rules_dense(c, s, "s"));
	TRY(rules_contiguous(c, dt, "dt"));
	TRY(rules_contiguous(c, A, "A"));
	TRY(rules_dense(c, A, "A"));
	TRY(rules_nb0(c, x, "x"));
	TRY(rules_nb0(c, B, "B"));
	TRY(rules_nb0(c, C, "C"));
	REQ(c, x->nb[1] == (size_t)x->ne[0] * x->nb[0] && B->nb[1] == (size_t)B->ne[0] * B->nb[0] &&
	       C->nb[1] == (size_t)C->ne[0] * C->nb[0], "rows of x, B and C must be dense");
	TRY(rules_same_shape(c, B, "B", C, "C"));
	TRY(rules_type(c, ids, "ids", TB_I32));

	const int64_t d_state = s->ne[0], head_dim = x->ne[0], n_head = x->ne[1];
	const int64_t n_seq_tokens = x->ne[2], n_seqs = x->ne[3];
	REQ(c, dt->ne[0] == n_head && dt->ne[1] == n_seq_tokens && dt->ne[2] == n_seqs && ggml_is_3d(dt),
	    "dt " NE_FMT " does not match x " NE_FMT, NE_ARGS(dt), NE_ARGS(x));
	REQ(c, s->ne[1] == head_dim && s->ne[2] == n_head, "s " NE_FMT " does not match x " NE_FMT, NE_ARGS(s), NE_ARGS(x));
	REQ(c, B->ne[0] == d_state && B->ne[2] == n_seq_tokens && B->ne[3] == n_seqs,
	    "B " NE_FMT " does not match s/x", NE_ARGS(B));
	REQ(c, ids->ne[0] == n_seqs && ggml_is_vector(ids), "ids " NE_FMT " must list %lld sequences", NE_ARGS(ids),
	    (long long)n_seqs);
	REQ(c, A->ne[1] == n_head && ggml_is_matrix(A), "A " NE_FMT " does not match %lld heads", NE_ARGS(A),
	    (long long)n_head);
	if (A->ne[0] != 1)
		REQ(c, A->ne[0] == d_state && K == 1, "Mamba-1 A needs ne[0] == d_state and K == 1");
	/* ggml-cpu: heads are split over groups */
	REQ(c, B->ne[1] > 0 && n_head % B->ne[1] == 0, "%lld heads in %lld groups", (long long)n_head, (long long)B->ne[1]);

	const uint64_t ne = (uint64_t)ggml_nelements(x) + (uint64_t)K * (uint64_t)(s->ne[0] * s->ne[1] * s->ne[2]) *
			    (uint64_t)ids->ne[0];
	TRY(rules_new4(c, GGML_TYPE_F32, (int64_t)ne, 1, 1, 1));
	for (int i = 0; i < 6; i++) {
		const struct ggml_tensor *t = rules_src(c, i);
		TRY(rules_type(c, t, "state-space input", TB_F32));
		/* ggml-cuda passes the strides as int */
		for (int d = 1; d < GGML_MAX_DIMS; d++)
			REQ(c, t->nb[d] <= (size_t)INT32_MAX, "src[%d] nb[%d]=%zu exceeds INT_MAX", i, d, t->nb[d]);
	}
	return rules_nb0(c, ids, "ids");
}

/*
 * GATED_DELTA_NET preconditions:
 * cpu: ggml-cpu/ops.cpp:10913 asserts q, k, v contiguous rows (10913-10915), g, beta, state contiguous (10916-10918)
 * cpu: ggml-cpu/ops.cpp:10920 asserts gate ne0 1 or S_v; ops.cpp:10921 beta ne0 == 1; ops.cpp:10937 K >= 1
 * cpu: ggml-cpu/ops.cpp:10944 scratch per thread S_v (+ S_v*S_v when K > 1) floats past a cache line; ggml-cpu.c:3037 plans the same per task
 * cpu: ggml-cpu/ops.cpp:10950 result = S_v*H*tokens*seqs scores then K state snapshots of S_v*S_v*H*seqs (the result shape below)
 * cpu: ggml-cpu/ops.cpp:10985 state read flat, S_v*S_v per (head, sequence)
 * cuda: ggml-cuda/gated_delta_net.cu:247 asserts q and k heads equal; gated_delta_net.cu:261 contiguous rows (261-263), same q/k strides (264)
 * cuda: ggml-cuda/gated_delta_net.cu:265 asserts gate ne0 == 1 unless KDA; gated_delta_net.cu:266 g, beta, state contiguous (266-268)
 * cuda: ggml-cuda/gated_delta_net.cu:218 aborts on a head size without a kernel (16, 32, 64, 128)
 * cuda: ggml-cuda/gated_delta_net.cu:183 grid (H, n_seqs, ...): n_seqs <= 65535
 */
int rule_gated_delta_net(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3f, 0));
	const struct ggml_tensor *n = c->node, *q = rules_src(c, 0), *k = rules_src(c, 1), *v = rules_src(c, 2);
	const struct ggml_tensor *g = rules_src(c, 3), *beta = rules_src(c, 4), *state = rules_src(c, 5);
	const int32_t K = rules_i32(n, 0);

	TRY(rules_contiguous_rows(c, q, "q"));
	TRY(rules_contiguous_rows(c, k, "k"));
	TRY(rules_contiguous_rows(c, v, "v"));
	TRY(rules_contiguous(c, g, "g"));
	TRY(rules_contiguous(c, beta, "beta"));
	TRY(rules_contiguous(c, state, "state"));
	for (int i = 0; i < 6; i++)
		TRY(rules_type(c, rules_src(c, i), "input", TB_F32));

	const int64_t S_v = v->ne[0], H = v->ne[1], T = v->ne[2], B = v->ne[3];
	REQ(c, g->ne[0] == 1 || g->ne[0] == S_v, "gate ne[0]=%lld (1, or %lld for KDA)", (long long)g->ne[0], (long long)S_v);
	REQ(c, beta->ne[0] == 1, "beta ne[0]=%lld must be 1", (long long)beta->ne[0]);
	REQ(c, state->ne[0] == S_v && state->ne[1] == S_v && state->ne[2] == H && state->ne[3] == B,
	    "state " NE_FMT " must be [%lld,%lld,%lld,%lld]", NE_ARGS(state), (long long)S_v, (long long)S_v,
	    (long long)H, (long long)B);
	REQ(c, K >= 1, "K=%d must be >= 1", K);
	TRY(rules_new4(c, GGML_TYPE_F32, S_v * H, T * B + (int64_t)K * S_v * B, 1, 1));

	/* what the kernels index without checking: q and k rows of S_v, one per
	 * token, heads and sequences broadcast by whole multiples (ggml-cuda
	 * wants as many q as k heads, with the same strides); g and beta per
	 * (head, token, sequence) */
	REQ(c, q->ne[0] == S_v && k->ne[0] == S_v, "q/k head size %lld/%lld != v's %lld", (long long)q->ne[0],
	    (long long)k->ne[0], (long long)S_v);
	REQ(c, q->ne[2] == T && k->ne[2] == T, "q/k have %lld/%lld tokens, v %lld", (long long)q->ne[2],
	    (long long)k->ne[2], (long long)T);
	REQ(c, q->ne[1] == k->ne[1] && q->ne[1] > 0 && H % q->ne[1] == 0, "q/k heads %lld/%lld do not divide v's %lld",
	    (long long)q->ne[1], (long long)k->ne[1], (long long)H);
	REQ(c, q->ne[3] > 0 && k->ne[3] > 0 && B % q->ne[3] == 0 && B % k->ne[3] == 0,
	    "q/k sequences do not divide v's %lld", (long long)B);
	REQ(c, ggml_are_same_stride(q, k), "q and k must have the same strides");
	REQ(c, g->ne[1] == H && g->ne[2] == T && g->ne[3] == B, "gate " NE_FMT " does not match v " NE_FMT,
	    NE_ARGS(g), NE_ARGS(v));
	REQ(c, beta->ne[1] == H && beta->ne[2] == T && beta->ne[3] == B, "beta " NE_FMT " does not match v " NE_FMT,
	    NE_ARGS(beta), NE_ARGS(v));
	/* ggml-cuda has kernels for these head sizes only (its supports_op does not check) */
	REQ(c, S_v == 16 || S_v == 32 || S_v == 64 || S_v == 128, "head size %lld (16, 32, 64 or 128)", (long long)S_v);
	REQ(c, H <= INT32_MAX && B <= 65535, "%lld heads x %lld sequences exceed ggml-cuda's grid", (long long)H, (long long)B);
	return 0;
}

/*
 * SOLVE_TRI preconditions:
 * cpu: ggml-cpu/ops.cpp:10830 asserts F32 x3 (10830-10832); ops.cpp:10834 A square; ops.cpp:10835 dst shaped as B (10835-10839)
 * cpu: ggml-cpu/ops.cpp:10864 batches by nb02/nb03 of each, rows within a batch flat: A and B contiguous
 * cuda: ggml-cuda/solve_tri.cu:262 a warp kernel for n <= 64, k <= 32, else cuBLAS trsm over contiguous batches
 */
int rule_solve_tri(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x3, 0));
	const struct ggml_tensor *a = rules_src(c, 0), *b = rules_src(c, 1);

	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_type(c, b, "src1", TB_F32));
	REQ(c, a->ne[0] == a->ne[1], "src0 " NE_FMT " must be square", NE_ARGS(a));
	REQ(c, a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3],
	    "src0 " NE_FMT " and src1 " NE_FMT " do not match", NE_ARGS(a), NE_ARGS(b));
	TRY(rules_contiguous(c, a, "src0"));
	TRY(rules_contiguous(c, b, "src1"));
	return rules_new(c, GGML_TYPE_F32, b->ne);
}

/*
 * TRI preconditions:
 * cpu: ggml-cpu/ops.cpp:2294 asserts src0 contiguous; ops.cpp:2307 aborts on another triangle type
 * cpu: ggml-cpu/ops.cpp:2315 rows by nb01..03 from the flat row index, ne0 each; the predicate compares column and row
 * cuda: ggml-cuda/tri.cu:100 asserts src0 and dst of one type; tri.cu:134 aborts on another triangle type
 * cuda: ggml-cuda/tri.cu:53 grid (ne01, ne02, ne03): ne02, ne03 <= 65535
 */
int rule_tri(struct rule_ctx *c)
{
	TRY(rules_srcs(c, 0x1, 0));
	const struct ggml_tensor *a = rules_src(c, 0);
	const int32_t type = rules_i32(c->node, 0);

	TRY(rules_type(c, a, "src0", TB_F32));
	TRY(rules_contiguous(c, a, "src0"));
	REQ(c, a->ne[0] == a->ne[1], "src0 " NE_FMT " must be square", NE_ARGS(a));
	REQ(c, type >= GGML_TRI_TYPE_UPPER_DIAG && type <= GGML_TRI_TYPE_LOWER, "unknown triangle type %d", type);
	REQ(c, a->ne[1] <= INT32_MAX && a->ne[2] <= 65535 && a->ne[3] <= 65535,
	    "src0 " NE_FMT " exceeds ggml-cuda's grid", NE_ARGS(a));
	return rules_new(c, a->type, a->ne);
}
