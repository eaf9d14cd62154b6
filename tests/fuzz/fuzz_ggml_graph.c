/*
 * tests/fuzz/fuzz_ggml_graph.c — libFuzzer target for the ggml engine's
 * decoder: a GgmlGraphCreate through gge_graph_build (structure, the
 * no_alloc materialization, the rules, supports_op, the index guards), the
 * GGML_SUPPORTS / GGML_ALLOC_SIZE probes on the same tensors, and, when a
 * graph is accepted, its run on ggml-cpu (one thread), with
 * GATED_DELTA_NET nodes on pprpc's kernels where they fit
 * (ggml-native-gdn on).
 *
 * ggml aborts on what it does not accept, so any input reaching a
 * GGML_ASSERT is a crash here: the finding this target exists for.  ggml's
 * kernels are not instrumented, so the buffers are guard-paged instead: each
 * is a whole number of pages (a CPU_Mapped ggml buffer over our own mapping)
 * with an inaccessible page on either side, and a kernel reading or
 * writing past what the validator allowed faults.  Independently, every
 * tensor of an accepted graph must lie inside its buffer.
 *
 * Input:
 *   byte 0  bit 0: 0 = the rest is a packed GgmlGraphCreate (as received),
 *           1 = a recipe (below); bit 1: also run an accepted graph;
 *           bit 2 (with a packed message): buffers sized to the graph —
 *           each buffer handle it names gets a guard-paged buffer as large as
 *           its tensors reach (at most 64 MiB in all), so a graph llama.cpp
 *           made (captured by the plugin, PPRPC_DUMP_GRAPHS; the corpus's
 *           llama-* inputs, tests/fuzz/seed-ggml-graphs.sh) validates and runs
 *   byte 1  tensor index the probes ask about; seed of the buffers' contents
 *           (from 0x80: non-positive floats, fill_buffers)
 *   rest    as selected
 * A buffer handle 1..FZ_NBUF names static buffer (h - 1); others are
 * unknown.  A recipe builds a graph with ggml's own constructors (only with
 * arguments they accept: these are the graphs ggml makes), places its
 * tensors in the buffers at input-chosen offsets, serializes it as a client
 * would (tests/integration/ggml_wire.c), then breaks up to three fields, so
 * validation is exercised right beside the accepted set.  The corpus is
 * seeded from recipes (FUZZ_GGML_SEED_DIR=dir writes each input's packed
 * message there).
 *
 * Under libFuzzer a custom mutator changes packed messages within the schema
 * (a dimension, a stride, an offset, an op parameter by a small step, a
 * source to another tensor, a flag, a node dropped), so most mutants of a
 * real graph still validate and reach ggml's kernels; at exit the target
 * prints how many inputs it ran, built and computed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "daemon/backend/ggml/ggml_gdn.h"
#include "proto/meta.h"
#include "tests/integration/ggml_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                                       \
	do {                                                                           \
		if (!(c)) {                                                            \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                       \
		}                                                                      \
	} while (0)

#define FZ_NBUF 3
static const uint64_t buf_pages[FZ_NBUF] = { 1, 4, 16 };
/* sized mode (byte 0 bit 2): buffers made for the input's own handles */
#define FZ_NSIZED 8
#define FZ_SIZED_MAX (64ull << 20)

static struct {
	struct gge_dev *g;
	ggml_backend_buffer_t buf[FZ_NBUF];
	uint64_t size[FZ_NBUF];
	int nsized;
	uint64_t sized_handle[FZ_NSIZED];
	ggml_backend_buffer_t sized[FZ_NSIZED];
	uint8_t *sized_map[FZ_NSIZED];
	size_t sized_len[FZ_NSIZED];
	unsigned long inputs, built, computed;
} fz;

/* The counts, once at exit (libFuzzer exits through exit()). */
static void fz_report(void)
{
	const double n = fz.inputs ? (double)fz.inputs : 1.0;

	fprintf(stderr, "fuzz_ggml_graph: %lu inputs, %lu graphs accepted (%.1f%%), %lu ran on ggml-cpu (%.1f%%)\n",
		fz.inputs, fz.built, 100.0 * fz.built / n, fz.computed, 100.0 * fz.computed / n);
}

static void fz_init(void)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	char err[256];

	if (fz.g)
		return;
	if (getenv("FUZZ_GGML_REPORT"))
		atexit(fz_report);
	if (gge_dev_open("CPU", 1, &fz.g, err, sizeof(err)) < 0) {
		fprintf(stderr, "fuzz: %s\n", err);
		abort();
	}
	/* GATED_DELTA_NET on pprpc's kernels wherever they fit (ggml_gdn.c):
	 * their descriptors come from the same hostile graphs. */
	gge_dev_gdn_config(fz.g, GGE_GDN_ON, NULL, NULL, 0);
	for (int i = 0; i < FZ_NBUF; i++) {
		size_t n = (size_t)buf_pages[i] * ps;
		uint8_t *m = mmap(NULL, n + 2 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		CHECK(m != MAP_FAILED);
		CHECK(mprotect(m + ps, n, PROT_READ | PROT_WRITE) == 0);
		fz.buf[i] = ggml_backend_cpu_buffer_from_ptr(m + ps, n);
		fz.size[i] = n;
	}
}

static int resolve(void *arg, uint64_t handle, struct gge_wbuf *ret, char *err, size_t errlen)
{
	(void)arg;
	for (int i = 0; i < fz.nsized; i++)
		if (fz.sized_handle[i] == handle) {
			if (!fz.sized[i])
				break;
			ret->buf = fz.sized[i];
			ret->size = ggml_backend_buffer_get_size(fz.sized[i]);
			return 0;
		}
	if (fz.nsized || handle == 0 || handle > FZ_NBUF) {
		snprintf(err, errlen, "unknown buffer handle %llu", (unsigned long long)handle);
		return -5;
	}
	ret->buf = fz.buf[handle - 1];
	ret->size = fz.size[handle - 1];
	return 0;
}

/* ---- input reader ------------------------------------------------------------- */

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint8_t rd8(struct rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static uint32_t rd32(struct rd *r)
{
	uint32_t v = rd8(r);

	v |= (uint32_t)rd8(r) << 8;
	v |= (uint32_t)rd8(r) << 16;
	return v | (uint32_t)rd8(r) << 24;
}

/* Small dimensions: 1..8 mostly, up to 64 sometimes. */
static int64_t rd_dim(struct rd *r)
{
	uint8_t b = rd8(r);

	return b < 224 ? 1 + b % 8 : 1 + b % 64;
}

/* ---- recipes -------------------------------------------------------------------- */

enum step {
	S_LEAF, S_ADD, S_MUL, S_MUL_MAT, S_SCALE, S_SOFT_MAX, S_GET_ROWS, S_CPY, S_CONT,
	S_RESHAPE, S_VIEW, S_PERMUTE, S_TRANSPOSE, S_SIN, S_ARGSORT, S_TOP_K, S_MUL_MAT_ID,
	S_SET_ROWS, S_GDN, S_COUNT
};

#define MAX_T 64

static struct ggml_tensor *leaf(struct ggml_context *ctx, struct rd *r, enum ggml_type type, int64_t n0, int64_t n1,
				int64_t n2)
{
	struct ggml_tensor *t = ggml_new_tensor_4d(ctx, type, n0, n1, n2, 1);

	(void)r;
	return t;
}

static bool is_float(const struct ggml_tensor *t)
{
	return t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16;
}

/* Indices [n0, n1] i32: a new input, or (the input permitting) a view of
 * an earlier contiguous i32 tensor (an ARGSORT's or TOP_K's output, whose
 * values the engine may or may not be able to prove in range). */
static struct ggml_tensor *indices(struct ggml_context *ctx, struct rd *r, struct ggml_tensor **t, int n,
				   int64_t n0, int64_t n1)
{
	struct ggml_tensor *c = n ? t[rd8(r) % n] : NULL;

	if (c && rd8(r) & 1 && c->type == GGML_TYPE_I32 && ggml_is_contiguous(c) && c->ne[0] >= n0 &&
	    ggml_nelements(c) / c->ne[0] >= n1)
		return ggml_view_2d(ctx, c, n0, n1, c->nb[1], 0);
	return ggml_new_tensor_2d(ctx, GGML_TYPE_I32, n0, n1);
}

/* One step: a new tensor from ggml's constructors, or NULL when the operand
 * drawn does not suit the op (no constructor is called then: it would
 * assert). */
static struct ggml_tensor *step(struct ggml_context *ctx, struct rd *r, struct ggml_tensor **t, int n)
{
	enum step s = (enum step)(rd8(r) % S_COUNT);
	struct ggml_tensor *a = n ? t[rd8(r) % n] : NULL;

	if (!a || s == S_LEAF) {
		static const enum ggml_type types[] = { GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32 };

		return leaf(ctx, r, types[rd8(r) % 4], rd_dim(r), rd_dim(r), 1 + rd8(r) % 2);
	}
	switch (s) {
	case S_ADD:
	case S_MUL: {
		int64_t ne[4];
		struct ggml_tensor *b;

		if (!is_float(a))
			return NULL;
		for (int k = 0; k < 4; k++)
			ne[k] = rd8(r) & 1 ? a->ne[k] : 1;
		b = ggml_new_tensor(ctx, a->type, 4, ne);
		return s == S_ADD ? ggml_add(ctx, a, b) : ggml_mul(ctx, a, b);
	}
	case S_MUL_MAT:
		if (!is_float(a) || ggml_is_transposed(a) || a->ne[3] != 1)
			return NULL;
		return ggml_mul_mat(ctx, a, leaf(ctx, r, GGML_TYPE_F32, a->ne[0], rd_dim(r), a->ne[2]));
	case S_SCALE:
		/* ggml_scale asserts ggml_is_padded_1d (static in ggml.c) */
		return a->type == GGML_TYPE_F32 && ggml_is_contiguous(a) && a->nb[0] == sizeof(float) && a->nb[2] == a->nb[1] * (size_t)a->ne[1] &&
		       a->nb[3] == a->nb[2] * (size_t)a->ne[2] ? ggml_scale(ctx, a, 0.5f) : NULL;
	case S_SOFT_MAX:
		return a->type == GGML_TYPE_F32 && ggml_is_contiguous(a) ? ggml_soft_max(ctx, a) : NULL;
	case S_GET_ROWS: {
		struct ggml_tensor *ids;

		if (a->ne[3] != 1 || a->type == GGML_TYPE_I32)
			return NULL;
		ids = indices(ctx, r, t, n, rd_dim(r), a->ne[2]);
		return ggml_get_rows(ctx, a, ids);
	}
	case S_ARGSORT:
		return a->type == GGML_TYPE_F32 && a->nb[0] == sizeof(float) ?
			       ggml_argsort(ctx, a, rd8(r) & 1 ? GGML_SORT_ORDER_DESC : GGML_SORT_ORDER_ASC) : NULL;
	case S_TOP_K:
		return a->type == GGML_TYPE_F32 && a->nb[0] == sizeof(float) ? ggml_top_k(ctx, a, 1 + rd8(r) % a->ne[0])
									       : NULL;
	case S_MUL_MAT_ID: {
		/* experts as [K, N, n_as], b [K, used, T], ids [used, T] */
		int64_t k = rd_dim(r), nn = rd_dim(r), n_as = 2 + rd8(r) % 7, used = 1 + rd8(r) % n_as;
		int64_t tok = 1 + rd8(r) % 4;
		struct ggml_tensor *as = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, k, nn, n_as);
		struct ggml_tensor *b = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, k, used, tok);

		return ggml_mul_mat_id(ctx, as, b, indices(ctx, r, t, n, used, tok));
	}
	case S_SET_ROWS: {
		int64_t rows = 1 + rd8(r) % 4;
		struct ggml_tensor *b, *c;

		if (a->type != GGML_TYPE_F32 || !ggml_is_contiguous_rows(a) || a->ne[3] != 1)
			return NULL;
		b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, a->ne[0], rows, a->ne[2], 1);
		c = rd8(r) & 1 ? ggml_new_tensor_1d(ctx, GGML_TYPE_I64, rows) : indices(ctx, r, t, n, rows, 1);
		return ggml_set_rows(ctx, a, b, c);
	}
	case S_CPY:
		if (!is_float(a))
			return NULL;
		return ggml_cpy(ctx, a, ggml_new_tensor_1d(ctx, rd8(r) & 1 ? GGML_TYPE_F16 : GGML_TYPE_F32,
							   ggml_nelements(a)));
	case S_CONT:
		return is_float(a) ? ggml_cont(ctx, a) : NULL;
	case S_RESHAPE:
		return ggml_is_contiguous(a) ? ggml_reshape_1d(ctx, a, ggml_nelements(a)) : NULL;
	case S_VIEW: {
		int64_t nel = ggml_nelements(a), k, off;

		if (!ggml_is_contiguous(a) || nel < 1)
			return NULL;
		k = 1 + rd8(r) % nel;
		off = rd8(r) % (nel - k + 1);
		return ggml_view_1d(ctx, a, k, (size_t)off * ggml_type_size(a->type));
	}
	case S_PERMUTE:
		return ggml_permute(ctx, a, 1, 2, 0, 3);
	case S_TRANSPOSE:
		return ggml_transpose(ctx, a);
	case S_SIN:
		return a->type == GGML_TYPE_F32 ? ggml_sin(ctx, a) : NULL;
	case S_GDN: {
		/* GATED_DELTA_NET as its constructor takes it (head size 16 or
		 * 32, q/k heads dividing v's, scalar or per-channel gate, K
		 * snapshots), small enough for the buffers; the device runs it
		 * on pprpc's kernel where that fits (fz_init), else ggml's. */
		const bool big = rd8(r) & 1, kda = rd8(r) & 1;
		const int64_t S = big ? 32 : 16, hk = big ? 1 : 1 + rd8(r) % 2, hv = hk * (1 + rd8(r) % 2);
		const int64_t T = 1 + rd8(r) % 8, B = big ? 1 : 1 + rd8(r) % 2;
		const int64_t K = 1 + rd8(r) % 3;

		return ggml_gated_delta_net(ctx, ggml_new_tensor_4d(ctx, GGML_TYPE_F32, S, hk, T, B),
					    ggml_new_tensor_4d(ctx, GGML_TYPE_F32, S, hk, T, B),
					    ggml_new_tensor_4d(ctx, GGML_TYPE_F32, S, hv, T, B),
					    ggml_new_tensor_4d(ctx, GGML_TYPE_F32, kda ? S : 1, hv, T, B),
					    ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 1, hv, T, B),
					    ggml_new_tensor_4d(ctx, GGML_TYPE_F32, S, S, hv, B), K);
	}
	default:
		return NULL;
	}
}

/* Put every tensor that owns bytes into a buffer: mostly packed one after
 * the other (32-byte aligned), sometimes at an input-chosen offset. */
static void place(struct ggml_context *ctx, struct rd *r)
{
	uint64_t next[FZ_NBUF] = { 0 };

	for (struct ggml_tensor *t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
		int b = rd8(r) % FZ_NBUF;
		uint64_t off = (next[b] + 31) & ~(uint64_t)31;
		uint8_t how = rd8(r);

		if (t->view_src)
			continue;
		if (how >= 250)
			off = rd32(r) % (fz.size[b] + 64);
		t->buffer = fz.buf[b];
		t->data = (uint8_t *)ggml_backend_buffer_get_base(fz.buf[b]) + off;
		next[b] = off + ggml_nbytes(t);
	}
}

/* Break one field of the wire graph. */
static void mutate(struct gw_graph *w, struct rd *r)
{
	Pprpc__GgmlTensor *t;
	uint8_t f = rd8(r) % 14;
	uint32_t v = rd32(r);

	if (!w->msg.n_tensors)
		return;
	t = &w->t[rd8(r) % w->msg.n_tensors];
	switch (f) {
	case 0: t->type = v % (GGML_TYPE_COUNT + 2); break;
	case 1: t->ne[v % 4] = (int64_t)(int32_t)(v >> 2) % 70; break;
	case 2: t->nb[v % 4] = (v >> 2) % 4096; break;
	case 3: t->op = v % (GGML_OP_COUNT + 2); break;
	case 4: if (t->n_src) t->src[v % t->n_src] = (int32_t)((v >> 4) % (w->msg.n_tensors + 2)) - 1; break;
	case 5: t->view_src = (int32_t)(v % (w->msg.n_tensors + 1)) - 1; break;
	case 6: t->view_offs = v % 8192; break;
	case 7: t->buffer = v % (FZ_NBUF + 2); break;
	case 8: t->offset = v % 70000; break;
	case 9: if (t->op_params.len) ((uint8_t *)t->op_params.data)[v % t->op_params.len] = (uint8_t)(v >> 8); break;
	case 10: t->flags = (int32_t)(v % 64); break;
	case 11: if (w->msg.n_nodes) w->nodes[v % w->msg.n_nodes] = (int32_t)((v >> 8) % (w->msg.n_tensors + 1)); break;
	case 12: t->ne[v % 4] = -(int64_t)(v >> 2); break;
	case 13: t->nb[v % 4] = (uint64_t)v << 24; break;
	}
}

/* ---- what is checked ---------------------------------------------------------- */

/* Every tensor of an accepted graph lies inside its buffer. */
static void check_extents(const struct gge_graph *gg)
{
	for (int i = 0; i < gg->ntensors; i++) {
		const struct ggml_tensor *t = gg->t[i];
		uint8_t *base;
		size_t size;

		CHECK(t->buffer && t->data);
		base = ggml_backend_buffer_get_base(t->buffer);
		size = ggml_backend_buffer_get_size(t->buffer);
		CHECK((uint8_t *)t->data >= base);
		CHECK(ggml_nbytes(t) <= size - (size_t)((uint8_t *)t->data - base));
	}
}

static void exercise(const Pprpc__GgmlGraphCreate *m, int probe, int compute)
{
	const Pprpc__GgmlTensor *const *t = (const Pprpc__GgmlTensor *const *)m->tensors;
	struct gge_graph *gg = NULL;
	char err[512];
	uint64_t asz;
	bool ok;

	int rc = gge_graph_build(fz.g, t, m->n_tensors, m->nodes, m->n_nodes, resolve, NULL, &gg, err, sizeof(err));

	/* FUZZ_GGML_VERBOSE=1: what became of each input */
	if (getenv("FUZZ_GGML_VERBOSE"))
		fprintf(stderr, "build %d%s%s\n", rc, rc ? ": " : "", rc ? err : "");
	if (rc == 0) {
		fz.built++;
		check_extents(gg);
		if (compute) {
			rc = gge_graph_compute(fz.g, gg, err, sizeof(err));
			fz.computed += rc == 0;
		}
		if (getenv("FUZZ_GGML_VERBOSE") && compute) {
			struct kern_gdn_stats st;

			kern_gdn_stats_read(gge_dev_gdn_native(fz.g), &st);
			if (rc)
				fprintf(stderr, "run %d: %s\n", rc, err);
			fprintf(stderr, "run %d; GATED_DELTA_NET so far: pprpc serial %llu chunked %llu, ggml gate %llu "
				"shape %llu\n", rc, (unsigned long long)st.serial,
				(unsigned long long)(st.chunked[0] + st.chunked[1] + st.chunked[2]),
				(unsigned long long)gge_dev_gdn_ggml_count(fz.g, GGE_GDN_WHY_GATE),
				(unsigned long long)gge_dev_gdn_ggml_count(fz.g, GGE_GDN_WHY_SHAPE));
		}
		gge_graph_free(gg);
	}
	if (m->n_tensors) {
		gge_probe_supports(fz.g, t, m->n_tensors, probe % (int)m->n_tensors, resolve, NULL, &ok, err, sizeof(err));
		gge_probe_alloc_size(fz.g, t, m->n_tensors, probe % (int)m->n_tensors, resolve, NULL, &asz, err,
				     sizeof(err));
	}
}

static void save_seed(const Pprpc__GgmlGraphCreate *m, const uint8_t *data, size_t size)
{
	const char *dir = getenv("FUZZ_GGML_SEED_DIR");
	size_t n = meta_size(&m->base);
	uint8_t *buf = malloc(n + 2);
	char path[512];
	uint32_t h = 2166136261u;
	FILE *f;

	if (!dir || !buf) {
		free(buf);
		return;
	}
	buf[0] = data[0] & ~1u;
	buf[1] = data[1];
	meta_pack(&m->base, buf + 2);
	for (size_t i = 0; i < size; i++)
		h = (h ^ data[i]) * 16777619u;
	snprintf(path, sizeof(path), "%s/seed-%08x", dir, h);
	f = fopen(path, "wb");
	if (f) {
		fwrite(buf, 1, n + 2, f);
		fclose(f);
	}
	free(buf);
}

static void from_recipe(const uint8_t *data, size_t size)
{
	struct rd r = { data + 2, size - 2 };
	struct ggml_init_params ip = { .mem_size = 2 * MAX_T * ggml_tensor_overhead() + ggml_graph_overhead(),
				       .no_alloc = true };
	struct ggml_context *ctx = ggml_init(ip);
	struct ggml_tensor *t[MAX_T];
	struct gw_map map[FZ_NBUF];
	struct ggml_cgraph *gf;
	struct gw_graph w;
	int n = 0, steps = 1 + rd8(&r) % 12, nmut = rd8(&r) % 4;

	CHECK(ctx);
	for (int i = 0; i < steps && n < MAX_T / 3; i++) {
		struct ggml_tensor *x = step(ctx, &r, t, n);

		if (x)
			t[n++] = x;
	}
	place(ctx, &r);
	gf = ggml_new_graph(ctx);
	for (int i = 0; i < n; i++)
		if (t[i]->op != GGML_OP_NONE)
			ggml_build_forward_expand(gf, t[i]);
	for (int i = 0; i < FZ_NBUF; i++)
		map[i] = (struct gw_map){ fz.buf[i], (uint64_t)i + 1 };
	if (ggml_graph_n_nodes(gf) && gw_serialize(gf, map, FZ_NBUF, 0, &w) == 0) {
		save_seed(&w.msg, data, size);
		for (int i = 0; i < nmut; i++)
			mutate(&w, &r);
		exercise(&w.msg, data[1], data[0] & 2);
	}
	if (ggml_graph_n_nodes(gf))
		gw_free(&w);
	ggml_free(ctx);
}

/* The buffers' contents for this input: small i32 values, -1 among them
 * (an index a guard must catch), so a run depends on the input alone.
 * Seeds from 0x80: f32 values in [-1, 0] instead, so GATED_DELTA_NET's
 * gates are in the domain pprpc's kernel takes (a run on its kernel). */
static void fill_buffers(uint8_t seed)
{
	for (int b = 0; b < FZ_NBUF; b++) {
		int32_t *p = ggml_backend_buffer_get_base(fz.buf[b]);
		float *f = (float *)p;

		for (uint64_t i = 0; i < fz.size[b] / sizeof(int32_t); i++) {
			if (seed & 0x80)
				f[i] = -(float)((i * (seed | 1u)) % 11) / 10.0f;
			else
				p[i] = (int32_t)((i * (seed | 1u)) % 11) - 1;
		}
	}
}

/* ---- sized mode ----------------------------------------------------------------- */

/* The bytes t reaches from its offset, as ggml_nbytes counts them; 0 when
 * the fields cannot describe a tensor (the engine refuses those anyway). */
static uint64_t reach(const Pprpc__GgmlTensor *t)
{
	uint64_t n;
	int64_t blck;

	if (t->type >= GGML_TYPE_COUNT || t->n_ne != 4 || t->n_nb != 4 || !ggml_type_size((enum ggml_type)t->type))
		return 0;
	blck = ggml_blck_size((enum ggml_type)t->type);
	for (int i = 0; i < 4; i++)
		if (t->ne[i] <= 0 || t->ne[i] > (1 << 26) || t->nb[i] > FZ_SIZED_MAX)
			return 0;
	n = (uint64_t)(t->ne[0] / blck) * ggml_type_size((enum ggml_type)t->type);
	for (int i = 1; i < 4; i++)
		n += (uint64_t)(t->ne[i] - 1) * t->nb[i];
	return n;
}

/* A guard-paged buffer for each handle the message names, as large as its
 * tensors reach (placed ones: views share their source's placement). */
static void sized_setup(const Pprpc__GgmlGraphCreate *m)
{
	size_t ps = (size_t)sysconf(_SC_PAGESIZE);
	uint64_t need[FZ_NSIZED] = { 0 }, total = 0;

	fz.nsized = 0;
	for (size_t i = 0; i < m->n_tensors; i++) {
		const Pprpc__GgmlTensor *t = m->tensors[i];
		uint64_t r = reach(t);
		int k;

		if (t->view_src >= 0 || !t->buffer || !r || t->offset > FZ_SIZED_MAX)
			continue;
		for (k = 0; k < fz.nsized && fz.sized_handle[k] != t->buffer; k++)
			;
		if (k == fz.nsized) {
			if (k == FZ_NSIZED)
				continue;
			fz.sized_handle[fz.nsized++] = t->buffer;
		}
		if (t->offset + r > need[k])
			need[k] = t->offset + r;
	}
	for (int k = 0; k < fz.nsized; k++) {
		size_t n = (size_t)((need[k] + ps - 1) / ps * ps);
		uint8_t *p;

		fz.sized[k] = NULL;
		fz.sized_map[k] = NULL;
		if (!n || total + n > FZ_SIZED_MAX)
			continue;
		p = mmap(NULL, n + 2 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		CHECK(p != MAP_FAILED);
		CHECK(mprotect(p + ps, n, PROT_READ | PROT_WRITE) == 0);
		fz.sized_map[k] = p;
		fz.sized_len[k] = n + 2 * ps;
		fz.sized[k] = ggml_backend_cpu_buffer_from_ptr(p + ps, n);
		total += n;
	}
}

static void sized_fill(const Pprpc__GgmlGraphCreate *m, uint8_t seed)
{
	for (int k = 0; k < fz.nsized; k++) {
		int32_t *p;

		if (!fz.sized[k])
			continue;
		p = ggml_backend_buffer_get_base(fz.sized[k]);
		/* small values as both i32 (indices: 0..9, in range of any real
		 * graph's tables; -1 among them from seed 0x40, which a guard must
		 * catch) and f32 bit patterns (tiny, finite) */
		for (size_t i = 0; i < ggml_backend_buffer_get_size(fz.sized[k]) / sizeof(int32_t); i++)
			p[i] = (int32_t)((i * (seed | 1u)) % 10) - ((seed & 0x40) && i % 13 == 0);
	}
	/* the graph's integer inputs (token ids, positions, KV slots, expert
	 * ids): 0, in range of every table, so the run goes on through the
	 * kernels; with seed bit 0x40 a -1 first, for the guards */
	for (size_t i = 0; i < m->n_tensors; i++) {
		const Pprpc__GgmlTensor *t = m->tensors[i];
		uint64_t r = reach(t);

		if (t->op != GGML_OP_NONE || t->view_src >= 0 || (t->type != GGML_TYPE_I32 && t->type != GGML_TYPE_I64) || !r)
			continue;
		for (int k = 0; k < fz.nsized; k++) {
			uint8_t *b;

			if (fz.sized_handle[k] != t->buffer || !fz.sized[k] ||
			    t->offset + r > ggml_backend_buffer_get_size(fz.sized[k]))
				continue;
			b = (uint8_t *)ggml_backend_buffer_get_base(fz.sized[k]) + t->offset;
			memset(b, 0, r);
			if (seed & 0x40)
				memset(b, 0xff, t->type == GGML_TYPE_I64 ? 8 : 4);
		}
	}
}

static void sized_free(void)
{
	for (int k = 0; k < fz.nsized; k++)
		if (fz.sized[k]) {
			ggml_backend_buffer_free(fz.sized[k]);
			munmap(fz.sized_map[k], fz.sized_len[k]);
		}
	fz.nsized = 0;
}

/* ---- the custom mutator (libFuzzer only) ----------------------------------------- */

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size) __attribute__((weak));
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

static uint32_t xs(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* One field of one tensor (or the node list) moved by a small step. */
static void nudge(Pprpc__GgmlGraphCreate *m, uint32_t *s)
{
	Pprpc__GgmlTensor *t = m->tensors[xs(s) % m->n_tensors];
	static const int32_t steps[] = { -1, 1, -2, 2, 4, -4, 32, -32 };
	int32_t step = steps[xs(s) % 8];
	unsigned d = xs(s) % 4;

	switch (xs(s) % 10) {
	case 0: if (t->n_ne == 4) t->ne[d] += step; break;
	case 1: if (t->n_ne == 4) t->ne[d] = xs(s) % 2 ? t->ne[d] * 2 : t->ne[d] / 2; break;
	case 2: if (t->n_nb == 4) t->nb[d] += (uint64_t)(int64_t)(step * (int32_t)ggml_type_size((enum ggml_type)(t->type % GGML_TYPE_COUNT))); break;
	case 3: if (t->n_nb == 4) t->nb[d] = xs(s) % 2 ? 0 : t->nb[d] * 2; break;
	case 4: t->offset += (uint64_t)(int64_t)(step * 32); break;
	case 5: t->view_offs += (uint64_t)(int64_t)(step * 4); break;
	case 6: if (t->op_params.len >= 4) ((int32_t *)t->op_params.data)[xs(s) % (t->op_params.len / 4)] += step; break;
	case 7: if (t->n_src) t->src[xs(s) % t->n_src] = (int32_t)(xs(s) % (m->n_tensors + 1)) - 1; break;
	case 8: t->flags ^= 1 << (xs(s) % 4); break;
	case 9: if (m->n_nodes > 1) m->n_nodes--; break;
	}
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
	ProtobufCMessage *pm = NULL;
	Pprpc__GgmlGraphCreate *m;
	uint32_t s = seed | 1u;
	size_t n;

	if (size < 2 || (data[0] & 1) || xs(&s) % 5 == 0 ||
	    meta_unpack(&pprpc__ggml_graph_create__descriptor, data + 2, size - 2, &pm) < 0)
		return LLVMFuzzerMutate ? LLVMFuzzerMutate(data, size, max_size) : size;
	m = (Pprpc__GgmlGraphCreate *)pm;
	if (m->n_tensors)
		for (int k = 1 + (int)(xs(&s) % 3); k > 0; k--)
			nudge(m, &s);
	n = meta_size(&m->base);
	if (n + 2 <= max_size) {
		meta_pack(&m->base, data + 2);
		size = n + 2;
	}
	meta_free(pm);
	return size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ProtobufCMessage *pm = NULL;

	if (size < 2)
		return 0;
	fz_init();
	fz.inputs++;
	fill_buffers(data[1]);
	if (data[0] & 1) {
		from_recipe(data, size);
		return 0;
	}
	if (meta_unpack(&pprpc__ggml_graph_create__descriptor, data + 2, size - 2, &pm) < 0)
		return 0;
	if (data[0] & 4) {
		sized_setup((const Pprpc__GgmlGraphCreate *)pm);
		sized_fill((const Pprpc__GgmlGraphCreate *)pm, data[1]);
	}
	exercise((const Pprpc__GgmlGraphCreate *)pm, data[1], data[0] & 2);
	sized_free();
	meta_free(pm);
	return 0;
}
