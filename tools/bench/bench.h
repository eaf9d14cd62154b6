/*
 * tools/bench/bench.h — pprpc-bench's shared state: the model
 * configuration, one stage per rank, and the run context.  The program is
 * split by job:
 *   model.c    the hybrid transformer: weight shapes, seeded weights, where
 *              each stage's weights and states live
 *   graphs.c   one graph per (stage, step, slot): prefill ubatches and
 *              decode steps, built once and cached
 *   runs.c     one prefill + decode in seq or pp mode, through
 *              pprpc_pipeline_run, and the trace slices of a run
 *   ../pprpc-bench.c  options, pairs, statistics and reports
 */
#ifndef PPRPC_TOOLS_BENCH_H
#define PPRPC_TOOLS_BENCH_H

#include <stdint.h>

#include "pprpc.h"
#include "pprpc_pipeline.h"
#include "tools/common/report.h"

#define MAX_RANKS 16
#define MAX_LAYERS 256
#define KC 4   /* KDA conv taps */

enum wtype_id { WT_F16, WT_BF16, WT_Q8 };

/* Weights of a layer: MLP first, then the mixer's. */
enum wid {
	M_NORM, M_GATE, M_UP, M_DOWN,
	A_NORM, A_Q, A_K, A_V, A_O,
	K_NORM, K_Q, K_K, K_V, K_CQ, K_CK, K_CV, K_G, K_GB, K_ALOG, K_B, K_ON, K_OG, K_O,
	G_EMB, G_FNORM, G_HEAD,   /* global: stage 0 / last stage, layer index -1 */
	NWID
};

struct wdesc {
	int dtype;
	int64_t ne0, ne1;
	double lo, hi;   /* 0, 0: projection, uniform +-sqrt(3 / ne0) */
};

struct cfg {
	int E, H, D, F, L, ratio, V, wtype, P, ub, gen, pairs, warmup;
	int batch;               /* logical batch in tokens; 0 = the whole prompt */
	uint64_t seed;
	int n_ctx;
	int32_t *prompt;
};

struct stage {
	pprpc_client *c;
	const char *addr;
	int l0, l1;                          /* layers [l0, l1) */
	pprpc_buffer w, st;                  /* weights, states (KV caches, KDA states) */
	pprpc_buffer pos;                    /* positions 0 .. n_ctx-1 */
	pprpc_buffer in[2], out[2];          /* boundary slots (stage 0's input: token ids) */
	uint64_t in_max, out_max;            /* their sizes (a full ubatch) */
	uint64_t woff[MAX_LAYERS + 1][NWID]; /* [l - l0 + 1]; [0] = globals */
	uint64_t soff[MAX_LAYERS];           /* state offset per layer */
	uint64_t wbytes, sbytes;
	pprpc_graph (*g)[2];                 /* [step][slot], id 0 = not built */
	uint64_t setup_creates;              /* graphs created before the pairs */
};

/* One traced slice: stage s ran step u (u = -1 - i for decode step i). */
struct slice {
	int s, u, mode;          /* mode 0 seq, 1 pp */
	double a, b;
};

struct ctx {
	struct cfg m;
	int S;
	struct stage st[MAX_RANKS];
	int nub;                 /* prefill ubatches */
	int nsteps;              /* nub + decode steps */
	int rpc_errors;
	pprpc_pipeline *pipe;          /* the timed runs */
	pprpc_pipeline *pipe_traced;   /* the traced pair (observer, timeline polls) */
	/* the run in progress (the plan and observe callbacks read these) */
	int step0;               /* step of micro-batch 0 */
	int mode;
	uint64_t *ev_issue, *ev_done;   /* [s * M + m] of the current pipeline run */
	int ev_m;
	/* traces */
	int trace_req;           /* --trace or --svg: one extra, traced pair */
	int trace_on;
	struct slice *sl;
	int nsl, capsl;
	double t0;
};

/* model.c */
int is_attn(const struct cfg *m, int l);
const char *wtype_name(int wtype);
/* Shape of weight id of layer l (-1: the global ones); 0 if it has none. */
int weight_desc(const struct cfg *m, int l, int id, struct wdesc *d);
/* Offsets of stage s's weights and states (no allocation). */
void plan_stage(const struct ctx *x, struct stage *st, int s);
/* Allocate and fill stage s's weight and state buffers. */
int upload_weights(struct ctx *x, int s);
/* Bytes of one boundary slot of stage s for n_tok tokens: its input (token
 * ids on stage 0) and its output (the sampled token on the last stage). */
uint64_t stage_in_bytes(const struct ctx *x, int s, int n_tok);
uint64_t stage_out_bytes(const struct ctx *x, int s, int n_tok);
/* Bytes rank s needs besides weights and states at ubatch ub. */
uint64_t io_bytes(const struct ctx *x, int s, int ub);
/* Report a failed call on stage s; returns rc. */
int rpc_fail(struct ctx *x, int s, const char *what, int rc);

/* graphs.c */
/* Step i: prefill ubatch i (i < nub) or decode step i - nub. */
void step_shape(const struct ctx *x, int i, int *n_past, int *n_tok);
/* The graph of stage s for step i reading/writing slot k (built on first
 * use, then cached).  0 or a negative code (reported). */
int graph_get(struct ctx *x, int s, int i, int k, pprpc_graph *out);

/* report.c — what the pairs measured, and how it is shown */
#define MAX_PAIRS 64

struct bstat {
	uint64_t bytes, transfers, send_us, recv_us;
};

/* A rank's counters at one moment (STATS). */
struct snap {
	uint64_t creates, runs, captures, replays, free_bytes;
	struct bstat b;
};

/* One mode's timed runs of one ubatch size. */
struct mode_acc {
	double tps[MAX_PAIRS], ttft[MAX_PAIRS], dtps[MAX_PAIRS];
	uint64_t hash;
	int nrun, hash_mismatch;
	int rpc_errors;
	uint64_t creates[MAX_RANKS], runs[MAX_RANKS], captures[MAX_RANKS], replays[MAX_RANKS];
	uint64_t freemin[MAX_RANKS];
	struct bstat b[MAX_RANKS];
};

/* The pp/seq prompt-throughput ratio of the pairs, and its ideal. */
struct ratio {
	double gm, lo, hi, ideal;
	int pairs;
};

extern const char *const mode_names[2];
int snap_rank(struct ctx *x, int s, struct snap *o);
/* Add what the counters moved since before to a. */
void acc_stats(struct ctx *x, struct mode_acc *a, const struct snap *before);
/* S*T/(T + (S-1)*u) summed over the logical batches: the prompt-throughput
 * ratio of a perfect pipeline whose stage times follow the tokens (S*M/(S+M-1)
 * for one batch of M equal ubatches). */
double ideal_ratio(const struct ctx *x);
void print_table(const struct ctx *x, const struct mode_acc *acc, const struct ratio *q);
void json_result(FILE *f, const struct ctx *x, const struct mode_acc *acc, const struct ratio *q, int ok);
int write_trace(const struct ctx *x, const char *path);
int write_svg(const struct ctx *x, const char *path);

/* runs.c */
/* Buffers, graphs for both modes and the pipeline at the current ubatch;
 * undone by teardown_ubatch (also after a failure). */
int setup_ubatch(struct ctx *x);
void teardown_ubatch(struct ctx *x);
/* Steps a logical batch of pp covers: [u0, ret) for the batch starting at
 * ubatch u0. */
int batch_end(const struct ctx *x, int u0);
struct run_res {
	double prefill_s, ttft_s, decode_s;
	uint64_t hash;
	int32_t *toks;           /* [gen] */
};
/* One prefill + greedy decode in mode (0 seq, 1 pp). */
int run_once(struct ctx *x, int mode, struct run_res *r);

#endif
