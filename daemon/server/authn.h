/*
 * daemon/server/authn.h — the daemon's side of shared-key authentication
 * (exchange and rationale in proto/auth.h): loading the key, the policy for
 * the listen address, and checking a HELLO.
 */
#ifndef PPRPC_DAEMON_AUTHN_H
#define PPRPC_DAEMON_AUTHN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "proto/auth.h"
#include "proto/pprpc.pb-c.h"

struct pprpcd;
struct conn;
struct request;

/* Challenges one connection may ask for (a HELLO without proof each). */
#define AUTHN_MAX_CHALLENGES 3

enum authn_listen { AUTHN_LISTEN_OK = 0, AUTHN_LISTEN_WARN = 1, AUTHN_LISTEN_REFUSE = -1 };

/* Without a key, only loopback is served unless insecure is set (then with
 * a warning).  Pure: decides, logs nothing. */
enum authn_listen authn_listen_policy(const struct sockaddr *sa, int has_key, int insecure);

/* Start-up: load auth_key_file (if set) and apply the listen policy to
 * host:port.  0, or a negative code after logging why. */
int authn_start(struct pprpcd *d, const char *host, uint16_t port);
void authn_fini(struct pprpcd *d);

/* HELLO on a keyed daemon.  Returns 0 when m proves the key (out_proof then
 * holds the daemon's own proof for the reply); otherwise the reply is
 * already sent — a challenge (1), or a refusal with the connection closed
 * (a negative code). */
int authn_hello(struct conn *c, const struct request *r, const Pprpc__Hello *m,
		uint8_t out_proof[AUTH_PROOF_LEN]);

#endif
