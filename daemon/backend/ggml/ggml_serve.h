/*
 * daemon/backend/ggml/ggml_serve.h — the ggml requests on the daemon's side
 * (GGML_GRAPH_CREATE, GGML_SUPPORTS, GGML_ALLOC_SIZE; doc/ggml.md): the
 * connection's buffers resolved for the engine, graphs made into daemon
 * graph objects.  Free of ggml types, so the handlers (h_ggml.c) build with
 * or without ggml; without it (ggml_none.c) each answers PPRPC_EUNSUPP.
 */
#ifndef PPRPC_DAEMON_GGML_SERVE_H
#define PPRPC_DAEMON_GGML_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/pprpc.pb-c.h"

struct pprpcd;
struct owner;
struct graph;
struct ggml_create;

/* Validate and create m's graph for owner o (refs = 1, buffers held), or a
 * negative code with the reason. */
int ggml_serve_graph_create(struct pprpcd *d, struct owner *o, const Pprpc__GgmlGraphCreate *m,
			    struct graph **ret_g, char *err, size_t errlen);
/* The same create in three steps, so that its middle one may leave the
 * loop (h_ggml.c).  begin (loop): the device and limit checks, the
 * context's charge, the graph object and every buffer the tensors name,
 * resolved and held; *ret_j keeps m, which must outlive the job.  build
 * (any thread, once): decodes and checks the graph from what begin
 * resolved, touching nothing else of the daemon.  finish (loop): the
 * graph's costs, then the graph (refs = 1) or a negative code with the
 * reason; frees the job either way.  drop (loop): frees a job that will
 * not be finished, with everything it holds. */
int ggml_serve_create_begin(struct pprpcd *d, struct owner *o, const Pprpc__GgmlGraphCreate *m,
			    struct ggml_create **ret_j, char *err, size_t errlen);
void ggml_serve_create_build(struct ggml_create *j);
int ggml_serve_create_finish(struct ggml_create *j, struct graph **ret_g, char *err, size_t errlen);
void ggml_serve_create_drop(struct ggml_create *j);
/* A negative code for a malformed request; else 0 with *ret_ok and, when
 * false, the reason in why. */
int ggml_serve_supports(struct pprpcd *d, struct owner *o, const Pprpc__GgmlSupports *m, bool *ret_ok, char *why,
			size_t whylen);
int ggml_serve_alloc_size(struct pprpcd *d, struct owner *o, const Pprpc__GgmlAllocSize *m, uint64_t *ret_size,
			  char *err, size_t errlen);

#endif
