/* daemon/server/authn.c — shared-key authentication, daemon side (see authn.h). */
#include "daemon/server/authn.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "daemon/server/conn.h"
#include "daemon/pprpcd.h"
#include "daemon/server/reply.h"
#include "pprpc/types.h"
#include "util/addr.h"

_Static_assert(sizeof(((struct conn *)0)->auth_nonce) == AUTH_NONCE_LEN, "conn.h: auth_nonce size");

enum authn_listen authn_listen_policy(const struct sockaddr *sa, int has_key, int insecure)
{
	if (has_key || addr_is_loopback(sa))
		return AUTHN_LISTEN_OK;
	return insecure ? AUTHN_LISTEN_WARN : AUTHN_LISTEN_REFUSE;
}

int authn_start(struct pprpcd *d, const char *host, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char err[600];
	int rc;

	if (d->opts.auth_key_file[0]) {
		rc = auth_key_load(d->opts.auth_key_file, d->auth_key, sizeof(d->auth_key), &d->auth_key_len,
				   err, sizeof(err));
		if (rc < 0) {
			LOG(d, LOG_ERR_, "%s", err);
			return rc;
		}
		LOG(d, LOG_INFO_, "authentication on: clients and peers must prove the key of %s",
		    d->opts.auth_key_file);
	}
	if (addr_resolve(host, port, &ss, &sl) < 0) {
		LOG(d, LOG_ERR_, "listen: cannot resolve '%s'", host);
		return PPRPC_EINVAL;
	}
	switch (authn_listen_policy((const struct sockaddr *)&ss, d->auth_key_len > 0, d->opts.insecure_listen)) {
	case AUTHN_LISTEN_OK:
		return 0;
	case AUTHN_LISTEN_WARN:
		LOG(d, LOG_WARN_, "listening on non-loopback %s WITHOUT authentication (insecure-listen): "
		    "anyone who can reach it can use this daemon's devices and memory", host);
		return 0;
	default:
		LOG(d, LOG_ERR_, "refusing to listen on non-loopback address %s without authentication: "
		    "set auth-key-file (all ranks and clients share the key), or insecure-listen = 1 "
		    "to serve unauthenticated clients from the network", host);
		return PPRPC_EAUTH;
	}
}

void authn_fini(struct pprpcd *d)
{
	auth_wipe(d->auth_key, sizeof(d->auth_key));
	d->auth_key_len = 0;
}

static int refuse(struct conn *c, const struct request *r, const char *why)
{
	char msg[200];

	snprintf(msg, sizeof(msg), "authentication failed: %s", why);
	LOG(c->d, LOG_NOTICE_, "conn %" PRIu64 " (%s): %s; closing", c->id, c->name, msg);
	reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EAUTH, msg);
	conn_close(c);
	return PPRPC_EAUTH;
}

static int challenge(struct conn *c, const struct request *r)
{
	Pprpc__ErrorReply e = PPRPC__ERROR_REPLY__INIT;

	if (c->auth_challenges >= AUTHN_MAX_CHALLENGES)
		return refuse(c, r, "too many challenges on one connection");
	if (auth_random(c->auth_nonce, AUTH_NONCE_LEN) < 0)
		return refuse(c, r, "no random nonce available");
	c->auth_pending = 1;
	c->auth_nonce_ms = uv_now(c->d->loop);
	c->auth_challenges++;
	e.code = PPRPC_EAUTH;
	e.message = "authentication required: this daemon needs proof of the shared key";
	e.command = r->hdr.req_id;
	e.command_type = r->hdr.type;
	e.auth_challenge.data = c->auth_nonce;
	e.auth_challenge.len = AUTH_NONCE_LEN;
	reply_challenge(c, r->hdr.type, r->hdr.req_id, &e);
	return 1;
}

int authn_hello(struct conn *c, const struct request *r, const Pprpc__Hello *m,
		uint8_t out_proof[AUTH_PROOF_LEN])
{
	struct pprpcd *d = c->d;
	uint8_t want[AUTH_PROOF_LEN];
	int pending = c->auth_pending, ok;

	if (m->auth_proof.len == 0)
		return challenge(c, r);
	/* One answer per challenge, right or wrong. */
	c->auth_pending = 0;
	if (!pending)
		return refuse(c, r, "no challenge is outstanding on this connection (a replayed or unsolicited proof)");
	if (m->server_nonce.len != AUTH_NONCE_LEN || !auth_equal(m->server_nonce.data, c->auth_nonce, AUTH_NONCE_LEN))
		return refuse(c, r, "the proof answers another challenge (replayed?)");
	if (uv_now(d->loop) - c->auth_nonce_ms > AUTH_CHALLENGE_MS)
		return refuse(c, r, "the challenge expired");
	if (m->client_nonce.len != AUTH_NONCE_LEN || m->auth_proof.len != AUTH_PROOF_LEN)
		return refuse(c, r, "malformed proof");
	if (auth_client_proof(d->auth_key, d->auth_key_len, c->auth_nonce, m->client_nonce.data,
			      (uint32_t)m->role, m->client_name, want) < 0)
		return refuse(c, r, "cannot compute the proof");
	ok = auth_equal(want, m->auth_proof.data, AUTH_PROOF_LEN);
	auth_wipe(want, sizeof(want));
	if (!ok)
		return refuse(c, r, "wrong key (the proof does not match this daemon's key)");
	if (auth_server_proof(d->auth_key, d->auth_key_len, m->client_nonce.data, c->auth_nonce, out_proof) < 0)
		return refuse(c, r, "cannot compute the daemon's proof");
	return 0;
}
