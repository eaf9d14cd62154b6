/* proto/hello_client.c — the connecting side of HELLO (see hello_client.h). */
#include "proto/hello_client.h"

#include <stdio.h>
#include <string.h>

#include "pprpc/types.h"
#include "proto/errtext.h"

void hello_client_init(struct hello_client *h, uint32_t role, const char *name, const uint8_t *key,
		       size_t key_len, const char *key_hint)
{
	memset(h, 0, sizeof(*h));
	h->role = role;
	h->name = name ? name : "";
	h->key = key && key_len ? key : NULL;
	h->key_len = h->key ? key_len : 0;
	h->key_hint = key_hint ? key_hint : "";
}

void hello_client_request(const struct hello_client *h, Pprpc__Hello *req)
{
	pprpc__hello__init(req);
	req->proto_version = PPRPC_PROTO_VERSION;
	req->role = (Pprpc__Role)h->role;
	req->client_name = (char *)h->name;
	if (!h->challenged)
		return;
	req->client_nonce.data = (uint8_t *)h->cn;
	req->client_nonce.len = AUTH_NONCE_LEN;
	req->server_nonce.data = (uint8_t *)h->sn;
	req->server_nonce.len = AUTH_NONCE_LEN;
	req->auth_proof.data = (uint8_t *)h->proof;
	req->auth_proof.len = AUTH_PROOF_LEN;
}

int hello_client_refused(struct hello_client *h, int code, const char *errmsg, const uint8_t *challenge,
			 size_t challenge_len)
{
	errmsg = errmsg && *errmsg ? errmsg : pprpc_err_text(code);
	/* One challenge is answered; a second EAUTH is the daemon's verdict. */
	if (code != PPRPC_EAUTH || challenge_len != AUTH_NONCE_LEN || h->challenged) {
		snprintf(h->why, sizeof(h->why), "%s", errmsg);
		return code < 0 ? code : PPRPC_EPROTO;
	}
	if (!h->key) {
		snprintf(h->why, sizeof(h->why), "%.110s; no key was given (%.110s)", errmsg, h->key_hint);
		return PPRPC_EAUTH;
	}
	memcpy(h->sn, challenge, AUTH_NONCE_LEN);
	if (auth_random(h->cn, AUTH_NONCE_LEN) < 0 ||
	    auth_client_proof(h->key, h->key_len, h->sn, h->cn, h->role, h->name, h->proof) < 0) {
		snprintf(h->why, sizeof(h->why), "cannot compute the authentication proof");
		return PPRPC_EINTERNAL;
	}
	h->challenged = 1;
	return HELLO_AGAIN;
}

int hello_client_accept(struct hello_client *h, const Pprpc__HelloReply *rep)
{
	uint8_t want[AUTH_PROOF_LEN];
	int ok;

	if (h->key) {
		/* A daemon that does not ask cannot prove anything: refuse it
		 * rather than talk to an impostor (or a daemon set up without
		 * the key by mistake). */
		if (!h->challenged) {
			snprintf(h->why, sizeof(h->why), "authentication failed: the daemon did not ask for "
				 "authentication, so it cannot prove it holds the key (it runs without "
				 "auth-key-file?)");
			return PPRPC_EAUTH;
		}
		ok = rep->auth_proof.len == AUTH_PROOF_LEN &&
		     auth_server_proof(h->key, h->key_len, h->cn, h->sn, want) == 0 &&
		     auth_equal(want, rep->auth_proof.data, AUTH_PROOF_LEN);
		auth_wipe(want, sizeof(want));
		if (!ok) {
			snprintf(h->why, sizeof(h->why), "authentication failed: the daemon's proof does not "
				 "match (it does not hold this key)");
			return PPRPC_EAUTH;
		}
	}
	if (rep->proto_version != PPRPC_PROTO_VERSION) {
		snprintf(h->why, sizeof(h->why), "daemon speaks protocol %u, this side %u", rep->proto_version,
			 PPRPC_PROTO_VERSION);
		return PPRPC_EVERSION;
	}
	return 0;
}

void hello_client_wipe(struct hello_client *h)
{
	auth_wipe(h->sn, sizeof(h->sn));
	auth_wipe(h->cn, sizeof(h->cn));
	auth_wipe(h->proof, sizeof(h->proof));
}
