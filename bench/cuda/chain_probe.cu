/*
 * bench/cuda/chain_probe — how long one GPU takes from the end of one
 * process's graph to the start of the next process's graph that needs its
 * output, by the ways two ranks of one GPU can hand a decoded token's
 * hidden state over, with nothing of pprpc in it.
 *
 * Why: issue 31's four-rank decode spends 67-156 us per stage boundary
 * between one rank's graph end and the next one's launch (the source's
 * completion, its SEND, the bell, the destination's copy, prepare and
 * launch), and a RECV held on the GPU (land-hold) did not shorten the token
 * under MPS.  This probe tells which hand-over can be short on this GPU at
 * all, and whether a stream held on a wait slows the other process's graph.
 *
 *   bench-chain-probe [ITERS] [MODES] [IDLE_US]   (make bench-cuda; alone: nvcc -O2
 *   -arch=sm_90 -cudart static bench/cuda/chain_probe.cu)
 *
 * IDLE_US (default 200): how long A waits after B said it is ready, so how
 * long a wait B enqueued before is held before A's graph even starts (in a
 * four-rank pipeline the last stage's wait is held ~1.5 ms).
 *
 * Process A (the source) and B (the destination, forked before CUDA starts)
 * each run a CUDA graph of NODES memory-bound kernels between two stamps of
 * the GPU's global timer (written into a shared host page).  Per iteration,
 * after B said it is ready:
 *   cpusync  A: graph, waits for it (polls an event), copies the 10 KiB
 *            state to the shared slot, stores the bell.  B: polls the bell,
 *            copies the slot to the GPU (synchronously), launches its graph
 *            (what the daemon's landed RECV and GRAPH_RUN do).
 *   cpu      the same, B's copy and launch enqueued back to back.
 *   gpubell  A's stream copies the state to the slot and writes the bell
 *            behind its graph (cuStreamWriteValue64); B as in cpu.
 *   heldcpu  A as in cpusync; B enqueued before A starts: cuStreamWaitValue64
 *            on the bell, the copy, the graph (the daemon's land-hold).
 *   held     A as in gpubell, B as in heldcpu.
 *   spin     A as in gpubell; B enqueued before: a one-thread kernel polling
 *            the bell, the copy, the graph.
 *   ipcev    A: graph, a copy into IPC-exported memory, an interprocess
 *            event recorded, then the bell stored at once (the event is
 *            recorded, not reached).  B: polls the bell, waits for the event
 *            on its stream, copies from A's memory, launches (B's host work
 *            runs while A's graph still runs).
 * Prints per mode the gap b_start - a_end (p10 / p50 / p90, us) and the
 * median duration of each graph, and B's host time from the bell seen to
 * its launch returned (0 where B enqueued before).
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXIT 1000
#define STATE_BYTES (10u << 10)
#define NODES 100
#define WORK_BYTES (1ull << 30)

#define CK(x)                                                                                        \
	do {                                                                                         \
		cudaError_t e_ = (x);                                                                \
		if (e_ != cudaSuccess) {                                                             \
			fprintf(stderr, "chain-probe %s line %d: %s: %s\n", who, __LINE__, #x,      \
				cudaGetErrorString(e_));                                             \
			exit(1);                                                                     \
		}                                                                                    \
	} while (0)

struct shm {
	volatile uint64_t bell, ready, bdone, quit;
	volatile int handles_ok;
	cudaIpcMemHandle_t mh;
	cudaIpcEventHandle_t eh;
	uint64_t ts[4][MAXIT]; /* a_start, a_end, b_start, b_end */
	volatile double b_host_us; /* B: from the bell seen to its launch returned */
	uint8_t slot[STATE_BYTES] __attribute__((aligned(4096)));
};

static const char *who = "?";
static unsigned idle_us = 200;
typedef CUresult (*wait_fn)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
static wait_fn p_wait, p_write;

__global__ void stamp(unsigned long long *p)
{
	unsigned long long t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	*(volatile unsigned long long *)p = t;
}

__global__ void work(const float4 *b, size_t n, float *out)
{
	float s = 0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
		float4 v = b[i];
		s += v.x + v.y + v.z + v.w;
	}
	if (s == 12345.f)
		out[blockIdx.x] = s;
}

__global__ void spin_wait(volatile unsigned long long *bell, unsigned long long gen)
{
	while (*bell < gen)
		;
}

static void spin_until(volatile uint64_t *w, uint64_t v)
{
	while (*w < v)
		;
	__sync_synchronize();
}

static cudaGraphExec_t make_graph(cudaStream_t s, const float4 *buf, float *out, unsigned long long *t0,
				  unsigned long long *t1, int sms)
{
	cudaGraph_t g;
	cudaGraphExec_t x;
	size_t per = WORK_BYTES / NODES / sizeof(float4);

	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
	stamp<<<1, 1, 0, s>>>(t0);
	for (int i = 0; i < NODES; i++)
		work<<<sms * 4, 256, 0, s>>>(buf + i * per, per, out);
	stamp<<<1, 1, 0, s>>>(t1);
	CK(cudaStreamEndCapture(s, &g));
	CK(cudaGraphInstantiate(&x, g, 0));
	return x;
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
	qsort(v, n, sizeof(*v), cmp);
	return v[(int)(p * (n - 1))];
}

enum { M_CPUSYNC, M_CPU, M_GPUBELL, M_HELDCPU, M_HELD, M_SPIN, M_IPCEV, M_N };
static const char *mname[M_N] = { "cpusync", "cpu", "gpubell", "heldcpu", "held", "spin", "ipcev" };

static bool a_gpu_bell(int m)
{
	return m == M_GPUBELL || m == M_HELD || m == M_SPIN;
}
static bool b_pre(int m)
{
	return m == M_HELDCPU || m == M_HELD || m == M_SPIN;
}

static void resolve(void)
{
	cudaDriverEntryPointQueryResult q;

	CK(cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", (void **)&p_wait, 12000, cudaEnableDefault, &q));
	CK(cudaGetDriverEntryPointByVersion("cuStreamWriteValue64", (void **)&p_write, 12000, cudaEnableDefault, &q));
}

/* Runs one mode's iterations on one side; base: the iteration count so far (gens only grow). */
static void run_side(struct shm *sh, struct shm *dsh, int side, int m, int iters, uint64_t base, cudaStream_t s,
		     cudaGraphExec_t gx, float *state, float *peer_state, cudaEvent_t ev, cudaEvent_t done)
{
	for (int i = 0; i < iters; i++) {
		uint64_t gen = base + i + 1;

		if (side == 0) {
			spin_until(&sh->ready, gen);
			usleep(idle_us); /* B idles, as a rank waiting for the next token */
			CK(cudaGraphLaunch(gx, s));
			if (m == M_IPCEV) {
				CK(cudaEventRecord(ev, s));
				sh->bell = gen;
			} else if (a_gpu_bell(m)) {
				CK(cudaMemcpyAsync(sh->slot, state, STATE_BYTES, cudaMemcpyDeviceToHost, s));
				if (p_write(s, (CUdeviceptr)&dsh->bell, gen, 0) != CUDA_SUCCESS) {
					fprintf(stderr, "chain-probe: cuStreamWriteValue64 failed\n");
					exit(1);
				}
			} else {
				CK(cudaEventRecord(done, s));
				while (cudaEventQuery(done) == cudaErrorNotReady)
					;
				CK(cudaMemcpy(sh->slot, state, STATE_BYTES, cudaMemcpyDeviceToHost));
				__sync_synchronize();
				sh->bell = gen;
			}
			CK(cudaStreamSynchronize(s));
			spin_until(&sh->bdone, gen);
			continue;
		}
		if (b_pre(m)) {
			if (m == M_SPIN)
				spin_wait<<<1, 1, 0, s>>>((volatile unsigned long long *)&dsh->bell, gen);
			else if (p_wait(s, (CUdeviceptr)&dsh->bell, gen, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
				fprintf(stderr, "chain-probe: cuStreamWaitValue64 failed\n");
				exit(1);
			}
			CK(cudaMemcpyAsync(state, sh->slot, STATE_BYTES, cudaMemcpyHostToDevice, s));
			CK(cudaGraphLaunch(gx, s));
			sh->ready = gen;
		} else {
			sh->ready = gen;
			spin_until(&sh->bell, gen);
			double t = now_us();
			if (m == M_IPCEV) {
				CK(cudaStreamWaitEvent(s, ev, 0));
				CK(cudaMemcpyAsync(state, peer_state, STATE_BYTES, cudaMemcpyDeviceToDevice, s));
			} else if (m == M_CPUSYNC) {
				CK(cudaMemcpy(state, sh->slot, STATE_BYTES, cudaMemcpyHostToDevice));
			} else {
				CK(cudaMemcpyAsync(state, sh->slot, STATE_BYTES, cudaMemcpyHostToDevice, s));
			}
			CK(cudaGraphLaunch(gx, s));
			sh->b_host_us = now_us() - t;
		}
		CK(cudaStreamSynchronize(s));
		sh->bdone = gen;
	}
}

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 200;
	const char *modes = argc > 2 ? argv[2] : "cpusync,cpu,gpubell,heldcpu,held,spin,ipcev";

	if (argc > 3)
		idle_us = (unsigned)atoi(argv[3]);
	struct shm *sh;
	pid_t kid;
	int side;

	if (iters < 10 || iters > MAXIT) {
		fprintf(stderr, "chain-probe: ITERS in 10..%d\n", MAXIT);
		return 2;
	}
	setenv("CUDA_MODULE_LOADING", "EAGER", 1); /* a lazy load behind a held stream deadlocks */
	sh = (struct shm *)mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset(sh, 0, sizeof(*sh));
	kid = fork();
	side = kid == 0;
	who = side ? "B" : "A";

	int sms;
	cudaStream_t s;
	float4 *buf;
	float *out, *state, *peer_state = NULL;
	struct shm *dsh;
	cudaEvent_t ev = NULL, done;

	CK(cudaSetDevice(0));
	CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	resolve();
	CK(cudaHostRegister(sh, sizeof(*sh), cudaHostRegisterMapped | cudaHostRegisterPortable));
	CK(cudaHostGetDevicePointer((void **)&dsh, sh, 0));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	CK(cudaMalloc(&buf, WORK_BYTES));
	CK(cudaMemset(buf, 0, WORK_BYTES));
	CK(cudaMalloc(&out, sms * 4 * sizeof(float)));
	CK(cudaMalloc(&state, STATE_BYTES));
	CK(cudaMemset(state, side, STATE_BYTES));
	CK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
	if (!side) {
		CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess));
		CK(cudaIpcGetEventHandle((cudaIpcEventHandle_t *)&sh->eh, ev));
		CK(cudaIpcGetMemHandle((cudaIpcMemHandle_t *)&sh->mh, state));
		__sync_synchronize();
		sh->handles_ok = 1;
	} else {
		while (!sh->handles_ok)
			;
		__sync_synchronize();
		CK(cudaIpcOpenEventHandle(&ev, sh->eh));
		CK(cudaIpcOpenMemHandle((void **)&peer_state, sh->mh, cudaIpcMemLazyEnablePeerAccess));
	}
	CK(cudaDeviceSynchronize());

	uint64_t base = 0;
	char list[256];

	snprintf(list, sizeof(list), "%s", modes);
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		int m = 0;

		while (m < M_N && strcmp(mname[m], tok))
			m++;
		if (m == M_N) {
			fprintf(stderr, "chain-probe: unknown mode %s\n", tok);
			return 2;
		}
		unsigned long long *t0 = (unsigned long long *)&dsh->ts[side * 2][0];
		unsigned long long *t1 = (unsigned long long *)&dsh->ts[side * 2 + 1][0];
		int warm = 10;
		/* One graph per iteration slot would be 2 x ITERS graphs; the stamps of
		 * the last iteration are read after each one instead. */
		cudaGraphExec_t gx = make_graph(s, buf, out, t0, t1, sms);
		double gap[MAXIT], ad[MAXIT], bd[MAXIT], bh[MAXIT];

		for (int i = 0; i < warm + iters; i++) {
			run_side(sh, dsh, side, m, 1, base, s, gx, state, peer_state, ev, done);
			base++;
			if (side == 0 && i >= warm) {
				/* B's stamps are in the page once B said done. */
				int k = i - warm;
				gap[k] = ((double)sh->ts[2][0] - (double)sh->ts[1][0]) / 1e3;
				ad[k] = ((double)sh->ts[1][0] - (double)sh->ts[0][0]) / 1e3;
				bd[k] = ((double)sh->ts[3][0] - (double)sh->ts[2][0]) / 1e3;
				bh[k] = sh->b_host_us;
			}
		}
		CK(cudaGraphExecDestroy(gx));
		if (side == 0) {
			double g10 = pct(gap, iters, 0.1), g50 = pct(gap, iters, 0.5), g90 = pct(gap, iters, 0.9);
			printf("%-8s gap a_end->b_start us p10 %7.1f p50 %7.1f p90 %7.1f   graph A %6.1f B %6.1f us"
			       "   B host bell->launched %6.1f us\n",
			       mname[m], g10, g50, g90, pct(ad, iters, 0.5), pct(bd, iters, 0.5),
			       b_pre(m) ? 0.0 : pct(bh, iters, 0.5));
			fflush(stdout);
		}
	}
	if (side == 0) {
		int st = 0;

		waitpid(kid, &st, 0);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	return 0;
}
