/*
 * tests/unit/test_meta.c — packing and bounded unpacking of meta messages:
 * round trips, malformed input, and inputs whose decoded size would blow the
 * decode budget (META_DECODE_BUDGET) although they are small on the wire.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"
#include "proto/meta.h"

static uint8_t *pack(const ProtobufCMessage *m, size_t *ret_len)
{
	size_t n = meta_size(m);
	uint8_t *b = malloc(n ? n : 1);

	assert_non_null(b);
	assert_int_equal(meta_pack(m, b), n);
	*ret_len = n;
	return b;
}

static void test_tensor_set_roundtrip(void **state)
{
	Pprpc__TensorSet ts = PPRPC__TENSOR_SET__INIT;
	ProtobufCMessage *out = (void *)0x1;
	Pprpc__TensorSet *got;
	uint8_t *b;
	size_t n;

	(void)state;
	ts.buffer = 0x0100000100000003ull;
	ts.offset = 4096;
	ts.size = UINT64_MAX;
	b = pack(&ts.base, &n);
	assert_true(n > 0);
	assert_int_equal(meta_unpack(&pprpc__tensor_set__descriptor, b, n, &out), 0);
	assert_non_null(out);
	assert_ptr_equal(out->descriptor, &pprpc__tensor_set__descriptor);
	got = (Pprpc__TensorSet *)out;
	assert_true(got->buffer == ts.buffer);
	assert_true(got->offset == 4096);
	assert_true(got->size == UINT64_MAX);
	meta_free(out);
	free(b);
}

static void test_graph_create_roundtrip(void **state)
{
	int64_t ne[2][4] = { { 4, 3, 1, 1 }, { 4, 3, 1, 1 } };
	uint64_t nb[2][4] = { { 4, 16, 48, 48 }, { 4, 16, 48, 48 } };
	Pprpc__Tensor t[3] = { PPRPC__TENSOR__INIT, PPRPC__TENSOR__INIT, PPRPC__TENSOR__INIT };
	Pprpc__Tensor *tp[3] = { &t[0], &t[1], &t[2] };
	Pprpc__Node nodes[2] = { PPRPC__NODE__INIT, PPRPC__NODE__INIT };
	Pprpc__Node *np[2] = { &nodes[0], &nodes[1] };
	int32_t src0[2] = { 0, 1 }, src1[1] = { 2 };
	float fp[2] = { 0.5f, -2.0f };
	int32_t ip[1] = { -7 };
	Pprpc__GraphCreate gc = PPRPC__GRAPH_CREATE__INIT;
	ProtobufCMessage *out;
	Pprpc__GraphCreate *g;
	uint8_t *b;
	size_t n;

	(void)state;
	for (int i = 0; i < 3; i++) {
		t[i].dtype = (uint32_t)(i == 2 ? PPRPC_F16 : PPRPC_F32);
		t[i].n_ne = 4;
		t[i].ne = ne[i == 2 ? 1 : i];
		t[i].n_nb = 4;
		t[i].nb = nb[i == 2 ? 1 : i];
		t[i].buffer = i == 2 ? 0 : 0x0100000100000001ull + (uint64_t)i;
		t[i].offset = 64u * (unsigned)i;
	}
	t[2].view_of = 1;
	nodes[0].op = PPRPC_OP_ADD;
	nodes[0].n_src = 2;
	nodes[0].src = src0;
	nodes[0].dst = 2;
	nodes[1].op = PPRPC_OP_SCALE;
	nodes[1].n_src = 1;
	nodes[1].src = src1;
	nodes[1].dst = 1;
	nodes[1].n_fparams = 2;
	nodes[1].fparams = fp;
	nodes[1].n_iparams = 1;
	nodes[1].iparams = ip;
	gc.device = 3;
	gc.n_tensors = 3;
	gc.tensors = tp;
	gc.n_nodes = 2;
	gc.nodes = np;

	b = pack(&gc.base, &n);
	assert_int_equal(meta_unpack(&pprpc__graph_create__descriptor, b, n, &out), 0);
	g = (Pprpc__GraphCreate *)out;
	assert_int_equal(g->device, 3);
	assert_int_equal(g->n_tensors, 3);
	assert_int_equal(g->n_nodes, 2);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(g->tensors[i]->dtype, t[i].dtype);
		assert_int_equal(g->tensors[i]->n_ne, 4);
		assert_int_equal(g->tensors[i]->n_nb, 4);
		assert_memory_equal(g->tensors[i]->ne, t[i].ne, 4 * sizeof(int64_t));
		assert_memory_equal(g->tensors[i]->nb, t[i].nb, 4 * sizeof(uint64_t));
		assert_true(g->tensors[i]->buffer == t[i].buffer);
		assert_true(g->tensors[i]->offset == t[i].offset);
		assert_int_equal(g->tensors[i]->view_of, t[i].view_of);
	}
	assert_int_equal(g->nodes[0]->op, PPRPC_OP_ADD);
	assert_int_equal(g->nodes[0]->n_src, 2);
	assert_int_equal(g->nodes[0]->src[0], 0);
	assert_int_equal(g->nodes[0]->src[1], 1);
	assert_int_equal(g->nodes[0]->dst, 2);
	assert_int_equal(g->nodes[0]->n_fparams, 0);
	assert_int_equal(g->nodes[1]->op, PPRPC_OP_SCALE);
	assert_int_equal(g->nodes[1]->n_src, 1);
	assert_int_equal(g->nodes[1]->src[0], 2);
	assert_int_equal(g->nodes[1]->n_fparams, 2);
	assert_true(g->nodes[1]->fparams[0] == 0.5f);
	assert_true(g->nodes[1]->fparams[1] == -2.0f);
	assert_int_equal(g->nodes[1]->n_iparams, 1);
	assert_int_equal(g->nodes[1]->iparams[0], -7);

	/* re-packing the decoded message gives the same bytes */
	{
		size_t n2;
		uint8_t *b2 = pack(out, &n2);

		assert_int_equal(n2, n);
		assert_memory_equal(b2, b, n);
		free(b2);
	}
	meta_free(out);
	free(b);
}

static void test_hello_roundtrip(void **state)
{
	static const uint8_t proof[5] = { 0, 1, 2, 0xfe, 0xff };
	Pprpc__Hello h = PPRPC__HELLO__INIT;
	ProtobufCMessage *out;
	Pprpc__Hello *g;
	uint8_t *b;
	size_t n;

	(void)state;
	h.proto_version = PPRPC_PROTO_VERSION;
	h.role = PPRPC__ROLE__ROLE_PEER;
	h.client_name = "unit-test";
	h.auth_proof.len = sizeof(proof);
	h.auth_proof.data = (uint8_t *)proof;
	b = pack(&h.base, &n);
	assert_int_equal(meta_unpack(&pprpc__hello__descriptor, b, n, &out), 0);
	g = (Pprpc__Hello *)out;
	assert_int_equal(g->proto_version, PPRPC_PROTO_VERSION);
	assert_int_equal(g->role, PPRPC__ROLE__ROLE_PEER);
	assert_string_equal(g->client_name, "unit-test");
	assert_int_equal(g->auth_proof.len, sizeof(proof));
	assert_memory_equal(g->auth_proof.data, proof, sizeof(proof));
	meta_free(out);
	free(b);
}

/* A zero-length meta is the all-defaults message. */
static void test_empty_meta(void **state)
{
	ProtobufCMessage *out = NULL;
	Pprpc__GraphCreate *g;

	(void)state;
	assert_int_equal(meta_unpack(&pprpc__graph_create__descriptor, (const uint8_t *)"", 0, &out),
			 0);
	g = (Pprpc__GraphCreate *)out;
	assert_int_equal(g->device, 0);
	assert_int_equal(g->n_tensors, 0);
	assert_int_equal(g->n_nodes, 0);
	meta_free(out);
	assert_int_equal(meta_unpack(&pprpc__stats__descriptor, NULL, 0, &out), 0);
	meta_free(out);
}

static void expect_unpack(const ProtobufCMessageDescriptor *d, const uint8_t *b, size_t n,
			  int want)
{
	ProtobufCMessage *sentinel = (ProtobufCMessage *)(uintptr_t)0x1234;
	ProtobufCMessage *out = sentinel;

	assert_int_equal(meta_unpack(d, b, n, &out), want);
	if (want == 0)
		meta_free(out);
	else
		assert_ptr_equal(out, sentinel); /* not written on failure */
}

static void test_garbage(void **state)
{
	/* truncated varint */
	static const uint8_t trunc_varint[] = { 0x08, 0x80 };
	/* length-delimited field longer than the input */
	static const uint8_t long_len[] = { 0x12, 0x05, 0x01 };
	/* field number 0 */
	static const uint8_t field0[] = { 0x00, 0x01 };
	/* varint of 11 bytes */
	static const uint8_t long_varint[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
					       0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	/* wire type 7 does not exist */
	static const uint8_t bad_wiretype[] = { 0x0f, 0x00 };
	/* a nested Tensor whose packed ne claims 2^32 - 1 bytes */
	static const uint8_t huge_packed[] = { 0x12, 0x07, 0x12, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01 };
	/* only a tag */
	static const uint8_t tag_only[] = { 0x12 };
	uint8_t noise[256];

	(void)state;
	expect_unpack(&pprpc__tensor_set__descriptor, trunc_varint, sizeof(trunc_varint),
		      PPRPC_EPROTO);
	expect_unpack(&pprpc__graph_create__descriptor, long_len, sizeof(long_len), PPRPC_EPROTO);
	expect_unpack(&pprpc__tensor_set__descriptor, field0, sizeof(field0), PPRPC_EPROTO);
	expect_unpack(&pprpc__tensor_set__descriptor, long_varint, sizeof(long_varint),
		      PPRPC_EPROTO);
	expect_unpack(&pprpc__tensor_set__descriptor, bad_wiretype, sizeof(bad_wiretype),
		      PPRPC_EPROTO);
	expect_unpack(&pprpc__graph_create__descriptor, huge_packed, sizeof(huge_packed),
		      PPRPC_EPROTO);
	expect_unpack(&pprpc__graph_create__descriptor, tag_only, sizeof(tag_only), PPRPC_EPROTO);

	/* pseudo-random noise never crashes; whatever decodes is freed cleanly */
	srand(12345);
	for (int round = 0; round < 2000; round++) {
		size_t n = (size_t)(rand() % (int)sizeof(noise));
		ProtobufCMessage *out = NULL;
		int rc;

		for (size_t i = 0; i < n; i++)
			noise[i] = (uint8_t)rand();
		rc = meta_unpack(&pprpc__graph_create__descriptor, noise, n, &out);
		assert_true(rc == 0 || rc == PPRPC_EPROTO || rc == PPRPC_ETOOBIG);
		if (rc == 0)
			meta_free(out);
	}
}

/* `count` empty Tensor entries in GraphCreate: 2 bytes each on the wire
 * (tag 0x12, length 0), but a whole Pprpc__Tensor plus a pointer decoded. */
static uint8_t *empty_tensors(size_t count, size_t *ret_len)
{
	uint8_t *b = malloc(2 * count);

	assert_non_null(b);
	for (size_t i = 0; i < count; i++) {
		b[2 * i] = 0x12;
		b[2 * i + 1] = 0x00;
	}
	*ret_len = 2 * count;
	return b;
}

static void test_budget_many_submessages(void **state)
{
	size_t count = (size_t)4 << 20; /* 8 MiB on the wire, ~430 MiB decoded */
	size_t n;
	uint8_t *b = empty_tensors(count, &n);

	(void)state;
	/* far more than META_DECODE_BUDGET once decoded */
	assert_true(count * sizeof(Pprpc__Tensor) > 4 * (size_t)META_DECODE_BUDGET);
	expect_unpack(&pprpc__graph_create__descriptor, b, n, PPRPC_ETOOBIG);
	free(b);
}

/* At the frame limit (1 MiB of meta) the decode either fits the budget or
 * is refused with ETOOBIG; when it fits, every element is there. */
static void test_budget_one_mib(void **state)
{
	size_t count = PPRPC_MAX_META / 2;
	size_t n;
	uint8_t *b = empty_tensors(count, &n);
	ProtobufCMessage *out = NULL;
	int rc;

	(void)state;
	rc = meta_unpack(&pprpc__graph_create__descriptor, b, n, &out);
	assert_true(rc == 0 || rc == PPRPC_ETOOBIG);
	if (rc == 0) {
		Pprpc__GraphCreate *g = (Pprpc__GraphCreate *)out;

		assert_int_equal(g->n_tensors, count);
		assert_int_equal(g->tensors[count - 1]->n_ne, 0);
		meta_free(out);
	}
	print_message("1 MiB of empty tensors: %s\n", rc == 0 ? "decoded" : "ETOOBIG");
	free(b);
}

/* A packed repeated int64 whose elements are 1 byte on the wire and 8 bytes
 * decoded: within budget, decoded exactly. */
static void test_packed_large_within_budget(void **state)
{
	size_t count = 1000000;
	size_t n = 0;
	uint8_t *b = malloc(count + 16);
	ProtobufCMessage *out = NULL;
	Pprpc__Tensor *t;

	(void)state;
	assert_non_null(b);
	b[n++] = 0x12; /* field 2 (ne), length-delimited */
	/* varint length of count */
	for (size_t v = count;; v >>= 7) {
		if (v < 0x80) {
			b[n++] = (uint8_t)v;
			break;
		}
		b[n++] = (uint8_t)(0x80 | (v & 0x7f));
	}
	memset(b + n, 0x05, count);
	n += count;
	assert_int_equal(meta_unpack(&pprpc__tensor__descriptor, b, n, &out), 0);
	t = (Pprpc__Tensor *)out;
	assert_int_equal(t->n_ne, count);
	assert_int_equal(t->ne[0], 5);
	assert_int_equal(t->ne[count - 1], 5);
	meta_free(out);
	free(b);
}

/* Over-budget decoding must not leave budget state behind: a good decode
 * right after still works (and ASan sees no leak). */
static void test_budget_then_good(void **state)
{
	size_t n;
	uint8_t *big = empty_tensors((size_t)4 << 20, &n);
	Pprpc__TensorSet ts = PPRPC__TENSOR_SET__INIT;
	ProtobufCMessage *out = NULL;
	uint8_t *b;
	size_t bn;

	(void)state;
	expect_unpack(&pprpc__graph_create__descriptor, big, n, PPRPC_ETOOBIG);
	ts.size = 77;
	b = pack(&ts.base, &bn);
	assert_int_equal(meta_unpack(&pprpc__tensor_set__descriptor, b, bn, &out), 0);
	assert_true(((Pprpc__TensorSet *)out)->size == 77);
	meta_free(out);
	free(b);
	free(big);
}

static void test_free_null(void **state)
{
	(void)state;
	meta_free(NULL);
}

/* Unknown fields are tolerated (forward compatibility) and freed. */
static void test_unknown_fields(void **state)
{
	/* TensorSet{size=3} + field 15 varint + field 16 length-delimited "abc" */
	static const uint8_t b[] = { 0x18, 0x03, 0x78, 0x01, 0x82, 0x01, 0x03, 'a', 'b', 'c' };
	ProtobufCMessage *out = NULL;

	(void)state;
	assert_int_equal(meta_unpack(&pprpc__tensor_set__descriptor, b, sizeof(b), &out), 0);
	assert_true(((Pprpc__TensorSet *)out)->size == 3);
	meta_free(out);
}

/* A string field holding a NUL byte would read shorter as a C string
 * ("\0127.0.0.1:9" as "", a local rank): refused, also inside a
 * sub-message.  Bytes fields may hold anything. */
static void test_string_with_nul(void **state)
{
	/* Wait: device 1 = 0, rank 4 = "\0127.0.0.1:9" */
	static const uint8_t wait_nul[] = { 0x08, 0x00, 0x22, 0x0c, 0x00, '1', '2', '7', '.', '0', '.', '0', '.', '1', ':', '9' };
	static const uint8_t wait_ok[] = { 0x08, 0x00, 0x22, 0x0b, '1', '2', '7', '.', '0', '.', '0', '.', '1', ':', '9' };
	/* Hello: client_name 3 = "a\0b" */
	static const uint8_t hello_nul[] = { 0x08, 0x01, 0x1a, 0x03, 'a', 0x00, 'b' };
	/* Hello: auth_proof 4 (bytes) = 00 01 00 */
	static const uint8_t hello_bytes[] = { 0x08, 0x01, 0x22, 0x03, 0x00, 0x01, 0x00 };
	/* DeviceStats: info 1 (DeviceInfo) { name 2 = "c\0" } */
	static const uint8_t nested_nul[] = { 0x0a, 0x04, 0x12, 0x02, 'c', 0x00 };
	static const uint8_t nested_ok[] = { 0x0a, 0x04, 0x12, 0x02, 'c', 'x' };

	(void)state;
	expect_unpack(&pprpc__wait__descriptor, wait_nul, sizeof(wait_nul), PPRPC_EINVAL);
	expect_unpack(&pprpc__wait__descriptor, wait_ok, sizeof(wait_ok), 0);
	expect_unpack(&pprpc__hello__descriptor, hello_nul, sizeof(hello_nul), PPRPC_EINVAL);
	expect_unpack(&pprpc__hello__descriptor, hello_bytes, sizeof(hello_bytes), 0);
	expect_unpack(&pprpc__device_stats__descriptor, nested_nul, sizeof(nested_nul), PPRPC_EINVAL);
	expect_unpack(&pprpc__device_stats__descriptor, nested_ok, sizeof(nested_ok), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tensor_set_roundtrip),
		cmocka_unit_test(test_graph_create_roundtrip),
		cmocka_unit_test(test_hello_roundtrip),
		cmocka_unit_test(test_empty_meta),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_budget_many_submessages),
		cmocka_unit_test(test_budget_one_mib),
		cmocka_unit_test(test_packed_large_within_budget),
		cmocka_unit_test(test_budget_then_good),
		cmocka_unit_test(test_free_null),
		cmocka_unit_test(test_unknown_fields),
		cmocka_unit_test(test_string_with_nul),
	};

	return cmocka_run_group_tests_name("meta", tests, NULL, NULL);
}
