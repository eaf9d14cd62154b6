/*
 * daemon/handlers/h_fence.c — FENCE: replies when every earlier command of this
 * connection on the device's queue has completed (a marker that rides the
 * in-order queue), with the stream's first failure, which it clears.
 */
#include <stdio.h>
#include <stdlib.h>

#include "daemon/server/conn.h"
#include "daemon/device/device.h"
#include "daemon/server/dispatch.h"
#include "daemon/pprpcd.h"
#include "daemon/request/qreq.h"
#include "daemon/server/reply.h"
#include "pprpc/types.h"

void h_fence(struct conn *c, struct request *r)
{
	const Pprpc__Fence *m = (const Pprpc__Fence *)r->msg;
	struct device *dev = pprpcd_device(c->d, m->device);
	char err[64];

	if (!dev) {
		snprintf(err, sizeof(err), "no device %u", m->device);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EINVAL, err);
		return;
	}
	qreq_fence(c, r, dev);
}
