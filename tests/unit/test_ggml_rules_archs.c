/*
 * tests/unit/test_ggml_rules_archs.c — the per-op rules against the graphs
 * llama.cpp really builds: an LD_PRELOAD shim over
 * ggml_backend_graph_compute_async (which ggml-backend-sched calls for every
 * split) that runs ggml_rules_check on every node before the real compute,
 * for the pinned llama.cpp's own test-llama-archs (every architecture it can
 * build, dense and MoE, with random weights).
 *
 *   make test-ggml-rules-archs [ARCH=qwen3next]
 *
 * A refused node is printed once per (op, reason) with the architecture
 * unknown to the shim (test-llama-archs prints its table around it); the
 * summary at exit counts checked and refused nodes by op, and the exit status
 * turns to 1 when anything was refused.  Not part of `make unit`: it runs
 * every model and takes minutes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml.h"
#include "ggml-backend.h"

#include "daemon/backend/ggml/rules/ggml_rules.h"

typedef enum ggml_status (*compute_fn)(ggml_backend_t, struct ggml_cgraph *);

#define MAX_SEEN 512

static unsigned long n_checked[GGML_OP_COUNT], n_refused[GGML_OP_COUNT];
static char *seen[MAX_SEEN];
static int n_seen;

static void report(const struct ggml_tensor *n, int r, const char *err)
{
	char key[320];
	snprintf(key, sizeof(key), "%d %s", r, err);
	for (int i = 0; i < n_seen; i++)
		if (strcmp(seen[i], key) == 0)
			return;
	if (n_seen < MAX_SEEN)
		seen[n_seen++] = strdup(key);
	fprintf(stderr, "ggml-rules: REFUSED %s '%s' [%s]: %s\n", ggml_op_desc(n), n->name,
		r == -15 ? "unsupported" : "invalid", err);
	for (int i = 0; i < GGML_MAX_SRC; i++) {
		const struct ggml_tensor *s = n->src[i];
		if (s)
			fprintf(stderr, "ggml-rules:   src[%d] %s %s ne=[%lld,%lld,%lld,%lld] nb=[%zu,%zu,%zu,%zu]%s\n", i,
				ggml_type_name(s->type), s->name, (long long)s->ne[0], (long long)s->ne[1],
				(long long)s->ne[2], (long long)s->ne[3], s->nb[0], s->nb[1], s->nb[2], s->nb[3],
				s->view_src ? " (view)" : "");
	}
	fprintf(stderr, "ggml-rules:   node %s ne=[%lld,%lld,%lld,%lld] nb=[%zu,%zu,%zu,%zu]%s\n",
		ggml_type_name(n->type), (long long)n->ne[0], (long long)n->ne[1], (long long)n->ne[2],
		(long long)n->ne[3], n->nb[0], n->nb[1], n->nb[2], n->nb[3], n->view_src ? " (view)" : "");
}

__attribute__((visibility("default")))
enum ggml_status ggml_backend_graph_compute_async(ggml_backend_t backend, struct ggml_cgraph *cgraph)
{
	static compute_fn real;
	if (!real)
		real = (compute_fn)dlsym(RTLD_NEXT, "ggml_backend_graph_compute_async");

	for (int i = 0; i < ggml_graph_n_nodes(cgraph); i++) {
		const struct ggml_tensor *n = ggml_graph_node(cgraph, i);
		char err[256];
		if (n->op == GGML_OP_NONE)
			continue;
		n_checked[n->op]++;
		int r = ggml_rules_check(n, err, sizeof(err));
		if (r) {
			n_refused[n->op]++;
			report(n, r, err);
		}
	}
	return real(backend, cgraph);
}

__attribute__((destructor)) static void summary(void)
{
	unsigned long checked = 0, refused = 0;
	for (int op = 0; op < GGML_OP_COUNT; op++) {
		checked += n_checked[op];
		refused += n_refused[op];
	}
	fprintf(stderr, "ggml-rules: %lu nodes checked, %lu refused\n", checked, refused);
	for (int op = 0; op < GGML_OP_COUNT; op++)
		if (n_checked[op])
			fprintf(stderr, "ggml-rules:   %-20s %8lu checked %8lu refused\n", ggml_op_name((enum ggml_op)op),
				n_checked[op], n_refused[op]);
	if (refused)
		_exit(1);
}
