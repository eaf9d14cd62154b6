/*
 * tests/llama/ggml_version_shim.c — an LD_PRELOAD shim that makes the
 * running ggml say it is another release (ggml_version() answers
 * PPRPC_FAKE_GGML_VERSION): what the plugin sees when it is loaded into a
 * llama.cpp of another release (tests/llama/release.sh).
 */
#include <stdlib.h>

__attribute__((visibility("default"))) const char *ggml_version(void);

const char *ggml_version(void)
{
	const char *v = getenv("PPRPC_FAKE_GGML_VERSION");
	return v ? v : "0.0.0";
}
