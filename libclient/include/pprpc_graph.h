/*
 * pprpc_graph.h — the graph builder of libpprpc: tensors and nodes collected
 * on the client, checked with the daemon's own shape rules (kernels/ops.h)
 * as they are added, and sent once with pprpc_graph_create.  The graph
 * handle then runs with pprpc_graph_run / pprpc_graph_run_async (pprpc.h).
 */
#ifndef PPRPC_GRAPH_H
#define PPRPC_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "pprpc.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pprpc_graph_builder pprpc_graph_builder;

/* A graph builder collects tensors and nodes; shapes are checked as nodes
 * are added, with the same rules the daemon applies.  Tensor indices
 * returned by the pprpc_gb_* functions name tensors inside one builder. */
PPRPC_API int pprpc_graph_builder_new(pprpc_graph_builder **out);
PPRPC_API void pprpc_graph_builder_free(pprpc_graph_builder *gb);
/* Message for the builder's last failure. */
PPRPC_API const char *pprpc_gb_error(const pprpc_graph_builder *gb);
/* Add a tensor living in a buffer (an input, a weight, or an output the
 * graph writes).  Returns its index. */
PPRPC_API int pprpc_gb_tensor(pprpc_graph_builder *gb, const pprpc_tensor *t);
/* A view of tensor src: new dtype/ne/nb, starting offset bytes into src. */
PPRPC_API int pprpc_gb_view(pprpc_graph_builder *gb, int src, int dtype, const int64_t ne[4],
			    const uint64_t nb[4], uint64_t offset);
/* A view of src with dimensions a and b swapped. */
PPRPC_API int pprpc_gb_permute2(pprpc_graph_builder *gb, int src, int a, int b);
/* Add a node.  dst < 0: the output is a new scratch tensor (placed by the
 * daemon) of the inferred shape; else dst names the tensor to write.
 * Returns the output's index.  Errors: PPRPC_ESHAPE, PPRPC_ETYPE,
 * PPRPC_EINVAL (see pprpc_gb_error). */
PPRPC_API int pprpc_gb_op(pprpc_graph_builder *gb, int op, const int *srcs, int nsrc,
			  const struct pprpc_op_params *params, int dst);
PPRPC_API int pprpc_gb_add(pprpc_graph_builder *gb, int a, int b, int dst);
PPRPC_API int pprpc_gb_mul(pprpc_graph_builder *gb, int a, int b, int dst);
PPRPC_API int pprpc_gb_scale(pprpc_graph_builder *gb, int a, float scale, float bias, int dst);
/* Cast/copy a into dtype (dst < 0: new contiguous scratch of a's shape). */
PPRPC_API int pprpc_gb_cpy(pprpc_graph_builder *gb, int a, int dtype, int dst);
/* dst[n,m] = sum_k w[k,n] * x[k,m] */
PPRPC_API int pprpc_gb_mul_mat(pprpc_graph_builder *gb, int w, int x, int dst);
/* The descriptor of tensor idx (buffer 0 for scratch). */
PPRPC_API int pprpc_gb_tensor_get(const pprpc_graph_builder *gb, int idx, pprpc_tensor *out);
PPRPC_API int pprpc_gb_node_count(const pprpc_graph_builder *gb);
/* Transformer ops (semantics, params and output shapes: kernels/ops.h).
 * Like pprpc_gb_op: dst < 0 makes a new scratch output; returns the
 * output's index or PPRPC_ESHAPE / PPRPC_ETYPE / PPRPC_EINVAL. */
/* dst f32 [D, n, ...] = rows ids[n, ...] (i32) of table [D, V, ...]
 * (f32/f16/bf16/q8_0).  An id outside [0, V) fails the run (PPRPC_ERANGE). */
PPRPC_API int pprpc_gb_get_rows(pprpc_graph_builder *gb, int table, int ids, int dst);
/* Write rows of values (f32 [D, n, ...]) into table (an existing tensor,
 * f32/f16/bf16 [D, V, ...], usually a KV cache in a buffer) at i32 ids [n];
 * other rows are untouched.  Returns table.  An id outside [0, V) fails
 * the run with PPRPC_ERANGE and writes nothing. */
PPRPC_API int pprpc_gb_set_rows(pprpc_graph_builder *gb, int table, int values, int ids);
/* a and b joined along dim (0..3). */
PPRPC_API int pprpc_gb_concat(pprpc_graph_builder *gb, int a, int b, int dim, int dst);
/* x / sqrt(mean(x^2) + eps) over ne[0]. */
PPRPC_API int pprpc_gb_rms_norm(pprpc_graph_builder *gb, int a, float eps, int dst);
/* x / max(||x||, eps) over ne[0]. */
PPRPC_API int pprpc_gb_l2_norm(pprpc_graph_builder *gb, int a, float eps, int dst);
PPRPC_API int pprpc_gb_silu(pprpc_graph_builder *gb, int a, int dst);
PPRPC_API int pprpc_gb_sigmoid(pprpc_graph_builder *gb, int a, int dst);
PPRPC_API int pprpc_gb_softplus(pprpc_graph_builder *gb, int a, int dst);
PPRPC_API int pprpc_gb_exp(pprpc_graph_builder *gb, int a, int dst);
/* GELU, ggml's tanh approximation. */
PPRPC_API int pprpc_gb_gelu(pprpc_graph_builder *gb, int a, int dst);
/* silu(a) * b, same shapes. */
PPRPC_API int pprpc_gb_swiglu(pprpc_graph_builder *gb, int a, int b, int dst);
/* softmax(scale * a) over ne[0]; causal: row j of [n_kv, n_q, ...] sees keys
 * k <= j + n_past (n_past must be 0 when not causal). */
PPRPC_API int pprpc_gb_softmax(pprpc_graph_builder *gb, int a, float scale, int causal,
			       int n_past, int dst);
/* i32 [R1, R2, R3, 1]: index of each row's maximum of a [n, R1, R2, R3]. */
PPRPC_API int pprpc_gb_argmax(pprpc_graph_builder *gb, int a, int dst);
/* Rotary embedding of x f32 [head_dim, n_head, n_tok] at positions pos
 * (i32 [n_tok]): mode PPRPC_ROPE_NORMAL or PPRPC_ROPE_NEOX, the first n_dims
 * (even) elements of each head rotated, theta = pos * freq_scale *
 * freq_base^(-2i/n_dims).  Errors as pprpc_gb_op. */
PPRPC_API int pprpc_gb_rope(pprpc_graph_builder *gb, int x, int pos, int mode, int n_dims,
			    float freq_base, float freq_scale, int dst);
/* Causal attention of q f32 [D, n_head, n_q] over the KV cache k, v
 * [D, n_kv_head, n_kv] (both f32 or both f16): query j sits at position
 * n_past + j and sees keys 0 ..= n_past + j (n_past + n_q <= n_kv).
 * Output f32 [D, n_head, n_q].  Errors as pprpc_gb_op. */
PPRPC_API int pprpc_gb_attention(pprpc_graph_builder *gb, int q, int k, int v, float scale,
				 int n_past, int dst);
/* Gated delta rule (GDN / KDA); shapes and semantics in kernels/ops.h
 * (GATED_DELTA_NET).  The backend picks the serial or the chunked form
 * (to force one, set i[1] / i[2] through pprpc_gb_op).  All sources f32: q, k [d_k, H_k, T, B],
 * v [d_v, H_v, T, B], g [1 or d_k, H_v, T, B] (log-space gate, <= 0),
 * beta [1, H_v, T, B], state [d_k, d_v, H_v, B].  scale multiplies the
 * output (finite, nonzero: pass 1/sqrt(d_k) explicitly if that is the
 * model's choice); l2norm != 0 L2-normalises q and k inside the op with
 * eps 1e-6 (other eps: pprpc_gb_op with f[1]).  Returns the index of the
 * packed f32 output [d_v*H_v*T*B + d_k*d_v*H_v*B] (dst < 0: new scratch).
 * Errors as pprpc_gb_op. */
PPRPC_API int pprpc_gb_gated_delta_net(pprpc_graph_builder *gb, int q, int k, int v, int g,
				       int beta, int state, float scale, int l2norm, int dst);
/* Views of a GATED_DELTA_NET packed output: *out_idx = o [d_v, H_v, T, B],
 * *state_idx = final state [d_k, d_v, H_v, B] (both contiguous f32).
 * Returns 0, or PPRPC_ESHAPE when packed is not a contiguous f32 tensor of
 * exactly that size, PPRPC_EINVAL for a bad index or dimension. */
PPRPC_API int pprpc_gb_gdn_views(pprpc_graph_builder *gb, int packed, int64_t d_v, int64_t h_v,
				 int64_t t, int64_t b, int64_t d_k, int *out_idx, int *state_idx);

/* Send the builder's graph to the daemon, which validates and plans it once.
 * The builder may be freed afterwards; the graph runs with pprpc_graph_run
 * or pprpc_graph_run_async and goes with pprpc_graph_free (pprpc.h). */
PPRPC_API int pprpc_graph_create(pprpc_client *c, uint32_t device, const pprpc_graph_builder *gb,
				 pprpc_graph *out);

#ifdef __cplusplus
}
#endif
#endif
