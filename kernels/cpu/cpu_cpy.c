/*
 * kernels/cpu/cpu_cpy.c — CPY: convert src0 into dst, both visited in
 * logical (ne) order, each side with its own shape and strides.
 *
 * The element sequence is cut into runs that stay inside one ne[0] row on
 * both sides, so each run is a single strided conversion call; when the
 * row lengths agree (the common case) a run is a whole row.  Threads take
 * disjoint ranges of the logical index.
 */
#include "kernels/cpu/cpu_impl.h"

struct cpy_job {
	const struct kern_tensor *s, *d;
	kern_cpu_cvt_fn cvt;
};

/* A position in one tensor: its multi-index and the byte offset it maps to. */
struct cursor {
	const struct kern_tensor *t;
	int64_t i[PPRPC_MAX_DIMS];
};

static void cursor_seek(struct cursor *c, const struct kern_tensor *t, int64_t lin)
{
	c->t = t;
	for (int k = 0; k < PPRPC_MAX_DIMS; k++) {
		c->i[k] = lin % t->ne[k];
		lin /= t->ne[k];
	}
}

static uint64_t cursor_off(const struct cursor *c)
{
	uint64_t off = 0;

	for (int k = 0; k < PPRPC_MAX_DIMS; k++)
		off += (uint64_t)c->i[k] * c->t->nb[k];
	return off;
}

static void cursor_advance(struct cursor *c, int64_t n)
{
	/* n never crosses the end of the current row, so at most one carry
	 * starts at dim 0. */
	c->i[0] += n;
	for (int k = 0; k < PPRPC_MAX_DIMS - 1 && c->i[k] == c->t->ne[k]; k++) {
		c->i[k] = 0;
		c->i[k + 1]++;
	}
}

static int cpy_range(void *arg, int64_t begin, int64_t end)
{
	const struct cpy_job *j = arg;
	struct cursor cs, cd;

	cursor_seek(&cs, j->s, begin);
	cursor_seek(&cd, j->d, begin);
	while (begin < end) {
		int64_t run = end - begin;

		if (run > j->s->ne[0] - cs.i[0])
			run = j->s->ne[0] - cs.i[0];
		if (run > j->d->ne[0] - cd.i[0])
			run = j->d->ne[0] - cd.i[0];
		j->cvt((char *)j->d->data + cursor_off(&cd), j->d->nb[0],
		       (const char *)j->s->data + cursor_off(&cs), j->s->nb[0], run);
		cursor_advance(&cs, run);
		cursor_advance(&cd, run);
		begin += run;
	}
	return 0;
}

int kern_cpu_cpy(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		 struct kern_tensor *const *src, struct kern_tensor *dst)
{
	struct cpy_job j = { .s = src[0], .d = dst, .cvt = kern_cpu_cvt(src[0]->dtype, dst->dtype) };
	int64_t n = kern_tensor_nelements(src[0]);

	(void)p;
	if (!j.cvt)
		return PPRPC_ETYPE;
	return kern_cpu_parallel(ctx, n, n, cpy_range, &j);
}
