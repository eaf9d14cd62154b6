/*
 * daemon/backend/ggml/ggml_load.h — ggml's backends found and checked once
 * per process, before the first ggml device opens.
 */
#ifndef PPRPC_DAEMON_GGML_LOAD_H
#define PPRPC_DAEMON_GGML_LOAD_H

#include <stddef.h>

/* Check that the ggml this process runs with is the release pprpc was built
 * against, then load its backend modules (GGML_BACKEND_DL builds: the CPU
 * variants, ggml-cuda) from the folder that holds libggml-base: the build
 * tree, or PREFIX/lib/pprpc of an install.  Idempotent; thread-compatible
 * (the daemon calls it from its main thread).
 * Returns 0, or PPRPC_EVERSION / PPRPC_EDEVICE with the reason in err. */
int gge_backends_load(char *err, size_t errlen);

#endif
