/*
 * daemon/backend/ggml/rules/rules_interim.c — interim per-op rules for a few
 * ops, until the rules branch (daemon/backend/ggml/rules/) replaces this file.
 *
 * Real checks, deliberately narrow: what ggml's constructor asserts, what
 * the ggml-cpu kernel asserts (dim-0 strides, contiguity), that the node's
 * type/ne/nb are exactly what the constructor would have made (a fresh
 * contiguous tensor, or a view of the right source), and op_params that
 * hold nothing but the op's parameters.  Narrower than ggml where that keeps
 * the rule simple: f32 (and f16 where marked) only, no empty tensors.
 *
 *   ADD, MUL        f32; b repeats into a; result like a, or a in place
 *   MUL_MAT         a f32/f16 not transposed, b f32; a->ne0 == b->ne0,
 *                   b->ne2/ne3 multiples of a's; result f32 {a1, b1, b2, b3}
 *   SCALE           f32 contiguous; result like a, or a in place
 *   SOFT_MAX        f32 contiguous, no mask, no sinks, max_bias 0
 *   GET_ROWS        a f32/i32 rows, b i32 ids (a->ne2 == b->ne1, a->ne3 ==
 *                   b->ne2, b->ne3 == 1); result {a0, b0, b1, b2} of a's type; the
 *                   ids' values are guarded at run time (ggml_guard.c)
 *   CPY             f32/f16 to f32/f16 of as many elements; the result is b
 *   CONT            f32/f16; contiguous, as many elements, same type
 *   RESHAPE, VIEW, PERMUTE, TRANSPOSE   views of a as ggml makes them
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "daemon/backend/ggml/rules/ggml_rules.h"
#include "ggml.h"
#include "pprpc/types.h"

#define FAIL(...)                                         \
	do {                                              \
		snprintf(err, errlen, __VA_ARGS__);       \
		return PPRPC_EINVAL;                      \
	} while (0)

/* The tensor owning a tensor's bytes and the offset into it. */
static const struct ggml_tensor *base_of(const struct ggml_tensor *t, size_t *ret_offs)
{
	*ret_offs = t->view_src ? t->view_offs : 0;
	return t->view_src ? t->view_src : t;
}

/* The only sources are the first n, all present. */
static bool srcs_are(const struct ggml_tensor *node, int n)
{
	for (int i = 0; i < GGML_MAX_SRC; i++)
		if ((i < n) != (node->src[i] != NULL))
			return false;
	return true;
}

static bool params_zero_from(const struct ggml_tensor *node, size_t byte)
{
	const uint8_t *p = (const uint8_t *)node->op_params;

	for (size_t i = byte; i < sizeof(node->op_params); i++)
		if (p[i])
			return false;
	return true;
}

static bool same_ne(const struct ggml_tensor *t, const int64_t ne[GGML_MAX_DIMS])
{
	return !memcmp(t->ne, ne, sizeof(t->ne));
}

/* What ggml_new_tensor makes: no view, contiguous strides. */
static bool fresh(const struct ggml_tensor *t, enum ggml_type type, const int64_t ne[GGML_MAX_DIMS])
{
	size_t nb = ggml_type_size(type);

	if (t->view_src || t->type != type || !same_ne(t, ne) || t->nb[0] != nb)
		return false;
	nb *= (size_t)(ne[0] / ggml_blck_size(type));
	for (int k = 1; k < GGML_MAX_DIMS; k++) {
		if (t->nb[k] != nb)
			return false;
		nb *= (size_t)ne[k];
	}
	return true;
}

/* What ggml_view_tensor(a) makes: a's bytes, type, ne and nb. */
static bool view_of(const struct ggml_tensor *t, const struct ggml_tensor *a)
{
	size_t ao;
	const struct ggml_tensor *ab = base_of(a, &ao);

	return t->view_src == ab && t->view_offs == ao && t->type == a->type && same_ne(t, a->ne) &&
	       !memcmp(t->nb, a->nb, sizeof(t->nb));
}

static bool nonempty(const struct ggml_tensor *t)
{
	return ggml_nelements(t) > 0;
}

static int binary(const struct ggml_tensor *node, char *err, size_t errlen)
{
	const struct ggml_tensor *a = node->src[0], *b = node->src[1];

	if (!srcs_are(node, 2) || !params_zero_from(node, 0))
		FAIL("takes sources a, b and no parameters");
	if (a->type != GGML_TYPE_F32 || b->type != GGML_TYPE_F32)
		FAIL("interim rule: f32 only (a %s, b %s)", ggml_type_name(a->type), ggml_type_name(b->type));
	if (!nonempty(a) || !nonempty(b))
		FAIL("interim rule: no empty tensors");
	if (!ggml_can_repeat(b, a))
		FAIL("b [%lld %lld %lld %lld] does not repeat into a [%lld %lld %lld %lld]", (long long)b->ne[0],
		     (long long)b->ne[1], (long long)b->ne[2], (long long)b->ne[3], (long long)a->ne[0],
		     (long long)a->ne[1], (long long)a->ne[2], (long long)a->ne[3]);
	if (a->nb[0] != sizeof(float))
		FAIL("a's elements must be contiguous in dimension 0");
	if (!fresh(node, GGML_TYPE_F32, a->ne) && !view_of(node, a))
		FAIL("the result must be a new f32 tensor shaped like a, or a itself");
	return 0;
}

static int mul_mat(const struct ggml_tensor *node, char *err, size_t errlen)
{
	const struct ggml_tensor *a = node->src[0], *b = node->src[1];
	int64_t ne[4];
	int32_t prec = node->op_params[0];

	if (!srcs_are(node, 2) || !params_zero_from(node, sizeof(int32_t)) ||
	    (prec != GGML_PREC_DEFAULT && prec != GGML_PREC_F32))
		FAIL("takes sources a, b and at most a precision");
	if ((a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_F16) || b->type != GGML_TYPE_F32)
		FAIL("interim rule: a f32/f16 and b f32 (a %s, b %s)", ggml_type_name(a->type),
		     ggml_type_name(b->type));
	if (!nonempty(a) || !nonempty(b))
		FAIL("interim rule: no empty tensors");
	/* ggml_can_mul_mat (static in ggml.c); a is not empty */
	if (a->ne[0] != b->ne[0] || b->ne[2] % a->ne[2] || b->ne[3] % a->ne[3])
		FAIL("a [%lld %lld %lld %lld] and b [%lld %lld %lld %lld] do not multiply", (long long)a->ne[0],
		     (long long)a->ne[1], (long long)a->ne[2], (long long)a->ne[3], (long long)b->ne[0],
		     (long long)b->ne[1], (long long)b->ne[2], (long long)b->ne[3]);
	if (ggml_is_transposed(a))
		FAIL("a must not be transposed");
	if (a->nb[0] != ggml_type_size(a->type) || b->nb[0] != sizeof(float))
		FAIL("a's and b's elements must be contiguous in dimension 0");
	ne[0] = a->ne[1];
	ne[1] = b->ne[1];
	ne[2] = b->ne[2];
	ne[3] = b->ne[3];
	if (!fresh(node, GGML_TYPE_F32, ne))
		FAIL("the result must be a new f32 tensor [%lld %lld %lld %lld]", (long long)ne[0], (long long)ne[1],
		     (long long)ne[2], (long long)ne[3]);
	return 0;
}

/* ggml_is_padded_1d (static in ggml.c): ggml_scale asserts it. */
static bool padded_1d(const struct ggml_tensor *t)
{
	return t->nb[0] == ggml_type_size(t->type) && t->nb[2] == t->nb[1] * (size_t)t->ne[1] &&
	       t->nb[3] == t->nb[2] * (size_t)t->ne[2];
}

static int scale(const struct ggml_tensor *node, char *err, size_t errlen)
{
	const struct ggml_tensor *a = node->src[0];

	if (!srcs_are(node, 1) || !params_zero_from(node, 2 * sizeof(float)))
		FAIL("takes source a and two parameters (scale, bias)");
	/* the constructor asserts padded rows, the kernel contiguity */
	if (a->type != GGML_TYPE_F32 || !nonempty(a) || !ggml_is_contiguous(a) || !padded_1d(a))
		FAIL("interim rule: a contiguous, non-empty f32 tensor");
	if (!fresh(node, GGML_TYPE_F32, a->ne) && !view_of(node, a))
		FAIL("the result must be a new f32 tensor shaped like a, or a itself");
	return 0;
}

static int soft_max(const struct ggml_tensor *node, char *err, size_t errlen)
{
	const struct ggml_tensor *a = node->src[0];
	float max_bias;

	memcpy(&max_bias, (const float *)node->op_params + 1, sizeof(max_bias));
	if (!srcs_are(node, 1) || !params_zero_from(node, 2 * sizeof(float)))
		FAIL("interim rule: no mask, no sinks; two parameters (scale, max_bias)");
	if (max_bias != 0.0f)
		FAIL("interim rule: max_bias must be 0");
	if (a->type != GGML_TYPE_F32 || !nonempty(a) || !ggml_is_contiguous(a))
		FAIL("interim rule: a contiguous, non-empty f32 tensor");
	if (!fresh(node, GGML_TYPE_F32, a->ne) && !view_of(node, a))
		FAIL("the result must be a new f32 tensor shaped like a, or a itself");
	return 0;
}

static int get_rows(const struct ggml_tensor *node, char *err, size_t errlen)
{
	const struct ggml_tensor *a = node->src[0], *b = node->src[1];
	int64_t ne[4];

	if (!srcs_are(node, 2) || !params_zero_from(node, 0))
		FAIL("takes sources a, ids and no parameters");
	if ((a->type != GGML_TYPE_F32 && a->type != GGML_TYPE_I32) || b->type != GGML_TYPE_I32)
		FAIL("interim rule: a f32/i32, ids i32 (a %s, ids %s)", ggml_type_name(a->type),
		     ggml_type_name(b->type));
	if (!nonempty(a) || !nonempty(b))
		FAIL("interim rule: no empty tensors");
	if (a->ne[2] != b->ne[1] || a->ne[3] != b->ne[2] || b->ne[3] != 1)
		FAIL("ids [%lld %lld %lld %lld] do not fit a [%lld %lld %lld %lld]", (long long)b->ne[0],
		     (long long)b->ne[1], (long long)b->ne[2], (long long)b->ne[3], (long long)a->ne[0],
		     (long long)a->ne[1], (long long)a->ne[2], (long long)a->ne[3]);
	if (a->nb[0] != ggml_type_size(a->type))
		FAIL("a's elements must be contiguous in dimension 0");
	ne[0] = a->ne[0];
	ne[1] = b->ne[0];
	ne[2] = b->ne[1];
	ne[3] = b->ne[2];
	/* ggml_get_rows: rows of i32 stay i32, anything else becomes f32 */
	if (!fresh(node, a->type, ne))
		FAIL("the result must be a new %s tensor [%lld %lld %lld %lld]", ggml_type_name(a->type),
		     (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
	return 0;
}

static bool f32_or_f16(enum ggml_type t)
{
	return t == GGML_TYPE_F32 || t == GGML_TYPE_F16;
}

static int cpy(const struct ggml_tensor *node, char *err, size_t errlen)
{
	const struct ggml_tensor *a = node->src[0], *b = node->src[1];

	if (!srcs_are(node, 2) || !params_zero_from(node, 0))
		FAIL("takes sources a, b and no parameters");
	if (!f32_or_f16(a->type) || !f32_or_f16(b->type))
		FAIL("interim rule: f32/f16 only (a %s, b %s)", ggml_type_name(a->type), ggml_type_name(b->type));
	if (!nonempty(a) || ggml_nelements(a) != ggml_nelements(b))
		FAIL("a and b must hold as many elements (%lld, %lld)", (long long)ggml_nelements(a),
		     (long long)ggml_nelements(b));
	if (!view_of(node, b))
		FAIL("the result must be b itself");
	return 0;
}

static int cont(const struct ggml_tensor *node, char *err, size_t errlen)
{
	const struct ggml_tensor *a = node->src[0];

	if (!srcs_are(node, 1) || !params_zero_from(node, 0))
		FAIL("takes source a and no parameters");
	if (!f32_or_f16(a->type) || !nonempty(a))
		FAIL("interim rule: a non-empty f32/f16 tensor");
	if (ggml_nelements(node) != ggml_nelements(a) || !fresh(node, a->type, node->ne))
		FAIL("the result must be a new contiguous %s tensor of %lld elements", ggml_type_name(a->type),
		     (long long)ggml_nelements(a));
	return 0;
}

/* RESHAPE, VIEW, PERMUTE, TRANSPOSE: nothing runs; the node must be the view
 * of a that ggml's constructor makes. */
static int view_op(const struct ggml_tensor *node, char *err, size_t errlen)
{
	const struct ggml_tensor *a = node->src[0];
	size_t ao, off;
	const struct ggml_tensor *ab = base_of(a, &ao);

	if (!srcs_are(node, 1) || node->view_src != ab || node->type != a->type)
		FAIL("must be a view of its source a, of a's type");
	switch (node->op) {
	case GGML_OP_RESHAPE:
		if (!params_zero_from(node, 0) || !ggml_is_contiguous(a) || node->view_offs != ao ||
		    ggml_nelements(node) != ggml_nelements(a) || !ggml_is_contiguous(node))
			FAIL("reshapes a contiguous a into as many contiguous elements");
		return 0;
	case GGML_OP_VIEW:
		memcpy(&off, node->op_params, sizeof(off));
		if (!params_zero_from(node, sizeof(off)) || off > SIZE_MAX - ao || node->view_offs != ao + off)
			FAIL("its offset parameter disagrees with its view offset");
		return 0;
	case GGML_OP_TRANSPOSE:
		if (!params_zero_from(node, 0) || node->view_offs != ao || node->ne[0] != a->ne[1] ||
		    node->ne[1] != a->ne[0] || node->ne[2] != a->ne[2] || node->ne[3] != a->ne[3] ||
		    node->nb[0] != a->nb[1] || node->nb[1] != a->nb[0] || node->nb[2] != a->nb[2] ||
		    node->nb[3] != a->nb[3])
			FAIL("must swap a's first two dimensions");
		return 0;
	case GGML_OP_PERMUTE: {
		int seen = 0;

		if (!params_zero_from(node, 4 * sizeof(int32_t)) || node->view_offs != ao)
			FAIL("takes four axes");
		for (int i = 0; i < 4; i++) {
			int32_t ax = node->op_params[i];

			if (ax < 0 || ax > 3 || (seen & (1 << ax)))
				FAIL("axes are not a permutation of 0..3");
			seen |= 1 << ax;
			if (node->ne[ax] != a->ne[i] || node->nb[ax] != a->nb[i])
				FAIL("dimension %d of a must be dimension %d of the result", i, ax);
		}
		return 0;
	}
	default:
		FAIL("not a view op");
	}
}

int ggml_rules_check(const struct ggml_tensor *node, char *err, size_t errlen)
{
	int rc;

	switch (node->op) {
	case GGML_OP_ADD:
	case GGML_OP_MUL:
		rc = binary(node, err, errlen);
		break;
	case GGML_OP_MUL_MAT:
		rc = mul_mat(node, err, errlen);
		break;
	case GGML_OP_SCALE:
		rc = scale(node, err, errlen);
		break;
	case GGML_OP_SOFT_MAX:
		rc = soft_max(node, err, errlen);
		break;
	case GGML_OP_GET_ROWS:
		rc = get_rows(node, err, errlen);
		break;
	case GGML_OP_CPY:
		rc = cpy(node, err, errlen);
		break;
	case GGML_OP_CONT:
		rc = cont(node, err, errlen);
		break;
	case GGML_OP_RESHAPE:
	case GGML_OP_VIEW:
	case GGML_OP_PERMUTE:
	case GGML_OP_TRANSPOSE:
		rc = view_op(node, err, errlen);
		break;
	default:
		snprintf(err, errlen, "no rule for ggml op %s", ggml_op_name(node->op));
		return PPRPC_EUNSUPP;
	}
	return rc;
}
