/*
 * daemon/backend/ggml/ggml_load.c — ggml's backends found and checked once
 * per process (see ggml_load.h).
 *
 * llama.cpp's releases build ggml with GGML_BACKEND_DL: the CPU backend is
 * not in libggml but in one module per instruction set
 * (libggml-cpu-haswell.so, ...-sapphirerapids.so), ggml-cuda another module,
 * and ggml's loader picks the best CPU variant for the running CPU.  The
 * loader looks beside the executable by default; pprpcd's modules are beside
 * libggml-base instead (the llama.cpp build tree, or PREFIX/lib/pprpc of an
 * install, both reached through pprpcd's RUNPATH), so that folder is the one
 * named here: found with dladdr, never a path from the build.
 */
#include "daemon/backend/ggml/ggml_load.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "pprpc/types.h"
#include "util/ggml_release.h"

static bool have_cpu(void)
{
	return ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU) != NULL;
}

int gge_backends_load(char *err, size_t errlen)
{
	static int done, result;
	char dir[PATH_MAX];
	Dl_info info;
	char *slash;

	if (done)
		return result;
	done = 1;
	if (pprpc_ggml_release_check(ggml_version(), ggml_commit(), err, errlen) < 0)
		return result = PPRPC_EVERSION;
	/* a ggml built without GGML_BACKEND_DL has its CPU backend linked in */
	if (have_cpu())
		return result = 0;
	if (!dladdr((void *)ggml_backend_load_all_from_path, &info) || !info.dli_fname ||
	    snprintf(dir, sizeof(dir), "%s", info.dli_fname) >= (int)sizeof(dir) || !(slash = strrchr(dir, '/'))) {
		snprintf(err, errlen, "cannot tell where libggml is (dladdr), so ggml's backends cannot be found");
		return result = PPRPC_EDEVICE;
	}
	*slash = '\0';
	ggml_backend_load_all_from_path(dir);
	if (!have_cpu()) {
		snprintf(err, errlen, "no ggml CPU backend in %s (libggml-cpu-*.so: none there, or none runs on this CPU)",
			 dir);
		return result = PPRPC_EDEVICE;
	}
	return result = 0;
}
