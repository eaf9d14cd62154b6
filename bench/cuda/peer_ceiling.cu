/*
 * bench/cuda/peer_ceiling — the GPU-to-GPU copy ceiling that pprpc's CUDA
 * IPC boundary transfers are measured against (bench-p2p --devices
 * cuda:0,cuda:1 in the same run).
 *
 *   bench-peer-ceiling [--sizes 64M,256M,1G] [--reps N] [--src 0] [--dst 1]
 *
 * For each size: cudaMemcpyPeerAsync src -> dst with peer access enabled,
 * timed with events, N repetitions after one warm-up; prints the median and
 * min..max in GB/s (10^9 bytes/s), one "PEER-CEILING" line per size.
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

static int check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	fprintf(stderr, "bench-peer-ceiling: %s: %s\n", what, cudaGetErrorString(e));
	return -1;
}

static int parse_sizes(const char *s, std::vector<size_t> &out)
{
	while (*s) {
		char *end;
		unsigned long long v = strtoull(s, &end, 10);

		if (end == s || v == 0)
			return -1;
		if (*end == 'K' || *end == 'M' || *end == 'G') {
			v <<= *end == 'K' ? 10 : *end == 'M' ? 20 : 30;
			end++;
		}
		out.push_back((size_t)v);
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		s = end;
	}
	return out.empty() ? -1 : 0;
}

int main(int argc, char **argv)
{
	std::vector<size_t> sizes;
	int reps = 10, src = 0, dst = 1, n = 0, can = 0;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "--sizes") && v && parse_sizes(v, sizes) == 0)
			i++;
		else if (!strcmp(argv[i], "--reps") && v && (reps = atoi(v)) > 0 && reps <= 1000)
			i++;
		else if (!strcmp(argv[i], "--src") && v)
			src = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--dst") && v)
			dst = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: bench-peer-ceiling [--sizes 64M,256M,1G] [--reps N] [--src 0] [--dst 1]\n");
			return 2;
		}
	}
	if (sizes.empty())
		parse_sizes("64M,256M,1G", sizes);
	if (check(cudaGetDeviceCount(&n), "cudaGetDeviceCount") < 0)
		return 1;
	if (src == dst || src < 0 || dst < 0 || src >= n || dst >= n) {
		fprintf(stderr, "bench-peer-ceiling: need two distinct GPUs (this host has %d)\n", n);
		return 1;
	}
	cudaDeviceCanAccessPeer(&can, dst, src);
	size_t maxn = *std::max_element(sizes.begin(), sizes.end());
	void *a = NULL, *b = NULL;
	cudaStream_t st;
	cudaEvent_t e0, e1;

	if (check(cudaSetDevice(src), "cudaSetDevice") < 0 || check(cudaMalloc(&a, maxn), "cudaMalloc(src)") < 0 ||
	    check(cudaMemset(a, 1, maxn), "cudaMemset") < 0 || check(cudaSetDevice(dst), "cudaSetDevice") < 0 ||
	    check(cudaMalloc(&b, maxn), "cudaMalloc(dst)") < 0)
		return 1;
	if (can)
		cudaDeviceEnablePeerAccess(src, 0);
	cudaGetLastError();
	if (check(cudaStreamCreate(&st), "cudaStreamCreate") < 0 || check(cudaEventCreate(&e0), "event") < 0 ||
	    check(cudaEventCreate(&e1), "event") < 0)
		return 1;
	printf("peer copy cuda:%d -> cuda:%d, peer access %s, %d reps after a warm-up\n", src, dst,
	       can ? "yes" : "NO (staged through the host)", reps);
	for (size_t sz : sizes) {
		std::vector<double> gbs;

		for (int r = -1; r < reps; r++) {
			float ms = 0;

			cudaEventRecord(e0, st);
			if (check(cudaMemcpyPeerAsync(b, dst, a, src, sz, st), "cudaMemcpyPeerAsync") < 0)
				return 1;
			cudaEventRecord(e1, st);
			if (check(cudaEventSynchronize(e1), "cudaEventSynchronize") < 0)
				return 1;
			cudaEventElapsedTime(&ms, e0, e1);
			if (r >= 0)
				gbs.push_back(sz / (ms * 1e-3) / 1e9);
		}
		std::sort(gbs.begin(), gbs.end());
		printf("PEER-CEILING size=%zuMiB median_GBps=%.1f min=%.1f max=%.1f\n", sz >> 20, gbs[gbs.size() / 2],
		       gbs.front(), gbs.back());
	}
	return 0;
}
