/*
 * kernels/ops.c — the op table and the generic part of validation: op
 * lookup, source count, descriptor checks, unused parameters, and comparing
 * a given destination with the inferred one.  Per-op rules: ops_rules.c.
 */
#include "kernels/ops_impl.h"

#include <stdarg.h>
#include <stdio.h>

static const struct kern_op_desc op_table[PPRPC_OP_COUNT] = {
	[PPRPC_OP_ADD] = { .name = "ADD", .nsrc = 2, .infer = kern_infer_binary },
	[PPRPC_OP_MUL] = { .name = "MUL", .nsrc = 2, .infer = kern_infer_binary },
	[PPRPC_OP_SCALE] = { .name = "SCALE", .nsrc = 1, .f_used = 0x3,
			     .infer = kern_infer_scale },
	[PPRPC_OP_CPY] = { .name = "CPY", .nsrc = 1, .dst_view = true, .i_used = 0x1,
			   .infer = kern_infer_cpy },
	[PPRPC_OP_MUL_MAT] = { .name = "MUL_MAT", .nsrc = 2, .infer = kern_infer_mul_mat },
	[PPRPC_OP_GET_ROWS] = { .name = "GET_ROWS", .nsrc = 2, .infer = kern_infer_get_rows },
	[PPRPC_OP_SET_ROWS] = { .name = "SET_ROWS", .nsrc = 2, .i_used = 0x3,
				.infer = kern_infer_set_rows },
	[PPRPC_OP_CONCAT] = { .name = "CONCAT", .nsrc = 2, .i_used = 0x1,
			      .infer = kern_infer_concat },
	[PPRPC_OP_RMS_NORM] = { .name = "RMS_NORM", .nsrc = 1, .f_used = 0x1,
				.infer = kern_infer_norm },
	[PPRPC_OP_L2_NORM] = { .name = "L2_NORM", .nsrc = 1, .f_used = 0x1,
			       .infer = kern_infer_norm },
	[PPRPC_OP_SILU] = { .name = "SILU", .nsrc = 1, .infer = kern_infer_unary },
	[PPRPC_OP_SIGMOID] = { .name = "SIGMOID", .nsrc = 1, .infer = kern_infer_unary },
	[PPRPC_OP_SOFTPLUS] = { .name = "SOFTPLUS", .nsrc = 1, .infer = kern_infer_unary },
	[PPRPC_OP_EXP] = { .name = "EXP", .nsrc = 1, .infer = kern_infer_unary },
	[PPRPC_OP_GELU] = { .name = "GELU", .nsrc = 1, .infer = kern_infer_unary },
	[PPRPC_OP_SWIGLU] = { .name = "SWIGLU", .nsrc = 2, .infer = kern_infer_swiglu },
	[PPRPC_OP_SOFTMAX] = { .name = "SOFTMAX", .nsrc = 1, .f_used = 0x1, .i_used = 0x3,
			       .infer = kern_infer_softmax },
	[PPRPC_OP_ARGMAX] = { .name = "ARGMAX", .nsrc = 1, .infer = kern_infer_argmax },
	[PPRPC_OP_ROPE] = { .name = "ROPE", .nsrc = 2, .f_used = 0x3, .i_used = 0x3,
			    .infer = kern_infer_rope },
	[PPRPC_OP_ATTENTION] = { .name = "ATTENTION", .nsrc = 3, .f_used = 0x1, .i_used = 0x1,
				 .infer = kern_infer_attention },
	[PPRPC_OP_GATED_DELTA_NET] = { .name = "GATED_DELTA_NET", .nsrc = 6, .f_used = 0x3,
				       .i_used = 0x1f, .infer = kern_infer_gated_delta_net },
};

const struct kern_op_desc *kern_op_desc(int op)
{
	if (op < 0 || op >= PPRPC_OP_COUNT || !op_table[op].infer)
		return NULL;
	return &op_table[op];
}

int kern_errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

bool kern_op_inplace_ok(int op)
{
	switch (op) {
	case PPRPC_OP_ADD: case PPRPC_OP_MUL: case PPRPC_OP_SCALE:
	case PPRPC_OP_SILU: case PPRPC_OP_SIGMOID: case PPRPC_OP_SOFTPLUS: case PPRPC_OP_EXP:
	case PPRPC_OP_GELU: case PPRPC_OP_SWIGLU: case PPRPC_OP_RMS_NORM: case PPRPC_OP_L2_NORM:
	case PPRPC_OP_SOFTMAX: case PPRPC_OP_ROPE:
		return true;
	default:
		return false;
	}
}

int kern_op_nsrc(int op)
{
	const struct kern_op_desc *d = kern_op_desc(op);

	return d ? d->nsrc : -1;
}

const char *kern_op_name(int op)
{
	const struct kern_op_desc *d = kern_op_desc(op);

	return d ? d->name : "?";
}

static int check_params(const struct kern_op_desc *d, const struct pprpc_op_params *p,
			char *err, size_t errlen)
{
	if (!p)
		return 0;  /* no parameters: all zero */
	for (int k = 0; k < PPRPC_OP_MAX_F; k++)
		if (!(d->f_used & (1u << k)) && p->f[k] != 0.0f)
			return kern_errf(err, errlen, PPRPC_EINVAL,
					 "%s: unused parameter f[%d] is not zero", d->name, k);
	for (int k = 0; k < PPRPC_OP_MAX_I; k++)
		if (!(d->i_used & (1u << k)) && p->i[k] != 0)
			return kern_errf(err, errlen, PPRPC_EINVAL,
					 "%s: unused parameter i[%d]=%d is not zero",
					 d->name, k, (int)p->i[k]);
	return 0;
}

int kern_op_infer(int op, const struct pprpc_op_params *p,
		  const struct kern_tensor *const *src, int nsrc,
		  struct kern_tensor *out, char *err, size_t errlen)
{
	const struct kern_op_desc *d = kern_op_desc(op);
	int rc;

	if (!d)
		return kern_errf(err, errlen, PPRPC_EINVAL, "unknown op %d", op);
	if (nsrc != d->nsrc)
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: takes %d sources, got %d",
				 d->name, d->nsrc, nsrc);
	if (!src || !out)
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: missing argument", d->name);
	for (int i = 0; i < nsrc; i++) {
		if (!src[i])
			return kern_errf(err, errlen, PPRPC_EINVAL, "%s: src%d missing",
					 d->name, i);
		/* Cheap, and keeps a caller's missed check from becoming a
		 * wild read in a kernel. */
		rc = kern_tensor_check(src[i]);
		if (rc < 0)
			return kern_errf(err, errlen, rc, "%s: src%d: invalid descriptor",
					 d->name, i);
	}
	rc = check_params(d, p, err, errlen);
	if (rc < 0)
		return rc;
	return d->infer(d->name, p, src, out, err, errlen);
}

static int same_ne(const struct kern_tensor *a, const struct kern_tensor *b)
{
	for (int i = 0; i < PPRPC_MAX_DIMS; i++)
		if (a->ne[i] != b->ne[i])
			return i;
	return -1;
}

int kern_op_check_dst(int op, const struct pprpc_op_params *p,
		      const struct kern_tensor *const *src, int nsrc,
		      const struct kern_tensor *dst, char *err, size_t errlen)
{
	const struct kern_op_desc *d;
	struct kern_tensor want;
	int rc, dim;

	rc = kern_op_infer(op, p, src, nsrc, &want, err, errlen);
	if (rc < 0)
		return rc;
	d = kern_op_desc(op);
	if (!dst)
		return kern_errf(err, errlen, PPRPC_EINVAL, "%s: missing dst", d->name);
	rc = kern_tensor_check(dst);
	if (rc < 0)
		return kern_errf(err, errlen, rc, "%s: dst: invalid descriptor", d->name);
	if (dst->dtype != want.dtype)
		return kern_errf(err, errlen, PPRPC_ETYPE, "%s: dst is %s, expected %s",
				 d->name, kern_dtype(dst->dtype)->name,
				 kern_dtype(want.dtype)->name);
	if (d->dst_view) {
		if (kern_tensor_nelements(dst) != kern_tensor_nelements(&want))
			return kern_errf(err, errlen, PPRPC_ESHAPE,
					 "%s: dst has %lld elements, src0 has %lld", d->name,
					 (long long)kern_tensor_nelements(dst),
					 (long long)kern_tensor_nelements(&want));
		return 0;
	}
	dim = same_ne(dst, &want);
	if (dim >= 0)
		return kern_errf(err, errlen, PPRPC_ESHAPE, "%s: dst.ne[%d]=%lld, expected %lld",
				 d->name, dim, (long long)dst->ne[dim], (long long)want.ne[dim]);
	if (!kern_tensor_is_contiguous(dst))
		return kern_errf(err, errlen, PPRPC_ESHAPE, "%s: dst must be contiguous",
				 d->name);
	return 0;
}
