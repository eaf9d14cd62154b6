/*
 * tests/unit/test_kernels_shapes.c — the op table and each op's shape and
 * dtype rules (kern_op_infer, kern_op_check_dst): accepted cases produce the
 * documented destination, rejected ones the right code and a reason.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "kernels/ops.h"

static struct kern_tensor T(int dtype, int64_t a, int64_t b, int64_t c, int64_t d)
{
	struct kern_tensor t;
	const int64_t ne[4] = { a, b, c, d };

	assert_int_equal(kern_tensor_init_contig(&t, dtype, ne), 0);
	return t;
}

/* Transpose dims 0 and 1 of a contiguous tensor (a non-contiguous view). */
static struct kern_tensor transposed(struct kern_tensor t)
{
	int64_t ne = t.ne[0];
	uint64_t nb = t.nb[0];

	t.ne[0] = t.ne[1];
	t.nb[0] = t.nb[1];
	t.ne[1] = ne;
	t.nb[1] = nb;
	return t;
}

static void assert_ne(const struct kern_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d)
{
	assert_int_equal(t->ne[0], a);
	assert_int_equal(t->ne[1], b);
	assert_int_equal(t->ne[2], c);
	assert_int_equal(t->ne[3], d);
	assert_true(kern_tensor_is_contiguous(t));
}

static int infer2(int op, const struct pprpc_op_params *p, struct kern_tensor a,
		  struct kern_tensor b, struct kern_tensor *out, char *err)
{
	const struct kern_tensor *src[2] = { &a, &b };

	return kern_op_infer(op, p, src, 2, out, err, 128);
}

static int infer1(int op, const struct pprpc_op_params *p, struct kern_tensor a,
		  struct kern_tensor *out, char *err)
{
	const struct kern_tensor *src[1] = { &a };

	return kern_op_infer(op, p, src, 1, out, err, 128);
}

static void test_table(void **state)
{
	(void)state;
	assert_int_equal(kern_op_nsrc(PPRPC_OP_ADD), 2);
	assert_int_equal(kern_op_nsrc(PPRPC_OP_MUL), 2);
	assert_int_equal(kern_op_nsrc(PPRPC_OP_SCALE), 1);
	assert_int_equal(kern_op_nsrc(PPRPC_OP_CPY), 1);
	assert_int_equal(kern_op_nsrc(PPRPC_OP_MUL_MAT), 2);
	assert_int_equal(kern_op_nsrc(PPRPC_OP_NONE), -1);
	assert_int_equal(kern_op_nsrc(PPRPC_OP_COUNT), -1);
	assert_int_equal(kern_op_nsrc(-3), -1);
	assert_string_equal(kern_op_name(PPRPC_OP_ADD), "ADD");
	assert_string_equal(kern_op_name(PPRPC_OP_MUL_MAT), "MUL_MAT");
	assert_string_equal(kern_op_name(PPRPC_OP_NONE), "?");
	assert_string_equal(kern_op_name(99), "?");
}

static void test_generic_rejects(void **state)
{
	struct kern_tensor a = T(PPRPC_F32, 4, 3, 1, 1), out, bad = a;
	const struct kern_tensor *src[2] = { &a, NULL };
	struct pprpc_op_params p;
	char err[128];

	(void)state;
	assert_int_equal(kern_op_infer(PPRPC_OP_NONE, NULL, src, 1, &out, err, sizeof(err)),
			 PPRPC_EINVAL);
	assert_string_equal(err, "unknown op 0");
	assert_int_equal(kern_op_infer(77, NULL, src, 1, &out, NULL, 0), PPRPC_EINVAL);
	assert_int_equal(kern_op_infer(PPRPC_OP_ADD, NULL, src, 1, &out, err, sizeof(err)),
			 PPRPC_EINVAL);
	assert_string_equal(err, "ADD: takes 2 sources, got 1");
	assert_int_equal(kern_op_infer(PPRPC_OP_ADD, NULL, src, 2, &out, err, sizeof(err)),
			 PPRPC_EINVAL);
	assert_int_equal(kern_op_infer(PPRPC_OP_SCALE, NULL, NULL, 1, &out, err, sizeof(err)),
			 PPRPC_EINVAL);
	assert_int_equal(kern_op_infer(PPRPC_OP_SCALE, NULL, src, 1, NULL, err, sizeof(err)),
			 PPRPC_EINVAL);
	/* A source that skipped kern_tensor_check is caught, not trusted. */
	bad.nb[1] = 6;
	assert_int_equal(infer1(PPRPC_OP_SCALE, NULL, bad, &out, err), PPRPC_EINVAL);
	assert_string_equal(err, "SCALE: src0: invalid descriptor");
	/* Unused parameters must be zero. */
	memset(&p, 0, sizeof(p));
	p.f[2] = 1.0f;
	assert_int_equal(infer1(PPRPC_OP_SCALE, &p, a, &out, err), PPRPC_EINVAL);
	assert_string_equal(err, "SCALE: unused parameter f[2] is not zero");
	memset(&p, 0, sizeof(p));
	p.i[7] = -1;
	assert_int_equal(infer2(PPRPC_OP_ADD, &p, a, a, &out, err), PPRPC_EINVAL);
	assert_string_equal(err, "ADD: unused parameter i[7]=-1 is not zero");
	memset(&p, 0, sizeof(p));
	p.f[0] = 2.0f;
	assert_int_equal(infer2(PPRPC_OP_MUL_MAT, &p, a, a, &out, err), PPRPC_EINVAL);
	/* A tiny errlen truncates instead of overflowing. */
	err[0] = 'x';
	err[1] = 'y';
	assert_int_equal(kern_op_infer(PPRPC_OP_ADD, NULL, src, 1, &out, err, 1), PPRPC_EINVAL);
	assert_int_equal(err[0], '\0');
	assert_int_equal(err[1], 'y');
}

static void test_binary(void **state)
{
	struct kern_tensor out;
	char err[128];
	const int ops[2] = { PPRPC_OP_ADD, PPRPC_OP_MUL };

	(void)state;
	for (int k = 0; k < 2; k++) {
		int op = ops[k];

		assert_int_equal(infer2(op, NULL, T(PPRPC_F32, 6, 4, 3, 2), T(PPRPC_F32, 6, 4, 3, 2),
					&out, err), 0);
		assert_ne(&out, 6, 4, 3, 2);
		assert_int_equal(out.dtype, PPRPC_F32);
		assert_int_equal(infer2(op, NULL, T(PPRPC_F32, 6, 4, 3, 2), T(PPRPC_F16, 3, 1, 3, 1),
					&out, err), 0);
		assert_ne(&out, 6, 4, 3, 2);
		assert_int_equal(infer2(op, NULL, transposed(T(PPRPC_F32, 4, 6, 1, 1)),
					T(PPRPC_BF16, 1, 1, 1, 1), &out, err), 0);
		assert_ne(&out, 6, 4, 1, 1);

		assert_int_equal(infer2(op, NULL, T(PPRPC_F32, 6, 4, 3, 2), T(PPRPC_F32, 6, 3, 3, 2),
					&out, err), PPRPC_ESHAPE);
		assert_string_equal(err, k ? "MUL: src0.ne[1]=4 is not a multiple of src1.ne[1]=3"
					   : "ADD: src0.ne[1]=4 is not a multiple of src1.ne[1]=3");
		/* Broadcast goes one way only: src1 larger than src0 is rejected. */
		assert_int_equal(infer2(op, NULL, T(PPRPC_F32, 3, 1, 1, 1), T(PPRPC_F32, 6, 1, 1, 1),
					&out, err), PPRPC_ESHAPE);
		assert_int_equal(infer2(op, NULL, T(PPRPC_F16, 4, 1, 1, 1), T(PPRPC_F32, 4, 1, 1, 1),
					&out, err), PPRPC_ETYPE);
		assert_int_equal(infer2(op, NULL, T(PPRPC_F32, 4, 1, 1, 1), T(PPRPC_I32, 4, 1, 1, 1),
					&out, err), PPRPC_ETYPE);
		assert_int_equal(infer2(op, NULL, T(PPRPC_F32, 64, 1, 1, 1),
					T(PPRPC_Q8_0, 32, 1, 1, 1), &out, err), PPRPC_ETYPE);
	}
}

static void test_scale(void **state)
{
	struct kern_tensor out;
	struct pprpc_op_params p = { .f = { 2.0f, -1.0f } };
	char err[128];

	(void)state;
	assert_int_equal(infer1(PPRPC_OP_SCALE, &p, transposed(T(PPRPC_F32, 5, 7, 2, 1)), &out,
				err), 0);
	assert_ne(&out, 7, 5, 2, 1);
	assert_int_equal(infer1(PPRPC_OP_SCALE, NULL, T(PPRPC_F32, 5, 1, 1, 1), &out, err), 0);
	assert_int_equal(infer1(PPRPC_OP_SCALE, &p, T(PPRPC_BF16, 5, 1, 1, 1), &out, err),
			 PPRPC_ETYPE);
	assert_string_equal(err, "SCALE: src0 is bf16, must be f32");
}

static void test_cpy(void **state)
{
	struct kern_tensor out;
	struct pprpc_op_params p;
	char err[128];
	const int floats[3] = { PPRPC_F32, PPRPC_F16, PPRPC_BF16 };

	(void)state;
	for (int s = 0; s < 3; s++) {
		for (int d = 0; d < 3; d++) {
			memset(&p, 0, sizeof(p));
			p.i[0] = floats[d];
			assert_int_equal(infer1(PPRPC_OP_CPY, &p,
						transposed(T(floats[s], 3, 5, 2, 1)), &out, err), 0);
			assert_int_equal(out.dtype, floats[d]);
			assert_ne(&out, 5, 3, 2, 1);
		}
	}
	assert_int_equal(infer1(PPRPC_OP_CPY, NULL, T(PPRPC_F16, 3, 1, 1, 1), &out, err), 0);
	assert_int_equal(out.dtype, PPRPC_F32);
	memset(&p, 0, sizeof(p));
	p.i[0] = PPRPC_I32;
	assert_int_equal(infer1(PPRPC_OP_CPY, &p, T(PPRPC_F32, 3, 1, 1, 1), &out, err),
			 PPRPC_ETYPE);
	p.i[0] = PPRPC_DTYPE_COUNT;
	assert_int_equal(infer1(PPRPC_OP_CPY, &p, T(PPRPC_F32, 3, 1, 1, 1), &out, err),
			 PPRPC_EINVAL);
	p.i[0] = -1;
	assert_int_equal(infer1(PPRPC_OP_CPY, &p, T(PPRPC_F32, 3, 1, 1, 1), &out, err),
			 PPRPC_EINVAL);
	p.i[0] = PPRPC_F32;
	assert_int_equal(infer1(PPRPC_OP_CPY, &p, T(PPRPC_I32, 3, 1, 1, 1), &out, err),
			 PPRPC_ETYPE);
	assert_int_equal(infer1(PPRPC_OP_CPY, &p, T(PPRPC_Q8_0, 32, 1, 1, 1), &out, err),
			 PPRPC_ETYPE);
}

static void test_mul_mat(void **state)
{
	struct kern_tensor out, w, x;
	char err[128];

	(void)state;
	assert_int_equal(infer2(PPRPC_OP_MUL_MAT, NULL, T(PPRPC_F16, 33, 17, 2, 1),
				T(PPRPC_F32, 33, 5, 6, 3), &out, err), 0);
	assert_ne(&out, 17, 5, 6, 3);
	assert_int_equal(out.dtype, PPRPC_F32);
	assert_int_equal(infer2(PPRPC_OP_MUL_MAT, NULL, transposed(T(PPRPC_BF16, 8, 4, 1, 1)),
				transposed(T(PPRPC_F32, 2, 4, 1, 1)), &out, err), 0);
	assert_ne(&out, 8, 2, 1, 1);

	assert_int_equal(infer2(PPRPC_OP_MUL_MAT, NULL, T(PPRPC_F32, 64, 8, 1, 1),
				T(PPRPC_F32, 32, 8, 1, 1), &out, err), PPRPC_ESHAPE);
	assert_string_equal(err, "MUL_MAT: src0.ne[0]=64 != src1.ne[0]=32");
	assert_int_equal(infer2(PPRPC_OP_MUL_MAT, NULL, T(PPRPC_F32, 4, 8, 4, 1),
				T(PPRPC_F32, 4, 8, 6, 1), &out, err), PPRPC_ESHAPE);
	assert_string_equal(err, "MUL_MAT: src1.ne[2]=6 is not a multiple of src0.ne[2]=4");
	assert_int_equal(infer2(PPRPC_OP_MUL_MAT, NULL, T(PPRPC_F32, 4, 8, 1, 2),
				T(PPRPC_F32, 4, 8, 1, 3), &out, err), PPRPC_ESHAPE);
	/* Weights never broadcast the other way. */
	assert_int_equal(infer2(PPRPC_OP_MUL_MAT, NULL, T(PPRPC_F32, 4, 8, 2, 1),
				T(PPRPC_F32, 4, 8, 1, 1), &out, err), PPRPC_ESHAPE);
	assert_int_equal(infer2(PPRPC_OP_MUL_MAT, NULL, T(PPRPC_F32, 4, 8, 1, 1),
				T(PPRPC_F16, 4, 8, 1, 1), &out, err), PPRPC_ETYPE);
	assert_string_equal(err, "MUL_MAT: src1 is f16, must be f32");
	assert_int_equal(infer2(PPRPC_OP_MUL_MAT, NULL, T(PPRPC_I32, 4, 8, 1, 1),
				T(PPRPC_F32, 4, 8, 1, 1), &out, err), PPRPC_ETYPE);

	/* Broadcast views make huge shapes cheap to describe: the product
	 * [N, M] must still fit. */
	w = T(PPRPC_F32, 1, 1, 1, 1);
	w.ne[1] = INT64_C(1) << 32;
	w.nb[1] = 0;
	x = w;
	assert_int_equal(kern_tensor_check(&w), 0);
	assert_int_equal(infer2(PPRPC_OP_MUL_MAT, NULL, w, x, &out, err), PPRPC_ETOOBIG);
}

static int check_dst1(int op, const struct pprpc_op_params *p, struct kern_tensor a,
		      struct kern_tensor d, char *err)
{
	const struct kern_tensor *src[1] = { &a };

	return kern_op_check_dst(op, p, src, 1, &d, err, 128);
}

static void test_check_dst(void **state)
{
	struct kern_tensor a = T(PPRPC_F32, 6, 4, 1, 1), b = T(PPRPC_F32, 6, 1, 1, 1), d;
	const struct kern_tensor *src[2] = { &a, &b };
	struct pprpc_op_params p = { .i = { PPRPC_F16 } };
	char err[128];

	(void)state;
	d = T(PPRPC_F32, 6, 4, 1, 1);
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ADD, NULL, src, 2, &d, err, sizeof(err)), 0);
	/* In place is a matter of data pointers, not descriptors. */
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ADD, NULL, src, 2, &a, err, sizeof(err)), 0);
	d = T(PPRPC_F32, 6, 2, 2, 1);
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ADD, NULL, src, 2, &d, err, sizeof(err)),
			 PPRPC_ESHAPE);
	assert_string_equal(err, "ADD: dst.ne[1]=2, expected 4");
	d = T(PPRPC_F16, 6, 4, 1, 1);
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ADD, NULL, src, 2, &d, err, sizeof(err)),
			 PPRPC_ETYPE);
	assert_string_equal(err, "ADD: dst is f16, expected f32");
	d = transposed(T(PPRPC_F32, 4, 6, 1, 1));
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ADD, NULL, src, 2, &d, err, sizeof(err)),
			 PPRPC_ESHAPE);
	assert_string_equal(err, "ADD: dst must be contiguous");
	d = T(PPRPC_F32, 6, 4, 1, 1);
	d.nb[1] = 3;
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ADD, NULL, src, 2, &d, err, sizeof(err)),
			 PPRPC_EINVAL);
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ADD, NULL, src, 2, NULL, err, sizeof(err)),
			 PPRPC_EINVAL);
	/* A failing source is reported before the destination is looked at. */
	b = T(PPRPC_F32, 5, 1, 1, 1);
	assert_int_equal(kern_op_check_dst(PPRPC_OP_ADD, NULL, src, 2, NULL, err, sizeof(err)),
			 PPRPC_ESHAPE);

	/* CPY: any view of the right dtype and element count. */
	assert_int_equal(check_dst1(PPRPC_OP_CPY, &p, a, T(PPRPC_F16, 6, 4, 1, 1), err), 0);
	assert_int_equal(check_dst1(PPRPC_OP_CPY, &p, a, T(PPRPC_F16, 24, 1, 1, 1), err), 0);
	assert_int_equal(check_dst1(PPRPC_OP_CPY, &p, a, T(PPRPC_F16, 2, 3, 2, 2), err), 0);
	assert_int_equal(check_dst1(PPRPC_OP_CPY, &p, a,
				    transposed(T(PPRPC_F16, 8, 3, 1, 1)), err), 0);
	assert_int_equal(check_dst1(PPRPC_OP_CPY, &p, a, T(PPRPC_F16, 25, 1, 1, 1), err),
			 PPRPC_ESHAPE);
	assert_string_equal(err, "CPY: dst has 25 elements, src0 has 24");
	assert_int_equal(check_dst1(PPRPC_OP_CPY, &p, a, T(PPRPC_F32, 6, 4, 1, 1), err),
			 PPRPC_ETYPE);

	/* Other single-source ops still need a contiguous dst. */
	assert_int_equal(check_dst1(PPRPC_OP_SCALE, NULL, a,
				    transposed(T(PPRPC_F32, 4, 6, 1, 1)), err), PPRPC_ESHAPE);
	assert_int_equal(check_dst1(PPRPC_OP_SCALE, NULL, a, T(PPRPC_F32, 6, 4, 1, 1), err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_generic_rejects),
		cmocka_unit_test(test_binary),
		cmocka_unit_test(test_scale),
		cmocka_unit_test(test_cpy),
		cmocka_unit_test(test_mul_mat),
		cmocka_unit_test(test_check_dst),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
