/* daemon/handlers/h_hello.c — HELLO: version check, authentication (authn.c),
 * capabilities, devices. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/server/authn.h"
#include "daemon/server/conn.h"
#include "daemon/device/device.h"
#include "daemon/server/dispatch.h"
#include "daemon/pprpcd.h"
#include "daemon/weights/weights.h"
#include "daemon/server/reply.h"
#include "daemon/device/devinfo.h"
#include "pprpc/types.h"

/* The name llama.cpp's plugin gives its connections ("ggml-pprpc pid N",
 * ggml-pprpc/rank.c and monitor.c; the plugin may reach no daemon header).
 * A name, not a credential: all it starts is the last load's read-ahead. */
#define GGML_CLIENT_NAME "ggml-pprpc"

void h_hello(struct conn *c, struct request *r)
{
	const Pprpc__Hello *m = (const Pprpc__Hello *)r->msg;
	Pprpc__HelloReply rep = PPRPC__HELLO_REPLY__INIT;
	Pprpc__Capabilities caps = PPRPC__CAPABILITIES__INIT;
	struct devinfo_set set;
	uint8_t proof[AUTH_PROOF_LEN];
	char msg[160];

	if (c->hello_done) {
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EPROTO, "HELLO was already received");
		return;
	}
	if (m->proto_version != PPRPC_PROTO_VERSION) {
		snprintf(msg, sizeof(msg), "client speaks protocol %u, this daemon speaks %u",
			 m->proto_version, PPRPC_PROTO_VERSION);
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EVERSION, msg);
		conn_close(c);
		return;
	}
	if (c->d->auth_key_len) {
		if (authn_hello(c, r, m, proof) != 0)
			return; /* challenged, or refused and closing */
		rep.auth_proof.data = proof;
		rep.auth_proof.len = sizeof(proof);
	}
	c->hello_done = 1;
	c->role = m->role;
	if (m->client_name && *m->client_name)
		snprintf(c->name, sizeof(c->name), "%.40s@%.20s", m->client_name, transport_peer(c->t));
	if (m->role == PPRPC__ROLE__ROLE_CLIENT && c->d->weights && m->client_name &&
	    !strncmp(m->client_name, GGML_CLIENT_NAME, strlen(GGML_CLIENT_NAME))) {
		/* llama.cpp's plugin (the client that maps model files; not
		 * pprpcctl or another tool) is about to read its model and
		 * then map ours: the last load's regions, read now, side by
		 * side with its read */
		char what[400];

		wsrc_recall(c->d->weights, what, sizeof(what));
		if (what[0])
			LOG(c->d, LOG_NOTICE_, "conn %" PRIu64 ": weights: %s", c->id, what);
	}

	/* Advertise only what this daemon really provides. */
	caps.async = 1;   /* queued commands, sticky errors, FENCE */
	caps.events = 1;  /* timelines: SIGNAL / WAIT (local and cross-rank) */
	caps.p2p = 1;     /* SEND/RECV daemon to daemon (peer links) */
	caps.rdma = c->d->rdma_listener != NULL;
	caps.weights_file = c->d->weights && wsrc_has_files(c->d->weights);
	caps.weights_cache = c->d->weights && wsrc_has_cache(c->d->weights);
	caps.ggml_create_run = 1;  /* GGML_GRAPH_CREATE can queue the graph's first run */  /* an rdmacm listener is up on a device */
	rep.proto_version = PPRPC_PROTO_VERSION;
	rep.daemon_version = PPRPC_VERSION;
	rep.caps = &caps;
	rep.max_bulk = c->d->opts.max_bulk;
	rep.session = c->id;
	rep.placement = c->d->placement;
	rep.host = c->d->boot_id;
	char *unavail[PPRPCD_MAX_DEVICES];

	for (uint32_t i = 0; i < c->d->nunavail; i++)
		unavail[i] = c->d->unavail[i];
	rep.n_unavailable = c->d->nunavail;
	rep.unavailable = unavail;
	devinfo_fill(c->d, &set);
	rep.n_devices = set.n;
	rep.devices = set.ptrs;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
}
