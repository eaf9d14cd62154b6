/*
 * daemon/backend/ggml/rules/ggml_rules.h — step 2 of a ggml graph's
 * validation: the per-op rules (doc/ggml.md "Validation").
 *
 * The contract between the engine (ggml_build.c) and the rules:
 * node is a ggml tensor whose sources (and view source) were already
 * validated and materialized, its own type/ne/nb/op_params copied from the
 * wire, data set (NULL in a GGML_SUPPORTS / GGML_ALLOC_SIZE probe, where the
 * tensors may have no memory yet).  The check covers everything ggml's
 * constructor for node->op and the ggml-cpu / ggml-cuda kernels would
 * assert, including that node's type/ne/nb are what ggml would produce.
 *
 * Returns 0 = ok; PPRPC_EUNSUPP = no rule for this op (refuse the graph,
 * naming the op); PPRPC_EINVAL = invalid, with the reason in err.
 *
 * Indices read from tensor data (GET_ROWS, SET_ROWS, MUL_MAT_ID, ADD_ID,
 * SSM_SCAN, GET_ROWS_BACK) are not the rules' business: the engine checks
 * their values before such a node runs (ggml_guard.c), so an op that follows
 * indices from data must be in ggml_guard.c's table before a rule accepts it.
 */
#ifndef PPRPC_DAEMON_GGML_RULES_H
#define PPRPC_DAEMON_GGML_RULES_H

#include <stddef.h>

struct ggml_tensor;

int ggml_rules_check(const struct ggml_tensor *node, char *err, size_t errlen);

#endif
