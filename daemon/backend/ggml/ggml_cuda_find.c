/*
 * daemon/backend/ggml/ggml_cuda_find.c — the CUDA device of pprpcd's own
 * runtime behind a ggml-cuda device (ggml_cuda_find.h).
 */
#include "daemon/backend/ggml/ggml_cuda_find.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "pprpc/types.h"

#ifdef PPRPC_HAVE_CUDA

#include <cuda_runtime_api.h>

int gge_cuda_find(const char *pci, int *ret_ordinal, char *why, size_t whylen)
{
	size_t len;
	int n = 0;

	if (!pci || !*pci) {
		snprintf(why, whylen, "ggml names no PCI bus id for the device");
		return PPRPC_EUNSUPP;
	}
	/* ggml-cuda appends "-vN" for virtual devices of one GPU. */
	len = strcspn(pci, "-");
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError();
		n = 0;
	}
	for (int i = 0; i < n; i++) {
		char id[32];

		if (cudaDeviceGetPCIBusId(id, sizeof(id), i) != cudaSuccess) {
			cudaGetLastError();
			continue;
		}
		for (char *s = id; *s; s++)
			*s = (char)tolower((unsigned char)*s);
		if (strlen(id) == len && !strncmp(id, pci, len)) {
			*ret_ordinal = i;
			return 0;
		}
	}
	snprintf(why, whylen, "no CUDA device of pprpcd's runtime has PCI bus id %.40s (%d seen)", pci, n);
	return PPRPC_EUNSUPP;
}

#else /* !PPRPC_HAVE_CUDA */

int gge_cuda_find(const char *pci, int *ret_ordinal, char *why, size_t whylen)
{
	(void)pci, (void)ret_ordinal;
	snprintf(why, whylen, "this pprpcd was built without CUDA kernels");
	return PPRPC_EUNSUPP;
}

#endif
