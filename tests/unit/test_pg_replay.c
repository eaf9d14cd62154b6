/*
 * tests/unit/test_pg_replay.c — the plugin's recognition of the last graph
 * without serializing it (ggml-pprpc/replay.c, built in here): the same
 * cgraph with every tensor unchanged matches its cache entry; a change to
 * any field the serialization reads (a node's op_params, a source pointer, a
 * leaf's placement or shape, a name, a node's flags) or to the node list does
 * not; input copies cycled by the scheduler each find their entry;
 * forgetting an entry (the cache evicted it) drops its snapshot.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-pprpc/replay.c"

struct fix {
	struct ggml_context *ctx;
	struct ggml_cgraph *g;
	struct ggml_tensor *a, *b, *mm, *out;
	struct pg_device d;
	struct pg_cache_entry e;
	struct pg_wire w;
	const struct ggml_tensor *ptr[8];
};

static void fix_init(struct fix *f)
{
	struct ggml_init_params p = { .mem_size = 24 * ggml_tensor_overhead() + 2 * ggml_graph_overhead(),
				      .no_alloc = true };
	static uint8_t mem[4096];

	memset(f, 0, sizeof(*f));
	f->ctx = ggml_init(p);
	assert_non_null(f->ctx);
	f->a = ggml_new_tensor_2d(f->ctx, GGML_TYPE_F32, 8, 4);
	f->b = ggml_new_tensor_2d(f->ctx, GGML_TYPE_F32, 8, 2);
	f->mm = ggml_mul_mat(f->ctx, f->a, f->b);
	f->out = ggml_scale(f->ctx, f->mm, 0.5f);
	/* placements as a buffer would give them */
	f->a->data = mem;
	f->b->data = mem + 256;
	f->mm->data = mem + 512;
	f->out->data = mem + 1024;
	f->g = ggml_new_graph(f->ctx);
	ggml_build_forward_expand(f->g, f->out);
	/* what the serialization read, in its order */
	f->ptr[0] = f->a;
	f->ptr[1] = f->b;
	f->ptr[2] = f->mm;
	f->ptr[3] = f->out;
	f->w.ptr = f->ptr;
	f->w.n = 4;
	pg_snap_take(&f->d, f->g, &f->w, &f->e);
	assert_non_null(f->d.snaps);
}

static void fix_free(struct fix *f)
{
	pg_snap_forget(&f->d, NULL);
	ggml_free(f->ctx);
}

static void test_unchanged_matches(void **state)
{
	struct fix f;

	(void)state;
	fix_init(&f);
	assert_ptr_equal(pg_snap_match(&f.d, f.g), &f.e);
	assert_ptr_equal(pg_snap_match(&f.d, f.g), &f.e);
	fix_free(&f);
}

/* Each change is undone after: the match comes back, so the one change is
 * what refused it. */
static void test_any_change_refuses(void **state)
{
	struct fix f;
	float s;
	void *data;
	struct ggml_tensor *src;
	int64_t ne;
	int32_t flags;
	char name[GGML_MAX_NAME];

	(void)state;
	fix_init(&f);
	memcpy(&s, f.out->op_params, sizeof(s));
	memcpy(f.out->op_params, &(float){ 0.25f }, sizeof(float)); /* another scale */
	assert_null(pg_snap_match(&f.d, f.g));
	memcpy(f.out->op_params, &s, sizeof(s));
	assert_ptr_equal(pg_snap_match(&f.d, f.g), &f.e);

	data = f.b->data;
	f.b->data = (uint8_t *)data + 64;      /* a leaf placed elsewhere */
	assert_null(pg_snap_match(&f.d, f.g));
	f.b->data = data;

	src = f.mm->src[1];
	f.mm->src[1] = f.a;                     /* another source */
	assert_null(pg_snap_match(&f.d, f.g));
	f.mm->src[1] = src;

	ne = f.a->ne[1];
	f.a->ne[1] = 3;                         /* another shape */
	assert_null(pg_snap_match(&f.d, f.g));
	f.a->ne[1] = ne;

	snprintf(name, sizeof(name), "%s", f.mm->name);
	ggml_set_name(f.mm, "renamed");
	assert_null(pg_snap_match(&f.d, f.g));
	ggml_set_name(f.mm, name);              /* the same string (other bytes after it) */

	flags = f.out->flags;
	f.out->flags ^= GGML_TENSOR_FLAG_COMPUTE; /* a node that no longer computes */
	assert_null(pg_snap_match(&f.d, f.g));
	f.out->flags = flags;

	assert_ptr_equal(pg_snap_match(&f.d, f.g), &f.e);
	fix_free(&f);
}

static void test_other_graph_refuses(void **state)
{
	struct fix f;
	struct ggml_cgraph *g2;

	(void)state;
	fix_init(&f);
	g2 = ggml_new_graph(f.ctx);
	ggml_build_forward_expand(g2, f.mm);    /* a prefix: fewer nodes */
	assert_null(pg_snap_match(&f.d, g2));
	fix_free(&f);
}

/* Input copies cycled by the scheduler: the same nodes reading another
 * leaf every other call; each state finds its own entry. */
static void test_copies_cycle(void **state)
{
	struct fix f;
	struct pg_cache_entry e2;
	struct ggml_tensor *b2;
	const struct ggml_tensor *ptr2[4];
	struct pg_wire w2;

	(void)state;
	fix_init(&f);
	b2 = ggml_new_tensor_2d(f.ctx, GGML_TYPE_F32, 8, 2);
	b2->data = (uint8_t *)f.b->data + 128;
	f.mm->src[1] = b2;
	assert_null(pg_snap_match(&f.d, f.g));
	memset(&w2, 0, sizeof(w2));
	ptr2[0] = f.a;
	ptr2[1] = b2;
	ptr2[2] = f.mm;
	ptr2[3] = f.out;
	w2.ptr = ptr2;
	w2.n = 4;
	pg_snap_take(&f.d, f.g, &w2, &e2);
	for (int i = 0; i < 4; i++) {
		f.mm->src[1] = i % 2 ? b2 : f.b;
		assert_ptr_equal(pg_snap_match(&f.d, f.g), i % 2 ? &e2 : &f.e);
	}
	pg_snap_forget(&f.d, &e2);
	f.mm->src[1] = b2;
	assert_null(pg_snap_match(&f.d, f.g));
	f.mm->src[1] = f.b;
	assert_ptr_equal(pg_snap_match(&f.d, f.g), &f.e);
	fix_free(&f);
}

static void test_forget(void **state)
{
	struct fix f;
	struct pg_cache_entry other;

	(void)state;
	fix_init(&f);
	pg_snap_forget(&f.d, &other);           /* another entry evicted: kept */
	assert_ptr_equal(pg_snap_match(&f.d, f.g), &f.e);
	pg_snap_forget(&f.d, &f.e);             /* its own: gone */
	assert_null(pg_snap_match(&f.d, f.g));
	fix_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unchanged_matches),
		cmocka_unit_test(test_any_change_refuses),
		cmocka_unit_test(test_other_graph_refuses),
		cmocka_unit_test(test_copies_cycle),
		cmocka_unit_test(test_forget),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
