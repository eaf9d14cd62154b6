/*
 * kernels/cpu/cpu_rows.c — GET_ROWS (gather rows of a table) and SET_ROWS
 * (scatter rows into a table) at i32 indices (semantics: ops.h).
 *
 * Indices are data: every one is checked against the table's row count
 * before anything is read or written, and a bad one fails the whole op
 * with PPRPC_ERANGE.  Checking first keeps SET_ROWS all-or-nothing, so a
 * bad index never leaves a KV cache half updated.
 */
#include "kernels/cpu/cpu_row_impl.h"

/* Index (i0, i1, i2) of an i32 tensor. */
static inline int32_t id_at(const struct kern_tensor *ids, int64_t i0, int64_t i1, int64_t i2)
{
	return *(const int32_t *)((const char *)ids->data + (uint64_t)i0 * ids->nb[0] +
				  (uint64_t)i1 * ids->nb[1] + (uint64_t)i2 * ids->nb[2]);
}

static int check_ids(const struct kern_tensor *ids, int64_t nrows)
{
	for (int64_t i2 = 0; i2 < ids->ne[2]; i2++)
		for (int64_t i1 = 0; i1 < ids->ne[1]; i1++)
			for (int64_t i0 = 0; i0 < ids->ne[0]; i0++) {
				int32_t id = id_at(ids, i0, i1, i2);

				if (id < 0 || id >= nrows)
					return PPRPC_ERANGE;
			}
	return 0;
}

/* ---- GET_ROWS ------------------------------------------------------------ */

struct get_job {
	const struct kern_tensor *tab, *ids, *d;
	kern_cpu_cvt_fn cvt;
};

/* Destination row r = (i10, i11, i12): table row ids[i10, i11, i12] of
 * table slice (i11, i12), a table batch dim of 1 serving every slice. */
static int get_rows(void *arg, int64_t r0, int64_t r1)
{
	const struct get_job *j = arg;
	const struct kern_tensor *tab = j->tab, *d = j->d;

	for (int64_t r = r0; r < r1; r++) {
		int64_t i[3];
		int32_t id;

		cpu_row_index(d, r, i);
		id = id_at(j->ids, i[0], i[1], i[2]);
		j->cvt(cpu_row_at(d, i[0], i[1], i[2]), sizeof(float),
		       cpu_row_at(tab, id, i[1] % tab->ne[2], i[2] % tab->ne[3]), tab->nb[0],
		       tab->ne[0]);
	}
	return 0;
}

int kern_cpu_get_rows(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		      struct kern_tensor *const *src, struct kern_tensor *dst)
{
	struct get_job j = { .tab = src[0], .ids = src[1], .d = dst };
	int rc;

	(void)p;
	j.cvt = src[0]->dtype == PPRPC_Q8_0 ? kern_cpu_q8_0_to_f32
					    : kern_cpu_cvt(src[0]->dtype, PPRPC_F32);
	if (!j.cvt)
		return PPRPC_ETYPE;
	rc = check_ids(src[1], src[0]->ne[1]);
	if (rc < 0)
		return rc;
	return kern_cpu_parallel(ctx, cpu_nrows(dst), kern_tensor_nelements(dst), get_rows, &j);
}

/* ---- SET_ROWS ------------------------------------------------------------ */

struct set_job {
	const struct kern_tensor *val, *ids, *d;
	kern_cpu_cvt_fn cvt;
};

/* Threads take whole (i2, i3) slices and write a slice's rows in order, so
 * when an index repeats the last source row wins, deterministically. */
static int set_slices(void *arg, int64_t s0, int64_t s1)
{
	const struct set_job *j = arg;
	const struct kern_tensor *val = j->val, *ids = j->ids, *d = j->d;

	for (int64_t s = s0; s < s1; s++) {
		int64_t i2 = s % val->ne[2], i3 = s / val->ne[2];

		for (int64_t i1 = 0; i1 < val->ne[1]; i1++) {
			int32_t id = id_at(ids, i1, i2 % ids->ne[1], i3 % ids->ne[2]);

			j->cvt(cpu_row_at(d, id, i2, i3), d->nb[0], cpu_row_at(val, i1, i2, i3),
			       val->nb[0], val->ne[0]);
		}
	}
	return 0;
}

int kern_cpu_set_rows(const struct kern_cpu_ctx *ctx, const struct pprpc_op_params *p,
		      struct kern_tensor *const *src, struct kern_tensor *dst)
{
	struct set_job j = { .val = src[0], .ids = src[1], .d = dst,
			     .cvt = kern_cpu_cvt(PPRPC_F32, dst->dtype) };
	int rc;

	(void)p;
	if (!j.cvt)
		return PPRPC_ETYPE;
	rc = check_ids(src[1], dst->ne[1]);
	if (rc < 0)
		return rc;
	return kern_cpu_parallel(ctx, src[0]->ne[2] * src[0]->ne[3], kern_tensor_nelements(src[0]),
				 set_slices, &j);
}
