/*
 * daemon/backend/ggml/ggml_wire.c — step 1 of a wire graph's validation: its
 * structure (doc/ggml.md "Validation").
 *
 * Everything a ggml call would assert on, or that would let a kernel touch
 * memory the graph does not own, is refused here with the tensor named,
 * before any ggml function sees the graph.  Only ggml's type tables are
 * read, and only for a type already known to be in range.
 *
 * The rules, and why:
 *   - type: in range, not removed (removed types have block size 0, and
 *     ggml_row_size divides by it);
 *   - ne: 4 entries, each >= 0, ne[0] a multiple of the block size (ggml's
 *     row size asserts it), every size below GGE_MAX_BYTES;
 *   - nb: 4 entries; for block types nb[0] is the block's size (ggml's extent
 *     formula and its kernels assume it); every stride of a dimension with
 *     more than one element is a multiple of the type's natural alignment
 *     (element, or the largest power of two dividing the block, at most 8),
 *     as are the data offsets — ggml never makes others, and misaligned
 *     loads fault on GPUs;
 *   - extent: ggml_nbytes' formula, computed overflow-safe; a non-view lies
 *     inside its buffer (so does its dense size, which bounds its element
 *     count even with strides of 0);
 *   - views: the source precedes; chains collapse to the base as ggml does;
 *     ggml's own rule dense + offset <= nbytes(base) holds, and so does
 *     extent + offset <= nbytes(base) (memory);
 *   - sources precede their users (no cycles, no use before definition);
 *     node positions strictly increase (each node once, sources computed
 *     first); a node has an op;
 *   - op in range, op_params at most GGML_MAX_OP_PARAMS bytes, only known
 *     flags, names under GGML_MAX_NAME;
 *   - buffers resolve through the caller (this connection, this device).
 *
 * Codes: PPRPC_ETYPE (type), PPRPC_ESHAPE (ne/nb), PPRPC_ERANGE (an extent
 * outside its buffer or source), PPRPC_EGRAPH (topology), PPRPC_EHANDLE
 * (buffers, from the resolver), PPRPC_ETOOBIG (caps), PPRPC_EINVAL (other
 * fields).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "daemon/backend/ggml/ggml_engine.h"
#include "pprpc/types.h"

#define KNOWN_FLAGS (GGML_TENSOR_FLAG_INPUT | GGML_TENSOR_FLAG_OUTPUT | GGML_TENSOR_FLAG_PARAM | \
		     GGML_TENSOR_FLAG_LOSS | GGML_TENSOR_FLAG_COMPUTE)

const char *gge_wire_name(const Pprpc__GgmlTensor *t, size_t i, char *buf, size_t len)
{
	if (t && t->name && t->name[0])
		snprintf(buf, len, "#%zu '%.63s'", i, t->name);
	else
		snprintf(buf, len, "#%zu", i);
	return buf;
}

static bool type_ok(uint32_t type)
{
	return type < GGML_TYPE_COUNT && ggml_blck_size((enum ggml_type)type) > 0 &&
	       ggml_type_size((enum ggml_type)type) > 0;
}

/* Largest power of two dividing the type's block size, at most 8. */
static uint64_t type_align(enum ggml_type type)
{
	uint64_t ts = ggml_type_size(type), a = 1;

	while (a < 8 && ts % (a * 2) == 0)
		a *= 2;
	return a;
}

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *r)
{
	return !__builtin_mul_overflow(a, b, r) && *r <= GGE_MAX_BYTES;
}

static bool add_ok(uint64_t a, uint64_t b, uint64_t *r)
{
	return !__builtin_add_overflow(a, b, r) && *r <= GGE_MAX_BYTES;
}

/* ne, nb and the sizes they imply (p->extent, p->dense). */
static int check_shape(const Pprpc__GgmlTensor *t, const char *who, struct gge_wt *p, char *err, size_t errlen)
{
	enum ggml_type type = (enum ggml_type)t->type;
	uint64_t blck = (uint64_t)ggml_blck_size(type), ts = ggml_type_size(type), al = type_align(type);
	uint64_t nel = 1, v;
	bool empty = false;

	if (t->n_ne != GGML_MAX_DIMS || t->n_nb != GGML_MAX_DIMS) {
		snprintf(err, errlen, "tensor %s: ne and nb need %d entries each (got %zu, %zu)", who, GGML_MAX_DIMS,
			 t->n_ne, t->n_nb);
		return PPRPC_ESHAPE;
	}
	for (int k = 0; k < GGML_MAX_DIMS; k++) {
		if (t->ne[k] < 0 || !mul_ok(nel, (uint64_t)t->ne[k], &nel)) {
			snprintf(err, errlen, "tensor %s: ne[%d] = %" PRId64 " is negative or too large", who, k,
				 t->ne[k]);
			return t->ne[k] < 0 ? PPRPC_ESHAPE : PPRPC_ETOOBIG;
		}
		if (t->ne[k] == 0)
			empty = true;
	}
	if ((uint64_t)t->ne[0] % blck) {
		snprintf(err, errlen, "tensor %s: ne[0] = %" PRId64 " is not a multiple of %s's block of %" PRIu64,
			 who, t->ne[0], ggml_type_name(type), blck);
		return PPRPC_ESHAPE;
	}
	if (blck > 1 && t->nb[0] != ts) {
		snprintf(err, errlen, "tensor %s: nb[0] = %" PRIu64 " must be %s's block size %" PRIu64, who, t->nb[0],
			 ggml_type_name(type), ts);
		return PPRPC_ESHAPE;
	}
	for (int k = 0; k < GGML_MAX_DIMS; k++)
		if (t->ne[k] > 1 && t->nb[k] % al) {
			snprintf(err, errlen, "tensor %s: nb[%d] = %" PRIu64 " is not a multiple of %" PRIu64
				 " (%s alignment)", who, k, t->nb[k], al, ggml_type_name(type));
			return PPRPC_ESHAPE;
		}
	/* dense = ggml_row_size(type, ne0) * ne1 * ne2 * ne3 */
	if (!mul_ok((uint64_t)t->ne[0] / blck, ts, &p->dense) || !mul_ok(p->dense, (uint64_t)t->ne[1], &p->dense) ||
	    !mul_ok(p->dense, (uint64_t)t->ne[2], &p->dense) || !mul_ok(p->dense, (uint64_t)t->ne[3], &p->dense))
		goto too_big;
	/* extent: ggml_nbytes */
	p->extent = 0;
	if (!empty) {
		if (blck == 1)
			p->extent = ts;
		else if (!mul_ok((uint64_t)t->ne[0] / blck, t->nb[0], &p->extent))
			goto too_big;
		for (int k = blck == 1 ? 0 : 1; k < GGML_MAX_DIMS; k++)
			if (!mul_ok((uint64_t)(t->ne[k] - 1), t->nb[k], &v) || !add_ok(p->extent, v, &p->extent))
				goto too_big;
	}
	return 0;
too_big:
	snprintf(err, errlen, "tensor %s: its size overflows (ne %" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64 ")",
		 who, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
	return PPRPC_ETOOBIG;
}

static int check_fields(const Pprpc__GgmlTensor *t, size_t i, const char *who, char *err, size_t errlen)
{
	if (!type_ok(t->type)) {
		snprintf(err, errlen, "tensor %s: unknown or removed ggml type %u", who, t->type);
		return PPRPC_ETYPE;
	}
	if (t->op >= GGML_OP_COUNT) {
		snprintf(err, errlen, "tensor %s: unknown ggml op %u", who, t->op);
		return PPRPC_EUNSUPP;
	}
	if (t->op_params.len > GGML_MAX_OP_PARAMS) {
		snprintf(err, errlen, "tensor %s: %zu bytes of op_params (at most %d)", who, t->op_params.len,
			 GGML_MAX_OP_PARAMS);
		return PPRPC_EINVAL;
	}
	if (t->flags & ~KNOWN_FLAGS) {
		snprintf(err, errlen, "tensor %s: unknown flags 0x%x", who, (unsigned)t->flags);
		return PPRPC_EINVAL;
	}
	if (t->name && strnlen(t->name, GGML_MAX_NAME) >= GGML_MAX_NAME) {
		snprintf(err, errlen, "tensor #%zu: its name is longer than %d bytes", i, GGML_MAX_NAME - 1);
		return PPRPC_EINVAL;
	}
	if (t->n_src > GGML_MAX_SRC) {
		snprintf(err, errlen, "tensor %s: %zu sources (at most %d)", who, t->n_src, GGML_MAX_SRC);
		return PPRPC_EINVAL;
	}
	for (size_t k = 0; k < t->n_src; k++)
		/* One exception to "sources precede": ggml_cast makes a CPY node
		 * that names itself as its destination (src[1]), which ggml-cuda's
		 * copy reads; the CPY rule checks that case. */
		if (t->src[k] < -1 || (t->src[k] >= 0 && (size_t)t->src[k] >= i &&
				       !((size_t)t->src[k] == i && k == 1 && t->op == GGML_OP_CPY))) {
			snprintf(err, errlen, "tensor %s: source %zu (#%d) does not precede it", who, k, t->src[k]);
			return PPRPC_EGRAPH;
		}
	if (t->view_src < -1 || (t->view_src >= 0 && (size_t)t->view_src >= i)) {
		snprintf(err, errlen, "tensor %s: view source #%d does not precede it", who, t->view_src);
		return PPRPC_EGRAPH;
	}
	return 0;
}

/* Data offsets: every tensor's first byte naturally aligned (buffers are). */
static int check_align(const Pprpc__GgmlTensor *t, const char *who, uint64_t where, char *err, size_t errlen)
{
	uint64_t al = type_align((enum ggml_type)t->type);

	if (where % al) {
		snprintf(err, errlen, "tensor %s: its data at byte %" PRIu64 " is not %" PRIu64 "-aligned for %s", who,
			 where, al, ggml_type_name((enum ggml_type)t->type));
		return PPRPC_EINVAL;
	}
	return 0;
}

static int check_view(const Pprpc__GgmlTensor *t, const char *who, struct gge_wt *plan, size_t i, char *err,
		      size_t errlen)
{
	const struct gge_wt *src = &plan[t->view_src];
	struct gge_wt *p = &plan[i];
	const struct gge_wt *b = &plan[src->base];
	uint64_t end;

	/* ggml_new_tensor_impl: a view of a view is a view of its base. */
	p->base = src->base;
	if (!add_ok(t->view_offs, src->base == t->view_src ? 0 : src->offs, &p->offs))
		goto outside;
	if (p->dense && (!add_ok(p->dense, p->offs, &end) || end > b->extent))
		goto outside;
	if (p->extent && (!add_ok(p->extent, p->offs, &end) || end > b->extent))
		goto outside;
	p->wb = b->wb;
	p->offset = b->offset;
	return b->wb.buf ? check_align(t, who, b->offset + p->offs, err, errlen) : 0;
outside:
	snprintf(err, errlen, "tensor %s: view [%" PRIu64 ", +%" PRIu64 ") is outside its source #%d of %" PRIu64
		 " bytes", who, t->view_offs, p->extent > p->dense ? p->extent : p->dense, p->base, b->extent);
	return PPRPC_ERANGE;
}

static int check_memory(const Pprpc__GgmlTensor *t, const char *who, enum gge_mode mode, gge_resolve_fn resolve,
			void *arg, struct gge_wt *p, char *err, size_t errlen)
{
	int rc;

	if (t->view_offs) {
		snprintf(err, errlen, "tensor %s: view offset %" PRIu64 " without a view source", who, t->view_offs);
		return PPRPC_EINVAL;
	}
	if (!t->buffer) {
		if (mode == GGE_PROBE) {
			if (t->offset) {
				snprintf(err, errlen, "tensor %s: an offset without a buffer", who);
				return PPRPC_EINVAL;
			}
			return 0;
		}
		snprintf(err, errlen, "tensor %s: no buffer (every tensor of a graph needs memory)", who);
		return PPRPC_EINVAL;
	}
	rc = resolve(arg, t->buffer, &p->wb, err, errlen);
	if (rc < 0)
		return rc;
	if (t->offset > p->wb.size || p->extent > p->wb.size - t->offset || p->dense > p->wb.size - t->offset) {
		snprintf(err, errlen, "tensor %s: [%" PRIu64 ", +%" PRIu64 ") is outside its buffer of %" PRIu64
			 " bytes", who, t->offset, p->extent > p->dense ? p->extent : p->dense, p->wb.size);
		return PPRPC_ERANGE;
	}
	p->offset = t->offset;
	return check_align(t, who, t->offset, err, errlen);
}

int gge_wire_check(const Pprpc__GgmlTensor *const *t, size_t n, const int32_t *nodes, size_t nnodes,
		   enum gge_mode mode, gge_resolve_fn resolve, void *arg, struct gge_wt *plan, char *err,
		   size_t errlen)
{
	char who[80];
	int rc;

	if (n > GGE_MAX_TENSORS || nnodes > GGE_MAX_NODES) {
		snprintf(err, errlen, "a ggml graph has at most %d tensors and %d nodes (got %zu, %zu)",
			 GGE_MAX_TENSORS, GGE_MAX_NODES, n, nnodes);
		return PPRPC_ETOOBIG;
	}
	for (size_t i = 0; i < n; i++) {
		struct gge_wt *p = &plan[i];

		memset(p, 0, sizeof(*p));
		p->base = (int)i;
		p->node = -1;
		gge_wire_name(t[i], i, who, sizeof(who));
		rc = check_fields(t[i], i, who, err, errlen);
		if (rc == 0)
			rc = check_shape(t[i], who, p, err, errlen);
		if (rc == 0 && t[i]->view_src >= 0) {
			rc = check_view(t[i], who, plan, i, err, errlen);
			/* A view's buffer fields may repeat its base's, nothing else. */
			if (rc == 0 && t[i]->buffer &&
			    (t[i]->buffer != t[p->base]->buffer || t[i]->offset != p->offset + p->offs)) {
				snprintf(err, errlen, "tensor %s: its buffer and offset disagree with its view source",
					 who);
				rc = PPRPC_EINVAL;
			}
		} else if (rc == 0) {
			rc = check_memory(t[i], who, mode, resolve, arg, p, err, errlen);
		}
		if (rc < 0)
			return rc;
	}
	for (size_t k = 0; k < nnodes; k++) {
		int32_t i = nodes[k];

		if (i < 0 || (size_t)i >= n || (k > 0 && i <= nodes[k - 1])) {
			snprintf(err, errlen, "node %zu: tensor index %d is out of range or not after the previous node's",
				 k, i);
			return PPRPC_EGRAPH;
		}
		if (t[i]->op == GGML_OP_NONE) {
			snprintf(err, errlen, "node %zu: tensor %s has no op", k, gge_wire_name(t[i], (size_t)i, who,
											   sizeof(who)));
			return PPRPC_EINVAL;
		}
		plan[i].node = (int)k;
	}
	return 0;
}
