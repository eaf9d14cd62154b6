/*
 * util/ggml_release.h — is the ggml met at run time the one pprpc was built
 * against?  Used by the plugin (loaded into a llama.cpp tool) and by the
 * daemon's ggml engine.  Header-only: the release macros exist only where
 * ggml's headers do (the Makefile's GGML_INC), and nothing here calls ggml.
 *
 * Why it matters: ggml's backend API version stays the same across
 * releases while op numbering, op_params layouts and struct ggml_tensor may
 * change, so ggml's own loader would accept a plugin built for another
 * release and the graphs would then be misread.  The version (ggml's
 * CMakeLists) differs between every two releases; the commit is checked too
 * where the library knows it ("unknown" when it was built outside git).
 */
#ifndef PPRPC_UTIL_GGML_RELEASE_H
#define PPRPC_UTIL_GGML_RELEASE_H

#include <stdio.h>
#include <string.h>

#if defined(PPRPC_GGML_VERSION) && defined(PPRPC_GGML_COMMIT) && defined(PPRPC_LLAMA_RELEASE)
/* 0 when `version` / `commit` (ggml_version(), ggml_commit() of the running
 * library) are the build's; else -1 with the reason in err. */
static inline int pprpc_ggml_release_check(const char *version, const char *commit, char *err, size_t errlen)
{
	size_t n = strlen(PPRPC_GGML_COMMIT);

	if (!version || strcmp(version, PPRPC_GGML_VERSION) != 0) {
		snprintf(err, errlen, "this process runs ggml %s, but pprpc was built against ggml %s (llama.cpp %s); "
			 "rebuild pprpc against this llama.cpp (make LLAMA_RELEASE=...) or run the matching llama.cpp",
			 version ? version : "(unknown)", PPRPC_GGML_VERSION, PPRPC_LLAMA_RELEASE);
		return -1;
	}
	if (commit && strcmp(commit, "unknown") != 0 && strncmp(commit, PPRPC_GGML_COMMIT, n) != 0) {
		snprintf(err, errlen, "this process runs ggml %s of commit %s, but pprpc was built against commit %s "
			 "(llama.cpp %s); rebuild pprpc against this llama.cpp", version, commit, PPRPC_GGML_COMMIT,
			 PPRPC_LLAMA_RELEASE);
		return -1;
	}
	return 0;
}
#endif

#endif
