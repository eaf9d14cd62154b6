/* libclient/tensor.c — tensor value helpers. */
#include <string.h>

#include "kernels/tensor.h"
#include "pprpc.h"

PPRPC_API pprpc_tensor pprpc_tensor_make(pprpc_buffer buf, uint64_t offset, int dtype, int64_t ne0,
					 int64_t ne1, int64_t ne2, int64_t ne3)
{
	pprpc_tensor t;
	struct kern_tensor k;
	const int64_t ne[4] = { ne0, ne1, ne2, ne3 };

	memset(&t, 0, sizeof(t));
	t.dtype = dtype;
	memcpy(t.ne, ne, sizeof(ne));
	if (kern_tensor_init_contig(&k, dtype, ne) == 0)
		memcpy(t.nb, k.nb, sizeof(t.nb));
	t.buffer = buf;
	t.offset = offset;
	return t;
}

PPRPC_API uint64_t pprpc_tensor_nbytes(const pprpc_tensor *t)
{
	struct kern_tensor k;
	uint64_t n = 0;

	k.dtype = t->dtype;
	memcpy(k.ne, t->ne, sizeof(k.ne));
	memcpy(k.nb, t->nb, sizeof(k.nb));
	k.data = NULL;
	if (kern_tensor_check(&k) < 0 || kern_tensor_extent(&k, &n) < 0)
		return 0;
	return n;
}

PPRPC_API uint64_t pprpc_type_nbytes(int dtype, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
	pprpc_buffer none = { 0 };
	pprpc_tensor t = pprpc_tensor_make(none, 0, dtype, ne0, ne1, ne2, ne3);

	return pprpc_tensor_nbytes(&t);
}

PPRPC_API pprpc_tensor pprpc_tensor_permute2(pprpc_tensor t, int a, int b)
{
	if (a >= 0 && a < PPRPC_MAX_DIMS && b >= 0 && b < PPRPC_MAX_DIMS) {
		int64_t ne = t.ne[a];
		uint64_t nb = t.nb[a];

		t.ne[a] = t.ne[b];
		t.nb[a] = t.nb[b];
		t.ne[b] = ne;
		t.nb[b] = nb;
	}
	return t;
}
