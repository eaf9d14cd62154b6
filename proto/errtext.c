/* proto/errtext.c — text of the PPRPC_E* codes (shared by daemon and client). */
#include "proto/errtext.h"

static const char *const texts[PPRPC_E_COUNT_] = {
	[0] = "success",
	[-PPRPC_EINVAL] = "invalid argument",
	[-PPRPC_ENOMEM] = "out of memory",
	[-PPRPC_EPROTO] = "protocol error (malformed frame or message)",
	[-PPRPC_EVERSION] = "protocol version mismatch",
	[-PPRPC_EHANDLE] = "unknown, stale or foreign handle",
	[-PPRPC_ERANGE] = "tensor region outside its buffer",
	[-PPRPC_ESHAPE] = "shapes do not fit the operation",
	[-PPRPC_ETYPE] = "element type not supported by the operation",
	[-PPRPC_EGRAPH] = "invalid graph topology",
	[-PPRPC_EFLOOR] = "allocation would cross the memory floor",
	[-PPRPC_EIO] = "I/O error",
	[-PPRPC_ECONN] = "cannot connect or connection lost",
	[-PPRPC_ETIMEDOUT] = "timed out",
	[-PPRPC_ETOOBIG] = "size exceeds a limit",
	[-PPRPC_EUNSUPP] = "not supported",
	[-PPRPC_EDEVICE] = "device failure",
	[-PPRPC_EAUTH] = "authentication failed",
	[-PPRPC_EBUSY] = "object in use",
	[-PPRPC_ECANCELED] = "cancelled",
	[-PPRPC_ELIMIT] = "resource limit reached",
	[-PPRPC_EQUEUE] = "skipped after an earlier failure on the queue",
	[-PPRPC_EINTERNAL] = "internal error",
	[-PPRPC_ECLOSED] = "connection closed",
};

const char *pprpc_err_text(int err)
{
	if (err > 0 || err <= -PPRPC_E_COUNT_ || !texts[-err])
		return "unknown error";
	return texts[-err];
}
