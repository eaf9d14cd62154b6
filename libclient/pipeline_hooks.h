/*
 * libclient/pipeline_hooks.h — test hooks of the pipeline helper.  Not
 * part of the public headers and not exported by libpprpc.so: only
 * programs linked with libpprpc.a (the tests, pp-fence-test's negative
 * control) reach them.
 */
#ifndef PPRPC_LIBCLIENT_PIPELINE_HOOKS_H
#define PPRPC_LIBCLIENT_PIPELINE_HOOKS_H

#include "pprpc_pipeline.h"

/* Negative control: drop the write-after-read ordering that keeps a stage
 * from overwriting a boundary slot still being read.  Both slots collapse
 * into slot 0, the WAITs are not issued, and each stage's GET of
 * micro-batch m is queued after its RUN of m+1 (the run-ahead that the
 * second slot and the WAITs exist to make safe), so on the client path the
 * boundaries carry the wrong micro-batch.  Applies to later runs. */
void pipeline_hook_skip_war_wait(pprpc_pipeline *p, int on);

#endif
