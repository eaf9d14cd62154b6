/*
 * tests/unit/test_kernels_tensor.c — descriptor checks, extent, contiguity,
 * region arithmetic at the edges of uint64, and the f16/bf16 conversions.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/tensor.h"

static float bits_f(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}

static uint32_t f_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return u;
}

static void make(struct kern_tensor *t, int dtype, int64_t a, int64_t b, int64_t c, int64_t d,
		 uint64_t n0, uint64_t n1, uint64_t n2, uint64_t n3)
{
	*t = (struct kern_tensor){ .dtype = dtype, .ne = { a, b, c, d }, .nb = { n0, n1, n2, n3 } };
}

static void test_dtype_table(void **state)
{
	(void)state;
	assert_int_equal(kern_dtype(PPRPC_F32)->type_size, 4);
	assert_int_equal(kern_dtype(PPRPC_F16)->type_size, 2);
	assert_int_equal(kern_dtype(PPRPC_BF16)->type_size, 2);
	assert_int_equal(kern_dtype(PPRPC_I32)->type_size, 4);
	assert_int_equal(kern_dtype(PPRPC_Q8_0)->blck, 32);
	assert_int_equal(kern_dtype(PPRPC_Q8_0)->type_size, 34);
	assert_string_equal(kern_dtype(PPRPC_BF16)->name, "bf16");
	assert_null(kern_dtype(-1));
	assert_null(kern_dtype(PPRPC_DTYPE_COUNT));
}

static void test_init_contig(void **state)
{
	struct kern_tensor t;
	const int64_t ne[4] = { 5, 3, 2, 7 };
	const int64_t q8[4] = { 64, 3, 1, 1 };
	const int64_t q8bad[4] = { 33, 1, 1, 1 };
	const int64_t zero[4] = { 5, 0, 1, 1 };
	const int64_t neg[4] = { 5, 1, -1, 1 };
	const int64_t nprod[4] = { INT64_C(1) << 32, INT64_C(1) << 32, 1, 1 };
	const int64_t nbytes[4] = { INT64_C(1) << 62, 1, 1, 1 };
	uint64_t ext;

	(void)state;
	assert_int_equal(kern_tensor_init_contig(&t, PPRPC_F32, ne), 0);
	assert_int_equal(t.nb[0], 4);
	assert_int_equal(t.nb[1], 20);
	assert_int_equal(t.nb[2], 60);
	assert_int_equal(t.nb[3], 120);
	assert_null(t.data);
	assert_int_equal(kern_tensor_nelements(&t), 210);
	assert_int_equal(kern_tensor_extent(&t, &ext), 0);
	assert_int_equal(ext, 840);
	assert_true(kern_tensor_is_contiguous(&t));

	assert_int_equal(kern_tensor_init_contig(&t, PPRPC_Q8_0, q8), 0);
	assert_int_equal(t.nb[0], 34);
	assert_int_equal(t.nb[1], 68);
	assert_int_equal(kern_tensor_extent(&t, &ext), 0);
	assert_int_equal(ext, 68 * 3);

	/* Failures leave the output untouched. */
	memset(&t, 0xab, sizeof(t));
	assert_int_equal(kern_tensor_init_contig(&t, PPRPC_Q8_0, q8bad), PPRPC_EINVAL);
	assert_int_equal(kern_tensor_init_contig(&t, PPRPC_F32, zero), PPRPC_EINVAL);
	assert_int_equal(kern_tensor_init_contig(&t, PPRPC_F32, neg), PPRPC_EINVAL);
	assert_int_equal(kern_tensor_init_contig(&t, 7, ne), PPRPC_EINVAL);
	assert_int_equal(kern_tensor_init_contig(&t, PPRPC_F32, nprod), PPRPC_ETOOBIG);
	assert_int_equal(kern_tensor_init_contig(&t, PPRPC_F32, nbytes), PPRPC_ETOOBIG);
	assert_int_equal(t.dtype, (int32_t)0xabababab);
	assert_int_equal(kern_tensor_init_contig(NULL, PPRPC_F32, ne), PPRPC_EINVAL);
}

static void test_check(void **state)
{
	struct kern_tensor t;

	(void)state;
	make(&t, PPRPC_F32, 4, 3, 1, 1, 4, 16, 48, 48);
	assert_int_equal(kern_tensor_check(&t), 0);
	/* Broadcast view: zero strides are multiples too. */
	make(&t, PPRPC_F32, 4, 3, 2, 1, 0, 0, 0, 0);
	assert_int_equal(kern_tensor_check(&t), 0);
	make(&t, PPRPC_F16, 4, 3, 1, 1, 2, 10, 30, 30);
	assert_int_equal(kern_tensor_check(&t), 0);

	make(&t, -1, 4, 1, 1, 1, 4, 16, 16, 16);
	assert_int_equal(kern_tensor_check(&t), PPRPC_EINVAL);
	make(&t, PPRPC_DTYPE_COUNT, 4, 1, 1, 1, 4, 16, 16, 16);
	assert_int_equal(kern_tensor_check(&t), PPRPC_EINVAL);
	make(&t, PPRPC_F32, 4, 0, 1, 1, 4, 16, 16, 16);
	assert_int_equal(kern_tensor_check(&t), PPRPC_EINVAL);
	make(&t, PPRPC_F32, 4, 1, 1, INT64_MIN, 4, 16, 16, 16);
	assert_int_equal(kern_tensor_check(&t), PPRPC_EINVAL);
	make(&t, PPRPC_F32, 4, 1, 1, 1, 3, 12, 12, 12);
	assert_int_equal(kern_tensor_check(&t), PPRPC_EINVAL);
	make(&t, PPRPC_F32, 4, 2, 1, 1, 4, 18, 36, 36);
	assert_int_equal(kern_tensor_check(&t), PPRPC_EINVAL);
	make(&t, PPRPC_F16, 4, 2, 1, 1, 2, 8, 17, 16);
	assert_int_equal(kern_tensor_check(&t), PPRPC_EINVAL);

	/* Block types: blocks packed along ne[0], other strides in blocks. */
	make(&t, PPRPC_Q8_0, 64, 2, 1, 1, 34, 68, 136, 136);
	assert_int_equal(kern_tensor_check(&t), 0);
	make(&t, PPRPC_Q8_0, 64, 2, 1, 1, 68, 136, 272, 272);
	assert_int_equal(kern_tensor_check(&t), PPRPC_EINVAL);
	make(&t, PPRPC_Q8_0, 64, 2, 1, 1, 34, 70, 140, 140);
	assert_int_equal(kern_tensor_check(&t), PPRPC_EINVAL);
	make(&t, PPRPC_Q8_0, 48, 1, 1, 1, 34, 68, 68, 68);
	assert_int_equal(kern_tensor_check(&t), PPRPC_EINVAL);

	/* Element count overflows int64. */
	make(&t, PPRPC_F32, INT64_C(1) << 40, INT64_C(1) << 30, 1, 1, 0, 0, 0, 0);
	assert_int_equal(kern_tensor_check(&t), PPRPC_ETOOBIG);
	/* Extent overflows uint64 through one stride product ... */
	make(&t, PPRPC_F32, 1, 1, 1, 3, 4, 4, 4, UINT64_C(1) << 63);
	assert_int_equal(kern_tensor_check(&t), PPRPC_ETOOBIG);
	/* ... through the sum of products ... */
	make(&t, PPRPC_F32, 1, 2, 2, 1, 4, UINT64_C(1) << 63, UINT64_C(1) << 63, 4);
	assert_int_equal(kern_tensor_check(&t), PPRPC_ETOOBIG);
	/* ... and through the final element. */
	make(&t, PPRPC_F32, 1, 2, 1, 1, 4, UINT64_MAX - 3, 4, 4);
	assert_int_equal(kern_tensor_check(&t), PPRPC_ETOOBIG);
	make(&t, PPRPC_F32, 1, 2, 1, 1, 4, UINT64_MAX - 7, 4, 4);
	assert_int_equal(kern_tensor_check(&t), 0);
	assert_int_equal(kern_tensor_check(NULL), PPRPC_EINVAL);
}

static void test_extent(void **state)
{
	struct kern_tensor t;
	uint64_t ext = 0;

	(void)state;
	/* Transposed 3x5 f32: last element at 4*4 + 2*20. */
	make(&t, PPRPC_F32, 3, 5, 1, 1, 20, 4, 60, 60);
	assert_int_equal(kern_tensor_extent(&t, &ext), 0);
	assert_int_equal(ext, 4 * 4 + 2 * 20 + 4);
	make(&t, PPRPC_F16, 7, 9, 2, 3, 0, 0, 0, 0);
	assert_int_equal(kern_tensor_extent(&t, &ext), 0);
	assert_int_equal(ext, 2);
	/* Padded rows: 5 used of 8 per row. */
	make(&t, PPRPC_F32, 5, 4, 1, 1, 4, 32, 128, 128);
	assert_int_equal(kern_tensor_extent(&t, &ext), 0);
	assert_int_equal(ext, 3 * 32 + 5 * 4);
	make(&t, PPRPC_Q8_0, 96, 2, 1, 1, 34, 102, 204, 204);
	assert_int_equal(kern_tensor_extent(&t, &ext), 0);
	assert_int_equal(ext, 2 * 34 + 102 + 34);
	ext = 123;
	make(&t, PPRPC_F32, 2, 1, 1, 1, UINT64_MAX, 4, 4, 4);
	assert_int_equal(kern_tensor_extent(&t, &ext), PPRPC_ETOOBIG);
	assert_int_equal(ext, 123);
}

static void test_contiguous(void **state)
{
	struct kern_tensor t;

	(void)state;
	make(&t, PPRPC_F32, 3, 5, 1, 1, 4, 12, 60, 60);
	assert_true(kern_tensor_is_contiguous(&t));
	make(&t, PPRPC_F32, 3, 5, 1, 1, 20, 4, 60, 60);
	assert_false(kern_tensor_is_contiguous(&t));
	make(&t, PPRPC_F32, 3, 5, 1, 1, 4, 16, 80, 80);
	assert_false(kern_tensor_is_contiguous(&t));
	make(&t, PPRPC_F32, 3, 5, 1, 1, 0, 12, 60, 60);
	assert_false(kern_tensor_is_contiguous(&t));
	/* Dimensions of extent 1 are never stepped along: stride irrelevant. */
	make(&t, PPRPC_F32, 3, 1, 5, 1, 4, 999 * 4, 12, 7 * 4);
	assert_true(kern_tensor_is_contiguous(&t));
	make(&t, PPRPC_F32, 1, 1, 1, 1, 0, 0, 0, 0);
	assert_true(kern_tensor_is_contiguous(&t));
	make(&t, PPRPC_Q8_0, 64, 2, 1, 1, 34, 68, 136, 136);
	assert_true(kern_tensor_is_contiguous(&t));
	make(&t, 9, 1, 1, 1, 1, 4, 4, 4, 4);
	assert_false(kern_tensor_is_contiguous(&t));
}

/* The overlap rule both graph validators share. */
static void test_overlap_rule(void **state)
{
	(void)state;
	assert_true(kern_ranges_overlap(0, 16, 8, 16));
	assert_true(kern_ranges_overlap(8, 16, 0, 16));
	assert_true(kern_ranges_overlap(0, 16, 0, 16));
	assert_false(kern_ranges_overlap(0, 16, 16, 16));
	assert_false(kern_ranges_overlap(16, 16, 0, 16));
	/* an empty range inside another counts (the native engine's view) */
	assert_true(kern_ranges_overlap(0, 16, 4, 0));
	/* only the exact memory, the same layout, an op that runs in place */
	assert_true(kern_overlap_allowed(true, true, true));
	assert_false(kern_overlap_allowed(false, true, true));
	assert_false(kern_overlap_allowed(true, false, true));
	assert_false(kern_overlap_allowed(true, true, false));
}

static void test_region(void **state)
{
	(void)state;
	assert_true(kern_region_ok(100, 0, 100));
	assert_true(kern_region_ok(100, 100, 0));
	assert_true(kern_region_ok(100, 99, 1));
	assert_false(kern_region_ok(100, 99, 2));
	assert_false(kern_region_ok(100, 101, 0));
	assert_false(kern_region_ok(0, 0, 1));
	assert_true(kern_region_ok(0, 0, 0));
	/* offset + size would wrap to a small number. */
	assert_false(kern_region_ok(100, UINT64_MAX, 2));
	assert_false(kern_region_ok(100, 2, UINT64_MAX));
	assert_false(kern_region_ok(UINT64_MAX - 1, UINT64_MAX - 2, 2));
	assert_true(kern_region_ok(UINT64_MAX, UINT64_MAX - 1, 1));
	assert_false(kern_region_ok(UINT64_MAX, UINT64_MAX - 1, 2));
	assert_true(kern_region_ok(UINT64_MAX, 0, UINT64_MAX));
	assert_true(kern_region_ok(UINT64_MAX, UINT64_MAX, 0));
}

static void test_f16_encode(void **state)
{
	const float u = ldexpf(1.0f, -24);  /* smallest f16 subnormal */

	(void)state;
	assert_int_equal(kern_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(kern_f32_to_f16(-2.0f), 0xc000);
	assert_int_equal(kern_f32_to_f16(0.0f), 0x0000);
	assert_int_equal(kern_f32_to_f16(-0.0f), 0x8000);
	assert_int_equal(kern_f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(kern_f32_to_f16(65519.996f), 0x7bff);
	/* Halfway between the largest finite and 2^16: ties to even = inf. */
	assert_int_equal(kern_f32_to_f16(65520.0f), 0x7c00);
	assert_int_equal(kern_f32_to_f16(1e10f), 0x7c00);
	assert_int_equal(kern_f32_to_f16(-FLT_MAX), 0xfc00);
	assert_int_equal(kern_f32_to_f16(INFINITY), 0x7c00);
	assert_int_equal(kern_f32_to_f16(-INFINITY), 0xfc00);
	/* Normal ties: 1 + half ulp rounds to 1 (even), 1 + 3 half ulps up. */
	assert_int_equal(kern_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
	assert_int_equal(kern_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
	assert_int_equal(kern_f32_to_f16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)), 0x3c01);
	assert_int_equal(kern_f32_to_f16(1.0f + ldexpf(1.0f, -11) - ldexpf(1.0f, -20)), 0x3c00);
	/* Subnormals and their ties. */
	assert_int_equal(kern_f32_to_f16(u), 0x0001);
	assert_int_equal(kern_f32_to_f16(-u), 0x8001);
	assert_int_equal(kern_f32_to_f16(0.5f * u), 0x0000);
	assert_int_equal(kern_f32_to_f16(0.5f * u * 1.0000001f), 0x0001);
	assert_int_equal(kern_f32_to_f16(1.5f * u), 0x0002);
	assert_int_equal(kern_f32_to_f16(2.5f * u), 0x0002);
	assert_int_equal(kern_f32_to_f16(1023.0f * u), 0x03ff);
	/* Largest subnormal + half ulp ties to even: the smallest normal. */
	assert_int_equal(kern_f32_to_f16(1023.5f * u), 0x0400);
	assert_int_equal(kern_f32_to_f16(ldexpf(1.0f, -14)), 0x0400);
	assert_int_equal(kern_f32_to_f16(ldexpf(1.0f, -30)), 0x0000);
	assert_int_equal(kern_f32_to_f16(FLT_TRUE_MIN), 0x0000);
	assert_int_equal(kern_f32_to_f16(-FLT_TRUE_MIN), 0x8000);
	/* NaN stays NaN (quiet), sign kept; a low-payload NaN is not inf. */
	assert_int_equal(kern_f32_to_f16(bits_f(0x7fc00000)) & 0x7e00, 0x7e00);
	assert_int_equal(kern_f32_to_f16(bits_f(0x7f800001)) & 0x7fff, 0x7e00);
	assert_int_equal(kern_f32_to_f16(bits_f(0xffc00000)), 0xfe00);
}

static void test_f16_decode(void **state)
{
	(void)state;
	assert_true(kern_f16_to_f32(0x3c00) == 1.0f);
	assert_true(kern_f16_to_f32(0x7bff) == 65504.0f);
	assert_true(kern_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
	assert_true(kern_f16_to_f32(0x03ff) == 1023.0f * ldexpf(1.0f, -24));
	assert_true(kern_f16_to_f32(0x0400) == ldexpf(1.0f, -14));
	assert_true(kern_f16_to_f32(0x8000) == 0.0f && signbit(kern_f16_to_f32(0x8000)));
	assert_true(isinf(kern_f16_to_f32(0x7c00)) && kern_f16_to_f32(0x7c00) > 0);
	assert_true(isinf(kern_f16_to_f32(0xfc00)) && kern_f16_to_f32(0xfc00) < 0);
	assert_true(isnan(kern_f16_to_f32(0x7e00)));
	assert_true(isnan(kern_f16_to_f32(0x7c01)));
	assert_int_equal(f_bits(kern_f16_to_f32(0x7e01)), 0x7fc02000);
}

/* Every f16 survives decode + encode bit for bit (NaNs: stay NaN). */
static void test_f16_roundtrip_all(void **state)
{
	(void)state;
	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = kern_f16_to_f32((uint16_t)h);
		uint16_t back = kern_f32_to_f16(f);

		if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
			assert_true(isnan(f));
			assert_int_equal(back & 0x7e00, 0x7e00);
			assert_int_equal(back & 0x8000, h & 0x8000);
		} else {
			assert_int_equal(back, h);
		}
	}
}

#ifdef __FLT16_MAX__
/* Cross-check the encoder against the compiler's own RNE conversion over
 * values spread across every f32 exponent, and every tie and near-tie. */
static void test_f16_vs_compiler(void **state)
{
	uint64_t s = 12345;

	(void)state;
	for (int i = 0; i < 2000000; i++) {
		uint32_t x;
		_Float16 h;
		uint16_t hb;

		s = s * 6364136223846793005ull + 1442695040888963407ull;
		x = (uint32_t)(s >> 32);
		/* Bias toward the f16 range and toward exact ties. */
		if (i & 1)
			x = (x & 0x80000000u) | (0x33000000u + (x % 0x14800000u));
		if (i & 2)
			x = (x & ~0xfffu) | 0x1000u;
		if (isnan(bits_f(x)))
			continue;
		h = (_Float16)bits_f(x);
		memcpy(&hb, &h, 2);
		if (kern_f32_to_f16(bits_f(x)) != hb)
			fail_msg("f32 %08x: got %04x, compiler %04x", x,
				 kern_f32_to_f16(bits_f(x)), hb);
	}
}
#endif

static void test_bf16(void **state)
{
	(void)state;
	assert_int_equal(kern_f32_to_bf16(1.0f), 0x3f80);
	assert_int_equal(kern_f32_to_bf16(-0.0f), 0x8000);
	/* Ties to even, both directions, and just above a tie. */
	assert_int_equal(kern_f32_to_bf16(bits_f(0x3f808000)), 0x3f80);
	assert_int_equal(kern_f32_to_bf16(bits_f(0x3f818000)), 0x3f82);
	assert_int_equal(kern_f32_to_bf16(bits_f(0x3f808001)), 0x3f81);
	assert_int_equal(kern_f32_to_bf16(bits_f(0x3f807fff)), 0x3f80);
	assert_int_equal(kern_f32_to_bf16(INFINITY), 0x7f80);
	assert_int_equal(kern_f32_to_bf16(-INFINITY), 0xff80);
	/* FLT_MAX is above the last bf16 + half ulp: rounds to inf. */
	assert_int_equal(kern_f32_to_bf16(FLT_MAX), 0x7f80);
	assert_int_equal(kern_f32_to_bf16(FLT_TRUE_MIN), 0x0000);
	assert_int_equal(kern_f32_to_bf16(bits_f(0x00018000)), 0x0002);
	/* NaNs whose payload sits only in the dropped bits must not become inf. */
	assert_true(isnan(kern_bf16_to_f32(kern_f32_to_bf16(bits_f(0x7f800001)))));
	assert_true(isnan(kern_bf16_to_f32(kern_f32_to_bf16(bits_f(0xff80ffff)))));
	assert_int_equal(kern_f32_to_bf16(bits_f(0xffc00000)), 0xffc0);
	assert_int_equal(f_bits(kern_bf16_to_f32(0x3f81)), 0x3f810000);

	for (uint32_t h = 0; h < 0x10000; h++) {
		float f = kern_bf16_to_f32((uint16_t)h);

		if (isnan(f))
			assert_true(isnan(kern_bf16_to_f32(kern_f32_to_bf16(f))));
		else
			assert_int_equal(kern_f32_to_bf16(f), h);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dtype_table),
		cmocka_unit_test(test_init_contig),
		cmocka_unit_test(test_check),
		cmocka_unit_test(test_extent),
		cmocka_unit_test(test_contiguous),
		cmocka_unit_test(test_region),
		cmocka_unit_test(test_f16_encode),
		cmocka_unit_test(test_f16_decode),
		cmocka_unit_test(test_f16_roundtrip_all),
#ifdef __FLT16_MAX__
		cmocka_unit_test(test_f16_vs_compiler),
#endif
		cmocka_unit_test(test_bf16),
		cmocka_unit_test(test_overlap_rule),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
