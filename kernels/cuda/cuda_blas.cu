/*
 * kernels/cuda/cuda_blas.cu — cuBLAS loaded at run time: dlopen the
 * library of the toolkit we were built with (libcublas.so.<major>, then
 * plain libcublas.so), dlsym the few entry points MUL_MAT needs, create a
 * handle bound to the caller's stream.  Errors carry the dlerror / cuBLAS
 * text.
 */
#include "kernels/cuda/cuda_impl.cuh"
#include "kernels/cuda/cuda_blas_impl.cuh"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define STR_(x) #x
#define STR(x) STR_(x)

static const char *const lib_names[] = {
	"libcublas.so." STR(CUBLAS_VER_MAJOR),
	"libcublas.so",
};

static int sym(struct kcu_blas *b, void **out, const char *name, bool optional, char *err,
	       size_t errlen)
{
	const char *e;

	dlerror();
	*out = dlsym(b->lib, name);
	e = dlerror();
	if (*out && !e)
		return 0;
	*out = NULL;
	if (optional)
		return 0;
	return kern_errf(err, errlen, PPRPC_EUNSUPP, "cuBLAS: %s", e ? e : name);
}

extern "C" void kern_cuda_blas_destroy(void *handle)
{
	struct kcu_blas *b = (struct kcu_blas *)handle;

	if (!b)
		return;
	if (b->handle && b->destroy)
		b->destroy(b->handle);
	if (b->lib)
		dlclose(b->lib);
	free(b);
}

extern "C" int kern_cuda_blas_create(void *stream, void **ret_handle, char *err, size_t errlen)
{
	struct kcu_blas *b = (struct kcu_blas *)calloc(1, sizeof(*b));
	char first[256] = "";
	cublasStatus_t st;
	int rc;

	if (!b)
		return kern_errf(err, errlen, PPRPC_ENOMEM, "cuBLAS: out of memory");
	for (size_t i = 0; i < sizeof(lib_names) / sizeof(lib_names[0]) && !b->lib; i++) {
		b->lib = dlopen(lib_names[i], RTLD_NOW | RTLD_LOCAL);
		if (!b->lib && i == 0) {
			const char *e = dlerror();

			snprintf(first, sizeof(first), "%s", e ? e : lib_names[i]);
		}
	}
	if (!b->lib) {
		rc = kern_errf(err, errlen, PPRPC_EUNSUPP, "cuBLAS not loadable: %s", first);
		goto fail;
	}
	if ((rc = sym(b, (void **)&b->create, "cublasCreate_v2", false, err, errlen)) < 0 ||
	    (rc = sym(b, (void **)&b->destroy, "cublasDestroy_v2", false, err, errlen)) < 0 ||
	    (rc = sym(b, (void **)&b->set_stream, "cublasSetStream_v2", false, err, errlen)) < 0 ||
	    (rc = sym(b, (void **)&b->gemm_ex, "cublasGemmEx", false, err, errlen)) < 0 ||
	    (rc = sym(b, (void **)&b->gemm_sb_ex, "cublasGemmStridedBatchedEx", false, err,
		      errlen)) < 0 ||
	    (rc = sym(b, (void **)&b->status_string, "cublasGetStatusString", true, err,
		      errlen)) < 0)
		goto fail;
	st = b->create(&b->handle);
	if (st != CUBLAS_STATUS_SUCCESS) {
		b->handle = NULL;
		rc = kern_errf(err, errlen, PPRPC_EDEVICE, "cublasCreate: %s", kcu_blas_str(b, st));
		goto fail;
	}
	st = b->set_stream(b->handle, (cudaStream_t)stream);
	if (st != CUBLAS_STATUS_SUCCESS) {
		rc = kern_errf(err, errlen, PPRPC_EDEVICE, "cublasSetStream: %s",
			       kcu_blas_str(b, st));
		goto fail;
	}
	*ret_handle = b;
	return 0;
fail:
	kern_cuda_blas_destroy(b);
	return rc;
}
