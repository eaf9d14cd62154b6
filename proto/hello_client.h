/*
 * proto/hello_client.h — the connecting side of HELLO: the request, the
 * answer to an authentication challenge, and the checks of the daemon's
 * reply (protocol version, the daemon's proof of the key).  The exchange is
 * described in proto/auth.h.
 *
 * Why here: libpprpc (blocking calls) and pprpcd's peer links (callbacks on
 * the event loop) both connect to daemons.  The steps are pure functions
 * over a small state, so both drive the same logic with their own I/O.
 *
 *   hello_client_init(&h, role, name, key, key_len);
 *   loop: hello_client_request(&h, &req); send req; read the answer;
 *         error reply -> rc = hello_client_refused(&h, code, msg, challenge);
 *                        HELLO_AGAIN: loop (the next request answers the
 *                        challenge); rc < 0: fail with h.why
 *         HelloReply  -> rc = hello_client_accept(&h, rep): 0 or fail (h.why)
 *   hello_client_wipe(&h);
 */
#ifndef PPRPC_PROTO_HELLO_CLIENT_H
#define PPRPC_PROTO_HELLO_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "proto/auth.h"
#include "proto/pprpc.pb-c.h"

#define HELLO_AGAIN 1

struct hello_client {
	uint32_t role;               /* PPRPC__ROLE__ROLE_CLIENT or _PEER */
	const char *name;            /* covered by the proof; never NULL */
	const uint8_t *key;          /* NULL: no key; owned by the caller */
	size_t key_len;
	const char *key_hint;        /* where a key would have come from (for messages) */
	int challenged;              /* a challenge was answered */
	uint8_t sn[AUTH_NONCE_LEN], cn[AUTH_NONCE_LEN], proof[AUTH_PROOF_LEN];
	char why[256];               /* the reason of the last failure */
};

/* Start an exchange.  key may be NULL (then key_len is ignored); name NULL
 * is "".  key_hint completes "no key was given (...)". */
void hello_client_init(struct hello_client *h, uint32_t role, const char *name, const uint8_t *key,
		       size_t key_len, const char *key_hint);
/* The next HELLO: the first one, or after HELLO_AGAIN the answer to the
 * challenge.  req points into h (nonces, proof) until the next call. */
void hello_client_request(const struct hello_client *h, Pprpc__Hello *req);
/* The daemon answered the HELLO with an error (code < 0, its message, the
 * ErrorReply's auth_challenge).  Returns HELLO_AGAIN when the next request
 * answers a challenge, else the code to fail with (reason in h->why):
 * code itself for a refusal, PPRPC_EAUTH when the daemon wants a key we do
 * not have, PPRPC_EINTERNAL when no proof could be computed. */
int hello_client_refused(struct hello_client *h, int code, const char *errmsg, const uint8_t *challenge,
			 size_t challenge_len);
/* The daemon's HelloReply.  0, or PPRPC_EVERSION (another protocol) /
 * PPRPC_EAUTH (we have a key and the daemon did not prove it: it asked for
 * no authentication, or its proof is wrong), reason in h->why. */
int hello_client_accept(struct hello_client *h, const Pprpc__HelloReply *rep);
/* Forget the nonces and the proof. */
void hello_client_wipe(struct hello_client *h);

#endif
