/*
 * tests/unit/test_hello_client.c — the connecting side of HELLO
 * (proto/hello_client.c) against a daemon played here with the proof
 * functions of proto/auth.h: every verdict the library and the peer links
 * rely on, without sockets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pprpc/types.h"
#include "proto/auth.h"
#include "proto/hello_client.h"

static const uint8_t key[40] = "0123456789abcdef0123456789abcdef-key-40";
static const uint8_t other[40] = "another key, also forty bytes long......";

static void challenge(uint8_t sn[AUTH_NONCE_LEN])
{
	for (int i = 0; i < AUTH_NONCE_LEN; i++)
		sn[i] = (uint8_t)(3 + i * 5);
}

/* A reply as a daemon holding k would send it to req. */
static void reply(const uint8_t *k, const Pprpc__Hello *req, uint8_t proof[AUTH_PROOF_LEN],
		  Pprpc__HelloReply *rep)
{
	pprpc__hello_reply__init(rep);
	rep->proto_version = PPRPC_PROTO_VERSION;
	assert_int_equal(auth_server_proof(k, 40, req->client_nonce.data, req->server_nonce.data, proof), 0);
	rep->auth_proof.data = proof;
	rep->auth_proof.len = AUTH_PROOF_LEN;
}

static void test_no_key_no_auth(void **state)
{
	struct hello_client h;
	Pprpc__Hello req;
	Pprpc__HelloReply rep;

	(void)state;
	hello_client_init(&h, PPRPC__ROLE__ROLE_CLIENT, NULL, NULL, 0, "hint");
	hello_client_request(&h, &req);
	assert_int_equal(req.proto_version, PPRPC_PROTO_VERSION);
	assert_string_equal(req.client_name, "");
	assert_int_equal(req.auth_proof.len, 0);
	pprpc__hello_reply__init(&rep);
	rep.proto_version = PPRPC_PROTO_VERSION;
	assert_int_equal(hello_client_accept(&h, &rep), 0);
	rep.proto_version = PPRPC_PROTO_VERSION + 1;
	assert_int_equal(hello_client_accept(&h, &rep), PPRPC_EVERSION);
	assert_non_null(strstr(h.why, "speaks protocol"));
}

static void test_challenge_answered(void **state)
{
	struct hello_client h;
	Pprpc__Hello req;
	Pprpc__HelloReply rep;
	uint8_t sn[AUTH_NONCE_LEN], want[AUTH_PROOF_LEN], sp[AUTH_PROOF_LEN];

	(void)state;
	challenge(sn);
	hello_client_init(&h, PPRPC__ROLE__ROLE_PEER, "pprpcd-peer", key, sizeof(key), "hint");
	assert_int_equal(hello_client_refused(&h, PPRPC_EAUTH, "authentication required", sn, sizeof(sn)),
			 HELLO_AGAIN);
	hello_client_request(&h, &req);
	assert_int_equal(req.role, PPRPC__ROLE__ROLE_PEER);
	assert_int_equal(req.server_nonce.len, AUTH_NONCE_LEN);
	assert_memory_equal(req.server_nonce.data, sn, AUTH_NONCE_LEN);
	/* the proof is the documented one over this challenge and our nonce */
	assert_int_equal(auth_client_proof(key, sizeof(key), sn, req.client_nonce.data, PPRPC__ROLE__ROLE_PEER,
					   "pprpcd-peer", want), 0);
	assert_int_equal(req.auth_proof.len, AUTH_PROOF_LEN);
	assert_memory_equal(req.auth_proof.data, want, AUTH_PROOF_LEN);
	/* the daemon's proof is checked: right key accepted, another refused */
	reply(key, &req, sp, &rep);
	assert_int_equal(hello_client_accept(&h, &rep), 0);
	reply(other, &req, sp, &rep);
	assert_int_equal(hello_client_accept(&h, &rep), PPRPC_EAUTH);
	assert_non_null(strstr(h.why, "proof does not match"));
	rep.auth_proof.len = 0;
	assert_int_equal(hello_client_accept(&h, &rep), PPRPC_EAUTH);
	/* a second challenge is the daemon's verdict, not answered again */
	assert_int_equal(hello_client_refused(&h, PPRPC_EAUTH, "authentication failed: wrong key", sn, sizeof(sn)),
			 PPRPC_EAUTH);
	assert_string_equal(h.why, "authentication failed: wrong key");
	hello_client_wipe(&h);
}

static void test_refusals(void **state)
{
	struct hello_client h;
	Pprpc__HelloReply rep;
	uint8_t sn[AUTH_NONCE_LEN];

	(void)state;
	challenge(sn);
	/* challenged without a key: says where a key would come from */
	hello_client_init(&h, PPRPC__ROLE__ROLE_CLIENT, "c", NULL, 0, "give auth_key_file");
	assert_int_equal(hello_client_refused(&h, PPRPC_EAUTH, "authentication required", sn, sizeof(sn)),
			 PPRPC_EAUTH);
	assert_non_null(strstr(h.why, "no key was given (give auth_key_file)"));
	/* with a key, a daemon that asks for nothing cannot prove the key */
	hello_client_init(&h, PPRPC__ROLE__ROLE_CLIENT, "c", key, sizeof(key), "");
	pprpc__hello_reply__init(&rep);
	rep.proto_version = PPRPC_PROTO_VERSION;
	assert_int_equal(hello_client_accept(&h, &rep), PPRPC_EAUTH);
	assert_non_null(strstr(h.why, "did not ask for authentication"));
	/* any other error (or an EAUTH without a well-formed challenge) is final */
	assert_int_equal(hello_client_refused(&h, PPRPC_EVERSION, "bad version", NULL, 0), PPRPC_EVERSION);
	assert_string_equal(h.why, "bad version");
	assert_int_equal(hello_client_refused(&h, PPRPC_EAUTH, "", sn, 16), PPRPC_EAUTH);
	assert_string_equal(h.why, "authentication failed");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_key_no_auth),
		cmocka_unit_test(test_challenge_answered),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
