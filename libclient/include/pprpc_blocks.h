/*
 * pprpc_blocks.h — optional: whole transformer blocks (attention with RoPE
 * and a KV cache, Kimi Delta Attention, SwiGLU MLP) built from the graph
 * builder's ops (libclient/blocks.c).
 */
#ifndef PPRPC_BLOCKS_H
#define PPRPC_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "pprpc_graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builders of whole transformer blocks on top of the pprpc_gb_* ops, so a tool
 * does not wire nodes by hand.  A block takes tensor indices of one builder
 * (weights and states added with pprpc_gb_tensor from buffers) and
 * hyperparameters in a struct; call the matching *_init first: it sets every
 * tensor index to -1 ("none": an error for a required weight, "absent" for
 * an optional one) and the defaults named below.
 *
 * Activations are f32 [n_embd, n_tok] (one sequence; ne[0] innermost), x may
 * be any such tensor (a buffer input or an earlier block's output).  Every
 * projection is MUL_MAT with the weight stored ggml-style as [in, out]
 * (ne[0] = in), f32/f16/bf16/q8_0 (q8_0 needs in % 32 == 0); norm gains and
 * biases are 1-D [n] f32/f16/bf16.  Each block ends with the residual add
 * x + f(x) written to dst (dst < 0: a new scratch tensor; else an f32
 * [n_embd, n_tok] tensor of the builder, e.g. a stage-boundary buffer).
 * Functions return 0 and write *out (the output's index), or PPRPC_ESHAPE /
 * PPRPC_ETYPE / PPRPC_EINVAL with the reason in pprpc_gb_error; on failure
 * nodes already added stay in the builder, which should then be discarded.
 *
 * Graphs are static: shapes (n_tok) and the attention's n_past are fixed
 * when the graph is built, so a tool builds (and caches) one graph per
 * (n_past, n_tok) for attention layers — typically one prefill graph and
 * one decode graph per n_past — while KDA and MLP blocks depend on n_tok only.
 * What changes between runs lives in buffers: inputs, positions, caches and
 * recurrent states.
 *
 * States are read near the start of a block and rewritten by its last nodes
 * (SET_ROWS into the KV cache; CPY of the new conv and recurrent states).
 * The same tensor may be given as a state's input and output: the graph
 * rules allow it because no node reads and writes overlapping bytes and the
 * state has one writer, and nodes run in order on their queue, so the write
 * comes after every read.  Distinct in/out tensors give ping-pong states
 * (two graphs alternating) where a tool wants the old state kept. */

/* Pre-norm attention block with RoPE and a KV cache:
 *   h = rms_norm(x) * norm_w
 *   q, k, v = h Wq, h Wk, h Wv        [head_dim, n_head | n_kv_head, n_tok]
 *   q, k = rope(q, pos), rope(k, pos)
 *   k_cache[:, :, pos] = k; v_cache[:, :, pos] = v         (SET_ROWS)
 *   a = attention(q, k_cache[.., 0 : n_past + n_tok], v_cache[..], scale)
 *   out = x + a Wo
 * pos: i32 [n_tok] buffer tensor that must hold n_past .. n_past + n_tok - 1
 * (it is both RoPE's positions and the cache rows written; attention's
 * causal window comes from n_past, a build-time parameter).  Caches: f32 or
 * f16 (both the same) [head_dim, n_kv_head, n_ctx] buffer tensors,
 * n_past + n_tok <= n_ctx.  GQA: n_head % n_kv_head == 0. */
typedef struct pprpc_attn_block {
	int norm_w;               /* [n_embd] */
	float norm_eps;           /* default 1e-6 */
	int wq, wk, wv;           /* [n_embd, n_head*head_dim], [n_embd, n_kv_head*head_dim] x2 */
	int wo;                   /* [n_head*head_dim, n_embd] */
	int k_cache, v_cache;     /* [head_dim, n_kv_head, n_ctx], written at rows pos */
	int64_t n_embd, n_head, n_kv_head, head_dim;
	int rope_mode;            /* PPRPC_ROPE_NEOX (default) or PPRPC_ROPE_NORMAL */
	int rope_dims;            /* rotated dims; 0 = head_dim */
	float rope_base;          /* default 10000 */
	float rope_scale;         /* freq_scale, default 1 */
	float scale;              /* attention scale; 0 = 1/sqrt(head_dim) */
} pprpc_attn_block;

PPRPC_API void pprpc_attn_block_init(pprpc_attn_block *cfg);
PPRPC_API int pprpc_gb_attention_block(pprpc_graph_builder *gb, const pprpc_attn_block *cfg, int x,
				       int pos, int n_past, int dst, int *out);

/* Pre-norm Kimi Delta Attention (KDA) block:
 *   h = rms_norm(x) * norm_w
 *   q, k, v = silu(conv_K(h Wq)), silu(conv_K(h Wk)), silu(conv_K(h Wv))
 *   g = -exp(a_log) * softplus(h [Wg_a] Wg + g_bias)  [d_k, h_v, n_tok], <= 0
 *   beta = sigmoid(h Wb)                               [1, h_v, n_tok]
 *   o, S = gated_delta_net(q, k, v, g, beta, S; l2norm q/k in-op, eps 1e-6,
 *                           scale 1/sqrt(d_k))          per-channel (KDA) gate
 *   o = rms_norm_per_head(o) * o_norm_w * sigmoid(h Wog)   (Kimi Linear's
 *                           gated norm with a sigmoid gate)
 *   out = x + o Wo
 * conv_K is a causal depthwise convolution along time with K taps per
 * channel (y[t] = sum_j w[j] * x[t - K + 1 + j]) over the last K-1 inputs of
 * the previous run followed by this run's inputs, built from CONCAT, MUL
 * and ADD; the last K-1 inputs become the new conv state.
 * Optional parts (-1): wg_a (a low-rank gate: h Wg_a Wg), g_bias, a_log
 * (without it g = -softplus(...)), o_norm_w (gain 1).
 * States (f32, zero for a fresh sequence):
 *   conv state [C, K-1] with C = 2*h_k*d_k + h_v*d_v, columns in time order
 *     (column j: the input K-1-j steps before this run's first token), each
 *     holding the q, k and v channels in that order (channels innermost,
 *     unlike ggml's [K-1, C], so that CONCAT along time needs no copy);
 *   recurrent state [d_k, d_v, h_v, 1] (GATED_DELTA_NET's state layout). */
typedef struct pprpc_kda_block {
	int norm_w;               /* [n_embd] */
	float norm_eps;           /* default 1e-6 */
	int wq, wk;               /* [n_embd, h_k*d_k] */
	int wv;                   /* [n_embd, h_v*d_v] */
	int conv_q, conv_k, conv_v;  /* taps [K, channels] (ggml's ssm_conv1d layout) */
	int conv_kernel;          /* K >= 2, default 4 */
	int wg_a;                 /* optional [n_embd, rank] */
	int wg;                   /* [n_embd or rank, h_v*d_k] */
	int g_bias;               /* optional [h_v*d_k] */
	int a_log;                /* optional [1, h_v] (f32/f16/bf16) */
	int wb;                   /* [n_embd, h_v] */
	int o_norm_w;             /* optional [d_v] */
	int wog;                  /* [n_embd, h_v*d_v] output gate */
	int wo;                   /* [h_v*d_v, n_embd] */
	float o_norm_eps;         /* default 1e-6 */
	int conv_state_in, conv_state_out;   /* [C, K-1] f32, may be the same tensor */
	int state_in, state_out;             /* [d_k, d_v, h_v, 1] f32, may be the same */
	int64_t n_embd, h_k, h_v, d_k, d_v;  /* h_v % h_k == 0 */
} pprpc_kda_block;

PPRPC_API void pprpc_kda_block_init(pprpc_kda_block *cfg);
PPRPC_API int pprpc_gb_kda_block(pprpc_graph_builder *gb, const pprpc_kda_block *cfg, int x,
				 int dst, int *out);

/* Pre-norm SwiGLU MLP: out = x + swiglu(h Wgate, h Wup) Wdown with
 * h = rms_norm(x) * norm_w. */
typedef struct pprpc_mlp_block {
	int norm_w;               /* [n_embd] */
	float norm_eps;           /* default 1e-6 */
	int w_gate, w_up;         /* [n_embd, n_ff] */
	int w_down;               /* [n_ff, n_embd] */
} pprpc_mlp_block;

PPRPC_API void pprpc_mlp_block_init(pprpc_mlp_block *cfg);
PPRPC_API int pprpc_gb_swiglu_mlp(pprpc_graph_builder *gb, const pprpc_mlp_block *cfg, int x,
				  int dst, int *out);

#ifdef __cplusplus
}
#endif
#endif
