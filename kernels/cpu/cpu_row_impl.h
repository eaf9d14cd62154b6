/*
 * kernels/cpu/cpu_row_impl.h — row addressing shared by the row-wise CPU
 * kernels (ops-a): a row is one ne[0] run, rows are numbered in (i1, i2, i3)
 * order.
 */
#ifndef PPRPC_KERNELS_CPU_ROW_IMPL_H
#define PPRPC_KERNELS_CPU_ROW_IMPL_H

#include "kernels/cpu/cpu_impl.h"

static inline int64_t cpu_nrows(const struct kern_tensor *t)
{
	return t->ne[1] * t->ne[2] * t->ne[3];
}

/* Split row number r of t into (i1, i2, i3). */
static inline void cpu_row_index(const struct kern_tensor *t, int64_t r, int64_t i[3])
{
	i[0] = r % t->ne[1];
	i[1] = (r / t->ne[1]) % t->ne[2];
	i[2] = r / (t->ne[1] * t->ne[2]);
}

/* First byte of row (i1, i2, i3) of t. */
static inline char *cpu_row_at(const struct kern_tensor *t, int64_t i1, int64_t i2, int64_t i3)
{
	return (char *)t->data + (uint64_t)i1 * t->nb[1] + (uint64_t)i2 * t->nb[2] +
	       (uint64_t)i3 * t->nb[3];
}

static inline char *cpu_row(const struct kern_tensor *t, int64_t r)
{
	int64_t i[3];

	cpu_row_index(t, r, i);
	return cpu_row_at(t, i[0], i[1], i[2]);
}

/* Load n f32 elements of stride nb into the packed row d (d may be the
 * source itself when nb == 4: nothing moves). */
static inline void cpu_load_f32(float *d, const char *s, uint64_t nb, int64_t n)
{
	if (nb == sizeof(float)) {
		if ((const char *)d != s)
			for (int64_t i = 0; i < n; i++)
				d[i] = ((const float *)s)[i];
		return;
	}
	for (int64_t i = 0; i < n; i++)
		d[i] = *(const float *)(s + (uint64_t)i * nb);
}

#endif
