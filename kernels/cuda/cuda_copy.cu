/*
 * kernels/cuda/cuda_copy.cu — CPY (convert, both sides visited in logical
 * order with their own shapes and strides) and CONCAT.
 *
 * One thread per element.  Same-dtype moves copy bits, so NaN payloads
 * survive as in the CPU build; conversions use the same integer rounding
 * code (cuda_impl.cuh).
 */
#include "kernels/cuda/cuda_impl.cuh"

__global__ void k_cpy(kcu_t s, int sdt, kcu_t d, int ddt, int64_t n, bool small)
{
	KCU_FOR(l, n) {
		int64_t i[4], o[4];
		const char *sp;
		char *dp;

		kcu_unravel(s.ne, l, i, small);
		kcu_unravel(d.ne, l, o, small);
		sp = kcu_at(s, i[0], i[1], i[2], i[3]);
		dp = kcu_at(d, o[0], o[1], o[2], o[3]);
		if (sdt == ddt) {
			if (sdt == PPRPC_F32)
				*(uint32_t *)dp = *(const uint32_t *)sp;
			else
				*(uint16_t *)dp = *(const uint16_t *)sp;
		} else {
			kcu_store(dp, ddt, kcu_load(sp, sdt));
		}
	}
}

/* dst contiguous; esz 2 or 4. */
__global__ void k_concat(kcu_t a, kcu_t b, kcu_t d, int dim, int esz, int64_t n, bool small)
{
	KCU_FOR(l, n) {
		int64_t i[4];
		const char *sp;

		kcu_unravel(d.ne, l, i, small);
		if (i[dim] < a.ne[dim]) {
			sp = kcu_at(a, i[0], i[1], i[2], i[3]);
		} else {
			i[dim] -= a.ne[dim];
			sp = kcu_at(b, i[0], i[1], i[2], i[3]);
		}
		if (esz == 4)
			((uint32_t *)d.data)[l] = *(const uint32_t *)sp;
		else
			((uint16_t *)d.data)[l] = *(const uint16_t *)sp;
	}
}

KCU_DECL(cpy)
{
	int64_t n = kern_tensor_nelements(src[0]);

	(void)p;
	k_cpy<<<kcu_blocks(n, KCU_THREADS), KCU_THREADS, 0, kcu_stream(ctx)>>>(
		kcu_view(src[0]), src[0]->dtype, kcu_view(dst), dst->dtype, n, kcu_small(n));
	return kcu_launched("CPY", err, errlen);
}

KCU_DECL(concat)
{
	int64_t n = kern_tensor_nelements(dst);

	k_concat<<<kcu_blocks(n, KCU_THREADS), KCU_THREADS, 0, kcu_stream(ctx)>>>(
		kcu_view(src[0]), kcu_view(src[1]), kcu_view(dst), p ? p->i[0] : 0,
		kcu_esize(dst->dtype), n, kcu_small(n));
	return kcu_launched("CONCAT", err, errlen);
}

int kcu_copy_preload(char *err, size_t errlen)
{
	int rc = kcu_touch(k_cpy, "CPY", err, errlen);

	return rc ? rc : kcu_touch(k_concat, "CONCAT", err, errlen);
}
