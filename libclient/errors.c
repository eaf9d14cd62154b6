/* libclient/errors.c — pprpc_strerror and the version string. */
#include "pprpc.h"
#include "proto/errtext.h"
#include "util/version.h"

PPRPC_API const char *pprpc_strerror(int err)
{
	return pprpc_err_text(err);
}

PPRPC_API const char *pprpc_version_string(void)
{
	return PPRPC_VERSION;
}
