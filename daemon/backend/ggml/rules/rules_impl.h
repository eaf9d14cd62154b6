/*
 * rules_impl.h — shared helpers of the per-op rules (one file per op family).
 *
 * A rule receives the node through a rule_ctx and returns 0 or the result of
 * rules_fail() (PPRPC_EINVAL with the reason written to the context's buffer).
 * Helpers only read fields and call ggml query functions that contain no
 * GGML_ASSERT (ggml_nelements, ggml_is_contiguous*, ggml_are_same_shape,
 * ggml_can_repeat, ggml_type_size, ggml_blck_size, ggml_is_quantized,
 * ggml_type_name, ggml_op_name: the last four carry a plain assert() on the type
 * range, which the structural validator already guarantees).
 *
 * Never divide or take a modulo by a tensor dimension without checking it is
 * non-zero first: ne[i] == 0 is legal on the wire.
 */
#ifndef PPRPC_GGML_RULES_IMPL_H
#define PPRPC_GGML_RULES_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ggml.h"
#include "pprpc/types.h"

struct rule_ctx {
	const struct ggml_tensor *node;
	char *err;
	size_t errlen;
};

typedef int (*rule_fn)(struct rule_ctx *c);

/* Writes "<OP>: <reason>" to the context's buffer; returns PPRPC_EINVAL. */
int rules_fail(struct rule_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define REQ(c, cond, ...) do { if (!(cond)) return rules_fail((c), __VA_ARGS__); } while (0)
#define TRY(expr) do { int r_ = (expr); if (r_) return r_; } while (0)

/* shapes in messages */
#define NE_FMT "[%lld,%lld,%lld,%lld]"
#define NE_ARGS(t) (long long)(t)->ne[0], (long long)(t)->ne[1], (long long)(t)->ne[2], (long long)(t)->ne[3]

#define TB(t) (1ull << (t))
#define TB_F32      TB(GGML_TYPE_F32)
#define TB_F16      TB(GGML_TYPE_F16)
#define TB_BF16     TB(GGML_TYPE_BF16)
#define TB_I32      TB(GGML_TYPE_I32)
#define TB_I64      TB(GGML_TYPE_I64)
#define TB_FLOAT    (TB_F32 | TB_F16 | TB_BF16)

_Static_assert(GGML_TYPE_COUNT <= 64, "type masks are 64-bit");

static inline const struct ggml_tensor *rules_src(const struct rule_ctx *c, int i)
{
	return c->node->src[i];
}

static inline int32_t rules_i32(const struct ggml_tensor *t, int i)
{
	return t->op_params[i];
}

static inline float rules_f32(const struct ggml_tensor *t, int i)
{
	float f;
	memcpy(&f, &t->op_params[i], sizeof(f));
	return f;
}

/* The tensor whose memory t lies in, and t's byte offset in it (ggml keeps
 * view_src pointing at the base tensor, never at another view). */
static inline const struct ggml_tensor *rules_base(const struct ggml_tensor *t)
{
	return t->view_src ? t->view_src : t;
}

static inline size_t rules_offs(const struct ggml_tensor *t)
{
	return t->view_src ? t->view_offs : 0;
}

static inline bool rules_type_is(const struct ggml_tensor *t, uint64_t mask)
{
	return (TB(t->type) & mask) != 0;
}

/* Sources: slots in `required` must be set, slots outside `allowed` must be NULL. */
int rules_srcs(struct rule_ctx *c, unsigned required, unsigned allowed);

/* name's type is in mask */
int rules_type(struct rule_ctx *c, const struct ggml_tensor *t, const char *name, uint64_t mask);

/* The node is a fresh tensor (ggml_new_tensor) of this type and shape. */
int rules_new(struct rule_ctx *c, enum ggml_type type, const int64_t ne[4]);
int rules_new4(struct rule_ctx *c, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

/* The node is ggml_view_tensor(a): same type, ne and nb, over a's memory. */
int rules_view_tensor(struct rule_ctx *c, const struct ggml_tensor *a);

/* The node is ggml_dup_tensor(a) or, for the _inplace variants, ggml_view_tensor(a). */
int rules_dup_or_inplace(struct rule_ctx *c, const struct ggml_tensor *a);

/* Layout checks with a message naming the tensor. */
/* contiguous as the kernels walk it: also every stride below the last dim of
 * size > 1 dense (ggml's own check ignores a size-1 dim's stride) */
int rules_contiguous(struct rule_ctx *c, const struct ggml_tensor *t, const char *name);
/* every stride that of a fresh tensor, size-1 dimensions included */
int rules_dense(struct rule_ctx *c, const struct ggml_tensor *t, const char *name);
/* the type has ggml's to_float (dequantization); Q8_1, Q8_K have none */
bool rules_has_to_float(enum ggml_type type);
int rules_contiguous_1(struct rule_ctx *c, const struct ggml_tensor *t, const char *name);
int rules_contiguous_2(struct rule_ctx *c, const struct ggml_tensor *t, const char *name);
int rules_contiguous_rows(struct rule_ctx *c, const struct ggml_tensor *t, const char *name);
int rules_nb0(struct rule_ctx *c, const struct ggml_tensor *t, const char *name);
/* every nb[i] a multiple of the element size (CUDA kernels index in elements) */
int rules_strides_elems(struct rule_ctx *c, const struct ggml_tensor *t, const char *name);
/* nb[0] <= nb[1] <= nb[2] <= nb[3] (dst "cannot be transposed or permuted") */
int rules_not_permuted(struct rule_ctx *c, const struct ggml_tensor *t, const char *name);
int rules_same_shape(struct rule_ctx *c, const struct ggml_tensor *a, const char *an,
		     const struct ggml_tensor *b, const char *bn);
/* every ne[i] and, in elements, every nb[i] fits in 32 bits (CUDA grid and index math) */
int rules_fits_u32(struct rule_ctx *c, const struct ggml_tensor *t, const char *name);

/* ---- the rules, by family ---- */
/* rules_binary.c */
int rule_add(struct rule_ctx *c);
int rule_sub_mul_div(struct rule_ctx *c);
int rule_add_id(struct rule_ctx *c);
/* rules_matmul.c */
int rule_mul_mat(struct rule_ctx *c);
int rule_mul_mat_id(struct rule_ctx *c);
int rule_out_prod(struct rule_ctx *c);
/* rules_norm.c */
int rule_norm(struct rule_ctx *c);
int rule_rms_norm(struct rule_ctx *c);
int rule_l2_norm(struct rule_ctx *c);
int rule_group_norm(struct rule_ctx *c);
/* rules_unary.c */
int rule_unary(struct rule_ctx *c);
int rule_glu(struct rule_ctx *c);
int rule_scale(struct rule_ctx *c);
int rule_clamp(struct rule_ctx *c);
int rule_fill(struct rule_ctx *c);
int rule_leaky_relu(struct rule_ctx *c);
int rule_sqr_sqrt_log_sin_cos(struct rule_ctx *c);
/* rules_copy.c */
bool rules_can_quantize_to(enum ggml_type t);
int rule_cpy(struct rule_ctx *c);
int rule_cont(struct rule_ctx *c);
int rule_dup(struct rule_ctx *c);
/* rules_view.c */
int rule_view(struct rule_ctx *c);
int rule_reshape(struct rule_ctx *c);
int rule_permute(struct rule_ctx *c);
int rule_transpose(struct rule_ctx *c);
/* rules_rows.c */
int rule_get_rows(struct rule_ctx *c);
int rule_set_rows(struct rule_ctx *c);
int rule_argsort(struct rule_ctx *c);
int rule_top_k(struct rule_ctx *c);
int rule_argmax(struct rule_ctx *c);
/* rules_rope.c */
int rule_rope(struct rule_ctx *c);
/* rules_attn.c */
int rule_soft_max(struct rule_ctx *c);
int rule_flash_attn_ext(struct rule_ctx *c);
/* rules_reduce.c */
int rule_sum(struct rule_ctx *c);
int rule_sum_rows(struct rule_ctx *c);
int rule_mean(struct rule_ctx *c);
int rule_cumsum(struct rule_ctx *c);
int rule_repeat(struct rule_ctx *c);
int rule_concat(struct rule_ctx *c);
int rule_pad(struct rule_ctx *c);
/* rules_ssm.c */
int rule_ssm_conv(struct rule_ctx *c);
int rule_ssm_scan(struct rule_ctx *c);
int rule_gated_delta_net(struct rule_ctx *c);
int rule_solve_tri(struct rule_ctx *c);
int rule_tri(struct rule_ctx *c);
/* rules_misc.c */
int rule_set(struct rule_ctx *c);
int rule_arange(struct rule_ctx *c);
int rule_pool_2d(struct rule_ctx *c);
int rule_lightning_indexer(struct rule_ctx *c);
int rule_dsv4_hc_comb(struct rule_ctx *c);
int rule_dsv4_hc_pre(struct rule_ctx *c);
int rule_dsv4_hc_post(struct rule_ctx *c);

#endif
