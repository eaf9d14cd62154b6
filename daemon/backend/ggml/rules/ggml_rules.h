/*
 * ggml_rules.h — per-op validation of ggml graph nodes received from the network.
 *
 * ggml aborts the process (GGML_ASSERT / GGML_ABORT) on shapes, types or
 * parameters its constructors and kernels do not expect, so every node of a
 * hostile graph is checked here before any ggml call sees it (doc/ggml.md,
 * "Validation", step 2).
 */
#ifndef PPRPC_GGML_RULES_H
#define PPRPC_GGML_RULES_H

#include <stddef.h>

#include "ggml.h"

/* node: a ggml tensor whose sources (and view source) were already validated and
 * materialized by the structural validator (types known, ne/nb consistent, extents
 * inside their buffers, sources precede), its own type/ne/nb/op/op_params/flags copied
 * from the wire, data set.  Checks everything ggml's constructor for node->op and the
 * ggml-cpu and ggml-cuda kernels would assert, including that node's type/ne/nb are
 * what ggml's constructor would produce from these sources and params.
 * 0 = ok; PPRPC_EUNSUPP = no rule for this op (the graph is refused, naming the op);
 * PPRPC_EINVAL = invalid, with the reason in err.  Never calls anything that can assert. */
int ggml_rules_check(const struct ggml_tensor *node, char *err, size_t errlen);

/* From the engine's side (daemon/backend/ggml/ggml_build.c): in a
 * GGML_SUPPORTS / GGML_ALLOC_SIZE probe the tensors may have no memory yet
 * (data and buffer NULL).  Index values read from tensor data (GET_ROWS,
 * SET_ROWS, MUL_MAT_ID, ADD_ID, SSM_SCAN, GET_ROWS_BACK) are checked by the
 * engine before such a node runs (ggml_guard.c), so an op that follows
 * indices from data needs a line in ggml_guard.c's table before a rule may
 * accept it; overlaps between a node's output and its sources are the
 * engine's too. */

/* Whether ggml_rules_check has a rule for op (for tests and for error messages). */
int ggml_rules_has_rule(enum ggml_op op);

#endif
