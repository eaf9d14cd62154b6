/*
 * tests/fuzz/fuzz_graph.c — libFuzzer target for graph validation and
 * planning (graph_create) against real buffers, and for the execution of
 * whatever it accepts.
 *
 * graph_create is the daemon's only defence before GRAPH_RUN, which does no
 * checking at all: kernels write through the resolved data pointers.  So an
 * accepted graph is run here, synchronously on the CPU device, with every
 * byte of its buffers and arena poisoned except the extents of its tensors:
 * a kernel that reads or writes outside what the validator allowed is an
 * ASan report.  Independently of ASan, each accepted tensor must lie inside
 * its buffer or the arena.
 *
 * Input layout:
 *   byte 0  bit 0: 1 = structured graph (below), 0 = the rest is a packed
 *           GraphCreate (meta_unpack, as received); bits 1-2: buffer fill
 *           (zeros / small i32 ids / small floats / random bytes)
 *   byte 1  seed of the random fill
 *   rest    as selected
 *
 * In a decoded GraphCreate, a tensor's buffer 1..64 names static buffer
 * (v - 1) % FZ_NBUF; any other value is used as is (garbage handle).
 *
 * The structured decoder builds graphs that are mostly valid: each node
 * picks an op, draws small dimensions, creates sources that fit the op's
 * shape rules (fresh tensors placed in a buffer, a view or scratch, with
 * contiguous, transposed or padded strides — or an earlier tensor of the
 * same shape), takes the destination from kern_op_infer and places it
 * (scratch, buffer, in place).  Then up to three mutations break one field
 * each (dimension, stride, offset, dtype, view, handle, index, parameter),
 * so validation is hit just beside the accepted set.
 *
 * Bounds of the harness (documented in fuzz_daemon.h): scratch space over
 * FZ_MAX_SCRATCH is not submitted, and an accepted graph is run only when
 * its work estimate is below FZ_MAX_WORK element operations.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/meta.h"
#include "tests/fuzz/fuzz_daemon.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- input reader ------------------------------------------------------------ */

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

static uint32_t rd16(struct rd *r)
{
	uint32_t v = rd8(r);

	return v | (uint32_t)rd8(r) << 8;
}

static uint32_t rd32(struct rd *r)
{
	uint32_t v = rd16(r);

	return v | rd16(r) << 16;
}

/* A dimension: mostly 1..8, sometimes up to 512. */
static int64_t rd_dim(struct rd *r)
{
	uint8_t b = rd8(r);

	if (b >= 0xf0)
		return 1 + rd16(r) % 512;
	return 1 + b % 8;
}

/* ---- structured builder ---------------------------------------------------------- */

#define GB_MAX_T 48
#define GB_MAX_N 10

struct gb {
	const struct fz *fz;
	Pprpc__GraphCreate m;
	Pprpc__Tensor t[GB_MAX_T];
	Pprpc__Tensor *tp[GB_MAX_T];
	int64_t ne[GB_MAX_T][PPRPC_MAX_DIMS];
	uint64_t nb[GB_MAX_T][PPRPC_MAX_DIMS];
	struct kern_tensor kt[GB_MAX_T];
	uint64_t ext[GB_MAX_T];
	int bufidx[GB_MAX_T];         /* -1: not buffer-backed */
	Pprpc__Node n[GB_MAX_N];
	Pprpc__Node *np[GB_MAX_N];
	int32_t src[GB_MAX_N][PPRPC_MAX_SRC];
	float f[GB_MAX_N][PPRPC_OP_MAX_F];
	int32_t i[GB_MAX_N][PPRPC_OP_MAX_I];
	uint64_t bump[FZ_NBUF];       /* next free offset per buffer */
	int nt, nn;
};

static const float f_table[16] = { 1.0f, 0.5f, 0.0f, 1e-6f, 10000.0f, 0.125f, -1.0f, 2.0f,
				   1e-5f, 0.25f, 3.0f, -0.5f, 1.0f, 1.0f, 0.0f, 0.0f };

static float rd_float(struct rd *r)
{
	uint8_t b = rd8(r);

	if (b == 0xff)
		return NAN;
	if (b == 0xfe)
		return INFINITY;
	if (b == 0xfd) {
		uint32_t u = rd32(r);
		float f;

		memcpy(&f, &u, sizeof(f));
		return f;
	}
	return f_table[b % 16];
}

static int dtype_size_align(int dtype)
{
	const struct kern_dtype_traits *tr = kern_dtype(dtype);

	return tr ? (int)KERN_ALIGN(tr) : 1;
}

/* Give tensor k a layout for shape ne / dtype: contiguous, transposed
 * (dims 0 and 1 swapped in memory) or with padded rows. */
static void layout(struct gb *b, struct rd *r, int k, int dtype, const int64_t ne[4])
{
	struct kern_tensor *t = &b->kt[k];
	uint8_t sel = rd8(r) % 8;

	memset(t, 0, sizeof(*t));
	if (kern_tensor_init_contig(t, dtype, ne) < 0) {
		t->dtype = dtype;
		memcpy(t->ne, ne, sizeof(t->ne));
		for (int d = 0; d < 4; d++)
			t->nb[d] = 4;
		return;
	}
	if (sel == 5 && dtype != PPRPC_Q8_0 && ne[1] > 1) {
		/* transposed: lay out [ne1, ne0, ...] contiguously, view it swapped */
		int64_t sw[4] = { ne[1], ne[0], ne[2], ne[3] };
		struct kern_tensor c;

		if (kern_tensor_init_contig(&c, dtype, sw) == 0) {
			t->nb[0] = c.nb[1];
			t->nb[1] = c.nb[0];
		}
	} else if (sel == 6) {
		/* padded rows */
		t->nb[1] += (uint64_t)(1 + rd8(r) % 4) * (uint64_t)dtype_size_align(dtype) * 8;
		t->nb[2] = t->nb[1] * (uint64_t)ne[1];
		t->nb[3] = t->nb[2] * (uint64_t)ne[2];
	}
}

/* Add tensor k to the message; place it per the input: a static buffer at a
 * bump offset, scratch, a view of an earlier tensor large enough, or a
 * garbage handle.  force_buf: must be buffer-backed (SET_ROWS tables). */
static int place(struct gb *b, struct rd *r, int force_buf)
{
	int k = b->nt;
	Pprpc__Tensor *mt = &b->t[k];
	struct kern_tensor *t = &b->kt[k];
	uint8_t sel = rd8(r);
	uint64_t ext = 0;

	pprpc__tensor__init(mt);
	mt->dtype = (uint32_t)t->dtype;
	mt->n_ne = PPRPC_MAX_DIMS;
	mt->ne = b->ne[k];
	mt->n_nb = PPRPC_MAX_DIMS;
	mt->nb = b->nb[k];
	memcpy(b->ne[k], t->ne, sizeof(t->ne));
	memcpy(b->nb[k], t->nb, sizeof(t->nb));
	b->bufidx[k] = -1;
	if (kern_tensor_check(t) == 0)
		kern_tensor_extent(t, &ext);
	b->ext[k] = ext;
	if (force_buf)
		sel = (uint8_t)(sel & ~7u);
	switch (sel % 8) {
	case 0: case 1: case 2: case 3: {
		/* buffer-backed, 64-byte aligned bump placement (first buffer with room) */
		int first = (sel >> 3) % FZ_NBUF;

		for (int j = 0; j < FZ_NBUF; j++) {
			int bi = (first + j) % FZ_NBUF;
			uint64_t off = (b->bump[bi] + 63) & ~63ull;

			if (ext <= b->fz->buf[bi]->size && off <= b->fz->buf[bi]->size - ext) {
				mt->buffer = b->fz->buf[bi]->handle;
				mt->offset = off;
				b->bump[bi] = off + ext;
				b->bufidx[k] = bi;
				break;
			}
		}
		break;
	}
	case 4: case 5:
		break;  /* scratch */
	case 6:
		/* a view of the latest earlier tensor that can hold it */
		for (int j = k - 1; j >= 0; j--) {
			if (b->ext[j] >= ext && b->ext[j]) {
				uint64_t room = b->ext[j] - ext, al = (uint64_t)dtype_size_align(t->dtype);
				uint64_t off = room ? (rd8(r) * al) % (room + 1) : 0;

				mt->view_of = (uint32_t)j + 1;
				mt->offset = off - off % al;
				b->bufidx[k] = b->bufidx[j];
				break;
			}
		}
		break;
	default:
		mt->buffer = ((uint64_t)rd32(r) << 32) | rd32(r);
		mt->offset = rd16(r);
		break;
	}
	b->tp[k] = mt;
	b->nt++;
	return k;
}

/* A fresh tensor of dtype / shape, or an earlier one that matches. */
static int src_tensor(struct gb *b, struct rd *r, int dtype, const int64_t ne[4])
{
	uint8_t sel = rd8(r);

	if ((sel & 0xc0) == 0xc0) {
		for (int j = b->nt - 1; j >= 0; j--)
			if (b->kt[j].dtype == dtype && !memcmp(b->kt[j].ne, ne, sizeof(b->kt[j].ne)))
				return j;
	}
	if (b->nt >= GB_MAX_T)
		return b->nt - 1;
	layout(b, r, b->nt, dtype, ne);
	return place(b, r, 0);
}

static int pick_float_dtype(struct rd *r)
{
	static const int dts[4] = { PPRPC_F32, PPRPC_F16, PPRPC_BF16, PPRPC_F32 };

	return dts[rd8(r) % 4];
}

/* Build node number b->nn; returns 0, or -1 when out of room. */
static int build_node(struct gb *b, struct rd *r)
{
	int k = b->nn, op, nsrc, s[PPRPC_MAX_SRC] = { 0 };
	Pprpc__Node *mn = &b->n[k];
	struct pprpc_op_params p;
	struct kern_tensor out;
	const struct kern_tensor *sp[PPRPC_MAX_SRC];
	int64_t ne[4], ne2[4];
	uint8_t sel;
	int dt, dst;

	if (k >= GB_MAX_N || b->nt + PPRPC_MAX_SRC + 1 > GB_MAX_T)
		return -1;
	memset(&p, 0, sizeof(p));
	op = 1 + rd8(r) % (PPRPC_OP_COUNT - 1);
	nsrc = kern_op_nsrc(op);
	for (int d = 0; d < 4; d++)
		ne[d] = d < 2 ? rd_dim(r) : (rd8(r) % 4 == 0 ? rd_dim(r) : 1);
	sel = rd8(r);
	/* Chain: src0 is the previous node's destination (its shape wins). */
	if ((sel & 3) == 0 && k > 0 && b->kt[b->np[k - 1]->dst].dtype == PPRPC_F32)
		memcpy(ne, b->kt[b->np[k - 1]->dst].ne, sizeof(ne));
	switch (op) {
	case PPRPC_OP_ADD:
	case PPRPC_OP_MUL:
		s[0] = src_tensor(b, r, PPRPC_F32, ne);
		for (int d = 0; d < 4; d++)
			ne2[d] = rd8(r) & 1 ? ne[d] : 1;
		s[1] = src_tensor(b, r, pick_float_dtype(r), ne2);
		break;
	case PPRPC_OP_SWIGLU:
		s[0] = src_tensor(b, r, PPRPC_F32, ne);
		s[1] = src_tensor(b, r, PPRPC_F32, ne);
		break;
	case PPRPC_OP_SCALE:
		s[0] = src_tensor(b, r, PPRPC_F32, ne);
		p.f[0] = rd_float(r);
		p.f[1] = rd_float(r);
		break;
	case PPRPC_OP_CPY:
		s[0] = src_tensor(b, r, pick_float_dtype(r), ne);
		p.i[0] = pick_float_dtype(r);
		break;
	case PPRPC_OP_RMS_NORM:
	case PPRPC_OP_L2_NORM:
		s[0] = src_tensor(b, r, PPRPC_F32, ne);
		p.f[0] = rd8(r) & 1 ? 1e-6f : rd_float(r);
		break;
	case PPRPC_OP_SOFTMAX:
		s[0] = src_tensor(b, r, PPRPC_F32, ne);
		p.f[0] = rd8(r) & 1 ? 1.0f : rd_float(r);
		p.i[0] = rd8(r) & 1;
		p.i[1] = p.i[0] ? rd8(r) % 4 : 0;
		break;
	case PPRPC_OP_MUL_MAT: {
		int64_t K = ne[0], m2 = 1 + rd8(r) % 2, m3 = 1 + rd8(r) % 2;
		int64_t w[4], x[4];

		dt = rd8(r) % 5;
		dt = dt == 4 ? PPRPC_Q8_0 : dt == 3 ? PPRPC_F32 : dt;
		if (dt == PPRPC_Q8_0)
			K = 32 * (1 + rd8(r) % 2);
		w[0] = K, w[1] = ne[1], w[2] = ne[2], w[3] = ne[3];
		x[0] = K, x[1] = rd_dim(r), x[2] = ne[2] * m2, x[3] = ne[3] * m3;
		s[0] = src_tensor(b, r, dt, w);
		s[1] = src_tensor(b, r, PPRPC_F32, x);
		break;
	}
	case PPRPC_OP_GET_ROWS: {
		int64_t tab[4], ids[4];

		dt = rd8(r) % 5;
		dt = dt == 4 ? PPRPC_Q8_0 : dt == 3 ? PPRPC_F32 : dt;
		ids[0] = rd_dim(r), ids[1] = ne[2], ids[2] = ne[3], ids[3] = 1;
		tab[0] = dt == PPRPC_Q8_0 ? 32 : ne[0], tab[1] = ne[1];
		tab[2] = rd8(r) & 1 ? ids[1] : 1, tab[3] = rd8(r) & 1 ? ids[2] : 1;
		s[0] = src_tensor(b, r, dt, tab);
		s[1] = src_tensor(b, r, PPRPC_I32, ids);
		break;
	}
	case PPRPC_OP_SET_ROWS: {
		int64_t ids[4];

		ids[0] = ne[1], ids[1] = rd8(r) & 1 ? ne[2] : 1, ids[2] = rd8(r) & 1 ? ne[3] : 1, ids[3] = 1;
		s[0] = src_tensor(b, r, PPRPC_F32, ne);
		s[1] = src_tensor(b, r, PPRPC_I32, ids);
		p.i[0] = (int32_t)(1 + rd8(r) % 8);
		p.i[1] = rd8(r) % 3;
		break;
	}
	case PPRPC_OP_CONCAT: {
		int dim = rd8(r) % 4;

		dt = pick_float_dtype(r);
		memcpy(ne2, ne, sizeof(ne2));
		ne2[dim] = rd_dim(r);
		s[0] = src_tensor(b, r, dt, ne);
		s[1] = src_tensor(b, r, dt, ne2);
		p.i[0] = dim;
		break;
	}
	case PPRPC_OP_ROPE: {
		int64_t x[4] = { 2 * (1 + rd8(r) % 8), ne[1], ne[2], 1 }, pos[4] = { ne[2], 1, 1, 1 };

		s[0] = src_tensor(b, r, PPRPC_F32, x);
		s[1] = src_tensor(b, r, PPRPC_I32, pos);
		p.i[0] = rd8(r) & 1 ? PPRPC_ROPE_NEOX : PPRPC_ROPE_NORMAL;
		p.i[1] = (int32_t)(2 * (1 + rd8(r) % (x[0] / 2)));
		p.f[0] = rd8(r) & 3 ? 10000.0f : rd_float(r);
		p.f[1] = rd8(r) & 3 ? 1.0f : rd_float(r);
		break;
	}
	case PPRPC_OP_ATTENTION: {
		int64_t D = ne[0], nkvh = 1 + rd8(r) % 3, nh = nkvh * (1 + rd8(r) % 3);
		int64_t nkv = 1 + rd8(r) % 8, nq = 1 + rd8(r) % nkv;
		int64_t q[4] = { D, nh, nq, 1 }, kv[4] = { D, nkvh, nkv, 1 };

		dt = rd8(r) & 1 ? PPRPC_F16 : PPRPC_F32;
		s[0] = src_tensor(b, r, PPRPC_F32, q);
		s[1] = src_tensor(b, r, dt, kv);
		s[2] = src_tensor(b, r, dt, kv);
		p.f[0] = rd8(r) & 3 ? 0.5f : rd_float(r);
		p.i[0] = (int32_t)(rd8(r) % (nkv - nq + 1));
		break;
	}
	case PPRPC_OP_GATED_DELTA_NET: {
		int64_t dk = ne[0], dv = ne[1], hk = 1 + rd8(r) % 2, hv = hk * (1 + rd8(r) % 2);
		int64_t T = 1 + rd8(r) % 4, B = 1 + rd8(r) % 2, G = rd8(r) & 1 ? 1 : dk;
		int64_t qk[4] = { dk, hk, T, B }, v[4] = { dv, hv, T, B }, g[4] = { G, hv, T, B };
		int64_t be[4] = { 1, hv, T, B }, st[4] = { dk, dv, hv, B };

		s[0] = src_tensor(b, r, PPRPC_F32, qk);
		s[1] = src_tensor(b, r, PPRPC_F32, qk);
		s[2] = src_tensor(b, r, PPRPC_F32, v);
		s[3] = src_tensor(b, r, PPRPC_F32, g);
		s[4] = src_tensor(b, r, PPRPC_F32, be);
		s[5] = src_tensor(b, r, PPRPC_F32, st);
		p.f[0] = rd8(r) & 3 ? 0.5f : rd_float(r);
		p.i[0] = rd8(r) & 1;
		p.f[1] = p.i[0] ? 1e-6f : 0.0f;
		break;
	}
	case PPRPC_OP_ARGMAX:
	default:
		/* unary ops: one f32 source */
		for (int j = 0; j < nsrc && j < PPRPC_MAX_SRC; j++)
			s[j] = src_tensor(b, r, PPRPC_F32, ne);
		break;
	}
	for (int j = 0; j < nsrc; j++)
		sp[j] = &b->kt[s[j]];

	/* Destination: what the op produces, placed per the input (in place
	 * when the op allows it and the layouts match). */
	sel = rd8(r);
	memset(&out, 0, sizeof(out));
	if (kern_op_infer(op, &p, sp, nsrc, &out, NULL, 0) < 0)
		out = b->kt[s[0]];  /* an invalid node: keep going */
	if ((sel & 7) == 7 && kern_op_inplace_ok(op) && out.dtype == b->kt[s[0]].dtype &&
	    !memcmp(out.ne, b->kt[s[0]].ne, sizeof(out.ne)) && !memcmp(out.nb, b->kt[s[0]].nb, sizeof(out.nb))) {
		dst = s[0];
	} else {
		if (b->nt >= GB_MAX_T)
			return -1;
		b->kt[b->nt] = out;
		dst = place(b, r, op == PPRPC_OP_SET_ROWS || (sel & 7) == 6);
	}
	pprpc__node__init(mn);
	mn->op = (uint32_t)op;
	mn->dst = dst;
	for (int j = 0; j < nsrc; j++)
		b->src[k][j] = s[j];
	mn->n_src = (size_t)nsrc;
	mn->src = b->src[k];
	memcpy(b->f[k], p.f, sizeof(p.f));
	memcpy(b->i[k], p.i, sizeof(p.i));
	mn->n_fparams = PPRPC_OP_MAX_F;
	mn->fparams = b->f[k];
	mn->n_iparams = PPRPC_OP_MAX_I;
	mn->iparams = b->i[k];
	b->np[k] = mn;
	b->nn++;
	return 0;
}

/* Break one field. */
static void mutate(struct gb *b, struct rd *r)
{
	uint8_t what = rd8(r), idx = rd8(r);
	Pprpc__Tensor *t = b->nt ? b->tp[idx % b->nt] : NULL;
	Pprpc__Node *n = b->nn ? b->np[idx % b->nn] : NULL;
	int d = rd8(r) % 4;
	int64_t delta = (int8_t)rd8(r);

	switch (what % 12) {
	case 0: if (t) t->ne[d] += delta; break;
	case 1: if (t) t->nb[d] += (uint64_t)delta; break;
	case 2: if (t) t->nb[d] = (uint64_t)rd32(r) << (rd8(r) % 33); break;
	case 3: if (t) t->offset += (uint64_t)delta; break;
	case 4: if (t) t->dtype = rd8(r) % 6; break;
	case 5: if (t) t->view_of = rd8(r) % (b->nt + 2); break;
	case 6: if (t) t->buffer = fz_map_buffer(b->fz, rd8(r) % 6); break;
	case 7: if (n && n->n_src) n->src[rd8(r) % n->n_src] = (int8_t)rd8(r) % (b->nt + 1); break;
	case 8: if (n) n->dst = (int8_t)rd8(r) % (b->nt + 1); break;
	case 9: if (n) n->fparams[rd8(r) % PPRPC_OP_MAX_F] = rd_float(r); break;
	case 10: if (n) n->iparams[rd8(r) % PPRPC_OP_MAX_I] = (int32_t)delta; break;
	default: if (t) t->ne[d] = (int64_t)rd32(r) << (rd8(r) % 32); break;
	}
}

static void build(struct gb *b, const struct fz *fz, struct rd *r)
{
	int nodes, muts;
	uint8_t ctl;

	memset(b, 0, sizeof(*b));
	b->fz = fz;
	pprpc__graph_create__init(&b->m);
	ctl = rd8(r);
	nodes = 1 + ctl % 4;
	muts = (ctl >> 4) % 4;
	for (int k = 0; k < nodes; k++)
		if (build_node(b, r) < 0)
			break;
	for (int k = 0; k < muts; k++)
		mutate(b, r);
	b->m.device = ctl == 0xff ? rd8(r) : 0;
	b->m.n_tensors = (size_t)b->nt;
	b->m.tensors = b->tp;
	b->m.n_nodes = (size_t)b->nn;
	b->m.nodes = b->np;
}

/* ---- running -------------------------------------------------------------------- */

static uint32_t lcg(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static void fill(uint8_t *p, uint64_t n, int mode, uint32_t seed)
{
	switch (mode) {
	case 0:
		memset(p, 0, n);
		break;
	case 1: /* small i32: valid row ids, tiny denormal floats */
		for (uint64_t i = 0; i + 4 <= n; i += 4) {
			int32_t v = (int32_t)((i / 4) % 4);

			memcpy(p + i, &v, 4);
		}
		break;
	case 2: /* small floats */
		for (uint64_t i = 0; i + 4 <= n; i += 4) {
			float v = (float)((int)((i / 4) % 17) - 8) * 0.25f;

			memcpy(p + i, &v, 4);
		}
		break;
	default: /* anything: NaN, Inf, huge ids */
		for (uint64_t i = 0; i < n; i++)
			p[i] = (uint8_t)lcg(&seed);
		break;
	}
}

/* Is [p, p+ext) inside [base, base+size)? */
static int inside(const uint8_t *p, uint64_t ext, const uint8_t *base, uint64_t size)
{
	return p >= base && (uint64_t)(p - base) <= size && ext <= size - (uint64_t)(p - base);
}

/* A graph run's completion (the CPU stream calls it before its submit
 * returns). */
struct run_result {
	int done;
	int status;
	char err[256];
};

static void run_done(void *arg, int status, const char *why)
{
	struct run_result *r = arg;

	r->done++;
	r->status = status;
	snprintf(r->err, sizeof(r->err), "%s", why ? why : "");
}

/* Returns 1 when not run (too much work), else the run's result. */
static int check_and_run(struct fz *fz, struct graph *g, int mode, uint32_t seed)
{
	struct run_result res = { 0 };
	struct stream s = { 0 };
	char err[256] = "";
	int rc;

	/* Every tensor the validator accepted lies in a buffer it holds or in
	 * the arena. */
	for (int i = 0; i < g->ntensors; i++) {
		const struct kern_tensor *t = &g->t[i];
		uint64_t ext = 0;
		int ok = 0;

		FZ_CHECK(kern_tensor_check(t) == 0 && kern_tensor_extent(t, &ext) == 0);
		if (g->arena && inside(t->data, ext, g->arena, g->arena_size))
			ok = 1;
		for (int j = 0; j < g->nbufs && !ok; j++)
			ok = inside(t->data, ext, g->bufs[j]->ptr, g->bufs[j]->size);
		FZ_CHECK(ok);
	}
	if (fz_graph_work(g) > FZ_MAX_WORK)
		return 1;

	/* Poison everything the graph may reach, then open exactly the
	 * tensors' extents. */
	for (int j = 0; j < g->nbufs; j++) {
		fill(g->bufs[j]->ptr, g->bufs[j]->size, mode, seed);
		ASAN_POISON_MEMORY_REGION(g->bufs[j]->ptr, fz_page_round(g->bufs[j]->size));
	}
	if (g->arena) {
		fill(g->arena, g->arena_size, mode, seed);
		ASAN_POISON_MEMORY_REGION(g->arena, fz_page_round(g->arena_size));
	}
	for (int i = 0; i < g->ntensors; i++) {
		uint64_t ext = 0;

		kern_tensor_extent(&g->t[i], &ext);
		ASAN_UNPOISON_MEMORY_REGION(g->t[i].data, ext);
	}

	/* As a GRAPH_RUN's exec does, on a stream of its own. */
	rc = device_graph_submit(g->dev, &s, g, run_done, &res, err, sizeof(err));
	FZ_CHECK(rc < 0 ? res.done == 0 : res.done == 1);
	if (rc == 0) {
		rc = res.status;
		snprintf(err, sizeof(err), "%s", res.err);
	}
	device_stream_release(g->dev, &s);
	/* A validated graph may fail at run time only on row ids (or memory). */
	if (rc != 0 && rc != PPRPC_ERANGE && rc != PPRPC_ENOMEM) {
		fprintf(stderr, "graph run failed (%d): %s\n", rc, err);
		abort();
	}
	if (rc < 0)
		FZ_CHECK(err[0]);

	for (int j = 0; j < g->nbufs; j++)
		fz_guard(g->bufs[j]->ptr, g->bufs[j]->size);
	if (g->arena)
		fz_unguard(g->arena, g->arena_size);
	return rc;
}

/* FUZZ_STATS=1: how many inputs were accepted / run / failed at run time,
 * per decoder, printed at exit (to check the structured half stays mostly
 * valid). */
static unsigned long st_in[2], st_ok[2], st_run[2], st_rfail[2];

static void print_stats(void)
{
	for (int i = 0; i < 2; i++)
		fprintf(stderr, "fuzz_graph %s: %lu inputs, %lu accepted, %lu run, %lu failed at run time\n",
			i ? "structured" : "unpacked", st_in[i], st_ok[i], st_run[i], st_rfail[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gb b;
	static int stats = -1;
	struct fz *fz = fz_get();
	ProtobufCMessage *pm = NULL;
	const Pprpc__GraphCreate *m;
	struct graph *g = NULL;
	uint64_t allocated = fz->d.dev[0]->allocated;
	char err[256] = "";
	int mode, rc;
	uint32_t seed;

	if (stats < 0 && (stats = getenv("FUZZ_STATS") != NULL))
		atexit(print_stats);
	if (size < 2)
		return 0;
	st_in[data[0] & 1]++;
	mode = (data[0] >> 1) & 3;
	seed = data[1];
	if (data[0] & 1) {
		struct rd r = { data + 2, size - 2 };

		build(&b, fz, &r);
		m = &b.m;
	} else {
		Pprpc__GraphCreate *um;

		if (meta_unpack(&pprpc__graph_create__descriptor, data + 2, size - 2, &pm) < 0)
			return 0;
		um = (Pprpc__GraphCreate *)pm;
		for (size_t i = 0; i < um->n_tensors; i++)
			um->tensors[i]->buffer = fz_map_buffer(fz, um->tensors[i]->buffer);
		m = um;
	}
	if (!fz_scratch_ok(m))
		goto out;

	rc = graph_create(&fz->d, &fz->owner->own, m, &g, err, sizeof(err));
	if (rc < 0) {
		FZ_CHECK(rc == PPRPC_ENOMEM || err[0]); /* every refusal says why */
		goto out;
	}
	FZ_CHECK(g && g->refs == 1 && g->ntensors == (int)m->n_tensors && g->nnodes == (int)m->n_nodes);
	st_ok[data[0] & 1]++;
	rc = check_and_run(fz, g, mode, seed);
	st_run[data[0] & 1] += rc != 1;
	st_rfail[data[0] & 1] += rc < 0;

	/* As GRAPH_CREATE / GRAPH_FREE do. */
	FZ_CHECK(graph_register(&fz->d, &fz->owner->own, g, err, sizeof(err)) == 0);
	FZ_CHECK(graph_get(&fz->d, &fz->owner->own, g->handle) == g);
	graph_retire(&fz->d, g);
out:
	meta_free(pm);
	/* Nothing outlives the input: buffer references and device memory are
	 * back where they were. */
	for (int i = 0; i < FZ_NBUF; i++)
		FZ_CHECK(fz->buf[i]->refs == 1);
	FZ_CHECK(fz->d.dev[0]->allocated == allocated);
	FZ_CHECK(fz->owner->own.graphs == NULL);
	return 0;
}
