/*
 * tests/llama/amx_emul.c — ggml-cpu's AMX extra buffer type, emulated on a
 * CPU without AMX (an LD_PRELOAD shim for llama.cpp's tools; amx.sh).
 *
 * Why: on a Xeon with AMX, ggml-cpu offers llama.cpp an extra buffer type
 * ("AMX") whose supports_op accepts MUL_MAT only, under conditions.
 * llama.cpp places a weight there when a test op built from the weight's
 * shape passes; the scheduler later asks the same question of every node
 * that really uses the weight, and a node no backend accepts aborts the
 * process (GGML_ASSERT(*cur_backend_id != -1)).  CI hosts have no AMX, so
 * the real buffer type never appears there.  This shim makes the same
 * decisions go through llama.cpp's and ggml-backend's real code: it adds a
 * buffer type of its own to the CPU device's extra buffer types and answers
 * the device's supports_op / supports_buft for tensors in it with AMX's
 * rule.  The weights stay in plain host memory, so ggml-cpu computes them
 * as usual (the tokens are the CPU's): what is tested is placement and
 * scheduling, not AMX's kernels (those run only on an AMX host).
 *
 * The rule is restated from ggml/src/ggml-cpu/amx/amx.cpp
 * (extra_buffer_type::supports_op, the same in v0.4.0 and v0.5.0).
 * PPRPC_AMX_RULE=upstream uses it as released; the default, "patched",
 * adds the condition of scripts/llama-patches/amx-2d-weights.patch.
 *
 * Also checked at every compute, for a node the rule accepted: its input's
 * batch dimensions equal the weight's (AMX's kernel indexes both with one
 * batch index, so a broadcast weight would be read out of bounds).
 * At exit the shim prints one line: weights placed, nodes accepted, nodes
 * refused, broadcasts; any broadcast turns the exit status to 3.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml.h"
#include "ggml-backend.h"
#include "ggml-backend-impl.h"

#define API __attribute__((visibility("default")))

static bool rule_patched(void)
{
	const char *r = getenv("PPRPC_AMX_RULE");
	return !r || strcmp(r, "upstream") != 0;
}

static unsigned long n_weights, n_accepted, n_refused, n_broadcast;
static bool patched;

/* ---- the buffer type: plain host memory that only this shim knows ---- */

static struct ggml_backend_buffer_type fake_buft;

static void buf_free(ggml_backend_buffer_t b) { free(b->context); }
static void *buf_base(ggml_backend_buffer_t b) { return b->context; }
static void buf_memset(ggml_backend_buffer_t b, struct ggml_tensor *t, uint8_t v, size_t off, size_t n)
{
	(void)b;
	memset((char *)t->data + off, v, n);
}
static void buf_set(ggml_backend_buffer_t b, struct ggml_tensor *t, const void *d, size_t off, size_t n)
{
	(void)b;
	memcpy((char *)t->data + off, d, n);
}
static void buf_get(ggml_backend_buffer_t b, const struct ggml_tensor *t, void *d, size_t off, size_t n)
{
	(void)b;
	memcpy(d, (const char *)t->data + off, n);
}
static void buf_clear(ggml_backend_buffer_t b, uint8_t v) { memset(b->context, v, b->size); }

static const char *buft_name(ggml_backend_buffer_type_t t)
{
	(void)t;
	return "AMX";
}
static ggml_backend_buffer_t buft_alloc(ggml_backend_buffer_type_t t, size_t size)
{
	struct ggml_backend_buffer_i iface = {
		.free_buffer = buf_free,
		.get_base = buf_base,
		.memset_tensor = buf_memset,
		.set_tensor = buf_set,
		.get_tensor = buf_get,
		.clear = buf_clear,
	};
	void *p = NULL;
	if (posix_memalign(&p, 64, size ? size : 64))
		return NULL;
	return ggml_backend_buffer_init(t, iface, p, size);
}
static size_t buft_align(ggml_backend_buffer_type_t t)
{
	(void)t;
	return 64;
}

/* ---- AMX's rule (amx.cpp, extra_buffer_type::supports_op) ---- */

static bool in_fake(const struct ggml_tensor *t)
{
	return t && t->buffer && t->buffer->buft == &fake_buft;
}

static bool amx_supports(const struct ggml_tensor *op)
{
	const struct ggml_tensor *src0 = op->src[0], *src1 = op->src[1];
	int64_t align;

	if (op->op != GGML_OP_MUL_MAT)
		return false;
	if (!ggml_is_contiguous(src0) || !ggml_is_contiguous(src1))
		return false;
	if (patched && ggml_n_dims(src0) != 2)
		return false;
	if (!in_fake(src0))
		return false;
	if (src1->buffer && !ggml_backend_buft_is_host(src1->buffer->buft))
		return false;
	if (op->ne[0] % 32) /* TILE_N * 2 */
		return false;
	switch (src0->type) {
	case GGML_TYPE_Q4_0:
	case GGML_TYPE_Q4_1:
	case GGML_TYPE_Q8_0:
		align = 32; /* TILE_K */
		break;
	case GGML_TYPE_Q4_K:
	case GGML_TYPE_Q5_K:
	case GGML_TYPE_Q6_K:
	case GGML_TYPE_IQ4_XS:
		align = 256; /* QK_K */
		break;
	case GGML_TYPE_F16:
		align = 16;
		break;
	default:
		return false;
	}
	if (src0->ne[0] % align)
		return false;
	return src1->type == GGML_TYPE_F32;
}

/* ggml_backend_cpu_device_supports_op asks the buffer type of the first of
 * src[0..3] that is in an extra buffer and returns its answer alone. */
static int fake_answer(const struct ggml_tensor *op)
{
	if (op->op == GGML_OP_NONE || op->op == GGML_OP_RESHAPE || op->op == GGML_OP_VIEW ||
	    op->op == GGML_OP_PERMUTE || op->op == GGML_OP_TRANSPOSE)
		return -1;
	for (int i = 0; i < 4; i++)
		if (in_fake(op->src[i])) {
			bool ok = amx_supports(op);
			if (!ok && getenv("PPRPC_AMX_VERBOSE"))
				fprintf(stderr, "amx-emul: refused %s '%s': src[%d] %s in AMX, src[1] %s%s\n", ggml_op_desc(op),
					op->name, i, op->src[i]->name, op->src[1] ? op->src[1]->name : "-",
					op->src[1] && !ggml_is_contiguous(op->src[1]) ? " (not contiguous)" : "");
			return ok;
		}
	return -1;
}

static bool is_cpu(ggml_backend_dev_t d)
{
	return d && ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_CPU;
}

/* ---- the interposed entry points ---- */

typedef bool (*dev_op_fn)(ggml_backend_dev_t, const struct ggml_tensor *);
typedef bool (*dev_buft_fn)(ggml_backend_dev_t, ggml_backend_buffer_type_t);
typedef void *(*proc_fn)(ggml_backend_reg_t, const char *);
typedef ggml_backend_buffer_type_t *(*extra_fn)(ggml_backend_dev_t);
typedef enum ggml_status (*compute_fn)(ggml_backend_t, struct ggml_cgraph *);

static extra_fn real_extra;

static ggml_backend_buffer_type_t *fake_extra(ggml_backend_dev_t dev)
{
	static ggml_backend_buffer_type_t list[16];
	ggml_backend_buffer_type_t *r = real_extra ? real_extra(dev) : NULL;
	int n = 0;

	/* first, as ggml-cpu lists AMX before its repack type */
	list[n++] = &fake_buft;
	for (; r && *r && n < 15; r++)
		list[n++] = *r;
	list[n] = NULL;
	return list;
}

API void *ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char *name)
{
	static proc_fn real;
	void *p;

	if (!real)
		real = (proc_fn)dlsym(RTLD_NEXT, "ggml_backend_reg_get_proc_address");
	p = real(reg, name);
	if (strcmp(name, "ggml_backend_dev_get_extra_bufts") != 0 || ggml_backend_reg_dev_count(reg) < 1 ||
	    !is_cpu(ggml_backend_reg_dev_get(reg, 0)))
		return p;
	if (!fake_buft.iface.alloc_buffer) {
		patched = rule_patched();
		fake_buft.iface.get_name = buft_name;
		fake_buft.iface.alloc_buffer = buft_alloc;
		fake_buft.iface.get_alignment = buft_align;
		fake_buft.device = ggml_backend_reg_dev_get(reg, 0);
		fprintf(stderr, "amx-emul: an emulated AMX buffer type on %s (rule: %s)\n",
			ggml_backend_dev_name(fake_buft.device), patched ? "patched" : "upstream");
	}
	real_extra = (extra_fn)p;
	return (void *)fake_extra;
}

API bool ggml_backend_dev_supports_op(ggml_backend_dev_t dev, const struct ggml_tensor *op)
{
	static dev_op_fn real;
	int a;

	if (!real)
		real = (dev_op_fn)dlsym(RTLD_NEXT, "ggml_backend_dev_supports_op");
	if (is_cpu(dev) && (a = fake_answer(op)) >= 0)
		return a;
	/* another device never takes a tensor of this buffer */
	for (int i = 0; i < GGML_MAX_SRC; i++)
		if (!is_cpu(dev) && in_fake(op->src[i]))
			return false;
	return real(dev, op);
}

API bool ggml_backend_supports_op(ggml_backend_t backend, const struct ggml_tensor *op)
{
	return ggml_backend_dev_supports_op(ggml_backend_get_device(backend), op);
}

API bool ggml_backend_dev_supports_buft(ggml_backend_dev_t dev, ggml_backend_buffer_type_t buft)
{
	static dev_buft_fn real;

	if (!real)
		real = (dev_buft_fn)dlsym(RTLD_NEXT, "ggml_backend_dev_supports_buft");
	if (buft == &fake_buft)
		return is_cpu(dev);
	return real(dev, buft);
}

API bool ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft)
{
	return ggml_backend_dev_supports_buft(ggml_backend_get_device(backend), buft);
}

API enum ggml_status ggml_backend_graph_compute_async(ggml_backend_t backend, struct ggml_cgraph *g)
{
	static compute_fn real;

	if (!real)
		real = (compute_fn)dlsym(RTLD_NEXT, "ggml_backend_graph_compute_async");
	for (int i = 0; i < ggml_graph_n_nodes(g); i++) {
		const struct ggml_tensor *n = ggml_graph_node(g, i);
		bool uses = false;
		for (int s = 0; s < GGML_MAX_SRC; s++)
			uses |= in_fake(n->src[s]);
		if (!uses || fake_answer(n) < 0)
			continue;
		if (!amx_supports(n)) {
			n_refused++;
			continue;
		}
		n_accepted++;
		if (n->src[1]->ne[2] != n->src[0]->ne[2] || n->src[1]->ne[3] != n->src[0]->ne[3]) {
			if (n_broadcast++ < 5)
				fprintf(stderr, "amx-emul: BROADCAST %s: weight %s [%lld,%lld,%lld,%lld], input [%lld,%lld,%lld,%lld]\n",
					n->name, n->src[0]->name, (long long)n->src[0]->ne[0], (long long)n->src[0]->ne[1],
					(long long)n->src[0]->ne[2], (long long)n->src[0]->ne[3], (long long)n->src[1]->ne[0],
					(long long)n->src[1]->ne[1], (long long)n->src[1]->ne[2], (long long)n->src[1]->ne[3]);
		}
	}
	return real(backend, g);
}

API ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size)
{
	static ggml_backend_buffer_t (*real)(ggml_backend_buffer_type_t, size_t);

	if (!real)
		real = (ggml_backend_buffer_t (*)(ggml_backend_buffer_type_t, size_t))dlsym(RTLD_NEXT,
											"ggml_backend_buft_alloc_buffer");
	if (buft == &fake_buft && size > 0)
		n_weights++; /* a model buffer (the placement probes allocate 0 bytes) */
	return real(buft, size);
}

__attribute__((destructor)) static void report(void)
{
	if (!fake_buft.iface.alloc_buffer)
		return;
	fprintf(stderr, "amx-emul: rule %s: %lu AMX buffers, %lu nodes computed from them accepted, %lu refused, %lu broadcasts\n",
		patched ? "patched" : "upstream", n_weights, n_accepted, n_refused, n_broadcast);
	if (n_broadcast)
		_exit(3);
}
