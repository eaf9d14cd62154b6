/*
 * bench/cuda/ipc_probe — what one 64 MiB copy out of another process's
 * IPC-exported GPU memory costs, the way the daemon's IPC RECV does it
 * (cudaIpcOpenMemHandle with lazy peer access, then a copy on a stream of
 * the destination GPU), three ways: cudaMemcpyAsync, cudaMemcpyPeerAsync,
 * a copy kernel, and cudaMemcpyAsync into memory of the stream-ordered
 * allocator (where the daemon's buffers come from); each back to back and
 * after 20 ms and 150 ms of idleness (a benchmark that runs host work
 * between transfers leaves the GPUs idle that long).
 *
 *   bench-ipc-probe          (needs two GPUs; runs itself as the importer)
 *
 * Prints per method: the enqueue time on the host and enqueue + copy +
 * synchronize, as the mean of 7 copies after one warm-up.
 */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                          \
	do {                                                                           \
		cudaError_t e_ = (x);                                                  \
		if (e_ != cudaSuccess) {                                               \
			printf("bench-ipc-probe: %s: %s\n", #x, cudaGetErrorString(e_)); \
			return 1;                                                      \
		}                                                                      \
	} while (0)

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

__global__ void copy_kernel(int4 *d, const int4 *s, size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
		d[i] = s[i];
}

static int importer(const char *hex)
{
	static const char *const names[4] = { "cudaMemcpyAsync", "cudaMemcpyPeerAsync", "copy kernel",
					      "memcpy to pool mem" };
	static const int idle_us[3] = { 0, 20000, 150000 };
	const size_t n = 64u << 20;
	cudaIpcMemHandle_t h;
	cudaStream_t st;
	void *p, *d, *dp;

	for (int i = 0; i < 64; i++) {
		unsigned v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return 2;
		((unsigned char *)&h)[i] = (unsigned char)v;
	}
	CK(cudaSetDevice(1));
	CK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
	CK(cudaMalloc(&d, n));
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaMallocAsync(&dp, n, st));
	CK(cudaStreamSynchronize(st));
	for (int m = 0; m < 4; m++)
		for (int idle = 0; idle < 3; idle++) {
			double enq = 0, tot = 0;
			const int reps = 8;

			for (int r = 0; r < reps; r++) {
				double t0, t1;

				if (idle_us[idle])
					usleep(idle_us[idle]);
				t0 = now_us();
				if (m == 0)
					CK(cudaMemcpyAsync(d, p, n, cudaMemcpyDeviceToDevice, st));
				else if (m == 1)
					CK(cudaMemcpyPeerAsync(d, 1, p, 0, n, st));
				else if (m == 2)
					copy_kernel<<<528, 512, 0, st>>>((int4 *)d, (const int4 *)p, n / 16);
				else
					CK(cudaMemcpyAsync(dp, p, n, cudaMemcpyDeviceToDevice, st));
				t1 = now_us();
				CK(cudaStreamSynchronize(st));
				if (r) { /* the first is the warm-up */
					enq += t1 - t0;
					tot += now_us() - t0;
				}
			}
			printf("IPC-PROBE %-20s idle=%3d ms enqueue %6.1f us, enqueue+copy+sync %6.1f us = %.1f GB/s\n",
			       names[m], idle_us[idle] / 1000, enq / (reps - 1), tot / (reps - 1),
			       n / (tot / (reps - 1)) / 1e3);
		}
	return 0;
}

int main(int argc, char **argv)
{
	const size_t n = 64u << 20;
	cudaIpcMemHandle_t ih;
	char hex[129], cmd[4300];
	void *d0;
	int ndev = 0;

	if (argc == 3)
		return importer(argv[2]);
	CK(cudaGetDeviceCount(&ndev));
	if (ndev < 2) {
		printf("bench-ipc-probe: needs two GPUs (this host has %d)\n", ndev);
		return 1;
	}
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&d0, n));
	CK(cudaMemset(d0, 1, n));
	CK(cudaDeviceSynchronize());
	CK(cudaIpcGetMemHandle(&ih, d0));
	for (int i = 0; i < 64; i++)
		snprintf(hex + 2 * i, 3, "%02x", ((unsigned char *)&ih)[i]);
	snprintf(cmd, sizeof(cmd), "'%s' import %s", argv[0], hex);
	return system(cmd) == 0 ? 0 : 1;
}
