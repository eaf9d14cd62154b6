/*
 * kernels/cuda/cuda_binary.cu — ADD, MUL (src1 repeated modulo its shape
 * along every dimension) and SCALE (x * f[0] + f[1]).
 *
 * One thread per destination element in logical order (dst is contiguous).
 * Each element is read before its own slot is written by the same thread,
 * so in place on the same bytes is safe.  Arithmetic uses the _rn
 * intrinsics so nothing is contracted into an FMA: SCALE rounds the
 * product and the sum separately, as the CPU build does.
 */
#include "kernels/cuda/cuda_impl.cuh"

enum { B_ADD, B_MUL, B_SCALE };

template <int OP>
__global__ void k_binary(kcu_t a, kcu_t b, int bdt, float s, float c, float *d, int64_t n,
			 bool small)
{
	KCU_FOR(l, n) {
		int64_t i[4];
		float x, y;

		kcu_unravel(a.ne, l, i, small);
		x = *(const float *)kcu_at(a, i[0], i[1], i[2], i[3]);
		if constexpr (OP == B_SCALE) {
			d[l] = __fadd_rn(__fmul_rn(x, s), c);
		} else {
			for (int k = 0; k < 4; k++)
				i[k] = b.ne[k] == 1 ? 0 : b.ne[k] == a.ne[k] ? i[k] : i[k] % b.ne[k];
			y = kcu_load(kcu_at(b, i[0], i[1], i[2], i[3]), bdt);
			d[l] = OP == B_MUL ? __fmul_rn(x, y) : __fadd_rn(x, y);
		}
	}
}

template <int OP>
static int run(const struct kern_cuda_ctx *ctx, const struct pprpc_op_params *p,
	       struct kern_tensor *const *src, struct kern_tensor *dst, const char *name,
	       char *err, size_t errlen)
{
	int64_t n = kern_tensor_nelements(src[0]);
	kcu_t b = OP == B_SCALE ? kcu_view(src[0]) : kcu_view(src[1]);
	int bdt = OP == B_SCALE ? PPRPC_F32 : src[1]->dtype;

	k_binary<OP><<<kcu_blocks(n, KCU_THREADS), KCU_THREADS, 0, kcu_stream(ctx)>>>(
		kcu_view(src[0]), b, bdt, p ? p->f[0] : 0.0f, p ? p->f[1] : 0.0f,
		(float *)dst->data, n, kcu_small(n));
	return kcu_launched(name, err, errlen);
}

KCU_DECL(add)
{
	return run<B_ADD>(ctx, p, src, dst, "ADD", err, errlen);
}

KCU_DECL(mul)
{
	return run<B_MUL>(ctx, p, src, dst, "MUL", err, errlen);
}

KCU_DECL(scale)
{
	return run<B_SCALE>(ctx, p, src, dst, "SCALE", err, errlen);
}

int kcu_binary_preload(char *err, size_t errlen)
{
	int rc = kcu_touch(k_binary<B_ADD>, "ADD", err, errlen);

	if (!rc)
		rc = kcu_touch(k_binary<B_MUL>, "MUL", err, errlen);
	if (!rc)
		rc = kcu_touch(k_binary<B_SCALE>, "SCALE", err, errlen);
	return rc;
}
