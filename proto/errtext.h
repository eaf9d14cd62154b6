/* proto/errtext.h — text of the PPRPC_E* codes. */
#ifndef PPRPC_PROTO_ERRTEXT_H
#define PPRPC_PROTO_ERRTEXT_H

#include "pprpc/types.h"

/* Static text for a code ("invalid argument"); "unknown error" otherwise. */
const char *pprpc_err_text(int err);

#endif
