/*
 * kernels/cuda/cuda_rope.cu — ROPE (semantics: ops.h): one thread per
 * rotated pair, or per copied element past n_dims.
 *
 * As in cpu_rope.c, theta = pos * freq_scale * freq_base^(-2i/n_dims), its
 * sine and cosine and the rotation itself are evaluated in double, and each
 * output is rounded once to f32; the products are kept apart (_rn
 * intrinsics) so no FMA changes the double result.  In place is safe: a
 * thread reads both elements of its pair before writing either, and no
 * other thread touches them.
 */
#include "kernels/cuda/cuda_impl.cuh"

__global__ void k_rope(kcu_t x, kcu_t pos, float *d, bool neox, int half, double base,
		       double fscale, int n_dims, int64_t n)
{
	const int64_t hd = x.ne[0], nh = x.ne[1], per_row = hd - half;

	KCU_FOR(l, n) {
		int64_t item = l % per_row, row = l / per_row;
		int64_t i1 = row % nh, i2 = row / nh;
		const char *xr = kcu_at(x, 0, i1, i2, 0);
		float *dr = d + row * hd;

		if (item >= half) {
			int64_t e = 2 * (int64_t)half + (item - half);

			dr[e] = *(const float *)(xr + e * x.nb[0]);
			continue;
		}
		int64_t e0 = neox ? item : 2 * item, e1 = e0 + (neox ? half : 1);
		int32_t p = *(const int32_t *)(pos.data + i2 * pos.nb[0]);
		double inv_freq = pow(base, -2.0 * (double)item / (double)n_dims);
		double th = __dmul_rn(__dmul_rn((double)p, fscale), inv_freq);
		double c = cos(th), s = sin(th);
		double a = *(const float *)(xr + e0 * x.nb[0]);
		double b = *(const float *)(xr + e1 * x.nb[0]);

		dr[e0] = (float)__dsub_rn(__dmul_rn(a, c), __dmul_rn(b, s));
		dr[e1] = (float)__dadd_rn(__dmul_rn(a, s), __dmul_rn(b, c));
	}
}

KCU_DECL(rope)
{
	const struct kern_tensor *x = src[0];
	int half = p->i[1] / 2;
	int64_t n = x->ne[1] * x->ne[2] * (x->ne[0] - half);

	k_rope<<<kcu_blocks(n, KCU_THREADS), KCU_THREADS, 0, kcu_stream(ctx)>>>(
		kcu_view(x), kcu_view(src[1]), (float *)dst->data, p->i[0] == PPRPC_ROPE_NEOX, half,
		(double)p->f[0], (double)p->f[1], p->i[1], n);
	return kcu_launched("ROPE", err, errlen);
}

int kcu_rope_preload(char *err, size_t errlen)
{
	return kcu_touch(k_rope, "ROPE", err, errlen);
}
