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

/* Whether ggml_rules_check has a rule for op (for tests and for error messages). */
int ggml_rules_has_rule(enum ggml_op op);

#endif
