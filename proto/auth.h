/*
 * proto/auth.h — optional shared-key authentication at HELLO.
 *
 * All ranks and their clients share one secret key (a file of at least 32
 * bytes, readable by its owner only).  Nothing derived from the key but
 * HMAC-SHA256 values ever travels; nonces come from the OpenSSL CSPRNG and
 * proofs are compared in constant time.  The exchange, in request/reply
 * form (HELLO is always the first request of a connection):
 *
 *   client                                        daemon (with a key)
 *   HELLO {version, role, name}  (no proof)       ->
 *                                                 <- ERROR PPRPC_EAUTH "authentication
 *                                                    required", auth_challenge = Ns
 *                                                    (fresh, 32 bytes, remembered by this
 *                                                    connection only, valid 10 s, one use)
 *   HELLO {version, role, name, client_nonce Nc (fresh, 32 bytes),
 *          server_nonce Ns,
 *          auth_proof = HMAC(K, "pprpc-v1 client\0" || Ns || Nc || role:u32le
 *                                || len(name):u32le || name)}  ->
 *                                                 verify (Ns is this connection's
 *                                                 outstanding challenge, not expired;
 *                                                 the challenge is consumed whatever the
 *                                                 outcome), then
 *                                                 <- HELLO reply {..., auth_proof =
 *                                                    HMAC(K, "pprpc-v1 server\0" || Nc || Ns)}
 *                                                 or ERROR PPRPC_EAUTH and close.
 *   verify the daemon's proof (a client with a key refuses a daemon that does
 *   not prove the key, including one that asks for no authentication at all).
 *
 * Why replay fails: a proof answers one challenge, which lives only in the
 * connection that issued it, for one attempt and 10 s; a recorded HELLO sent
 * on another connection names a challenge that connection never issued.
 * The labels differ between the two directions, so a daemon's proof cannot
 * be reflected as a client's.  Role and name are covered, so they cannot be
 * changed in transit.
 *
 * What this is not: the stream is neither encrypted nor integrity-protected
 * after HELLO.  It keeps strangers out of a daemon; on an untrusted network
 * run pprpc inside a VPN or TLS tunnel.
 *
 * Pure functions (no daemon or client state) so both sides and the unit
 * tests share them.
 */
#ifndef PPRPC_PROTO_AUTH_H
#define PPRPC_PROTO_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define AUTH_NONCE_LEN 32
#define AUTH_PROOF_LEN 32          /* HMAC-SHA256 */
#define AUTH_KEY_MIN 32
#define AUTH_KEY_MAX 4096
#define AUTH_CHALLENGE_MS 10000    /* a challenge must be answered within this */

/* Fill out with n cryptographically random bytes.  0 or PPRPC_EINTERNAL. */
int auth_random(uint8_t *out, size_t n);

/* The client's proof for challenge server_nonce (see above).  0, or
 * PPRPC_EINVAL / PPRPC_EINTERNAL. */
int auth_client_proof(const uint8_t *key, size_t key_len, const uint8_t server_nonce[AUTH_NONCE_LEN],
		      const uint8_t client_nonce[AUTH_NONCE_LEN], uint32_t role, const char *name,
		      uint8_t out[AUTH_PROOF_LEN]);
/* The daemon's proof. */
int auth_server_proof(const uint8_t *key, size_t key_len, const uint8_t client_nonce[AUTH_NONCE_LEN],
		      const uint8_t server_nonce[AUTH_NONCE_LEN], uint8_t out[AUTH_PROOF_LEN]);
/* 1 when the n bytes are equal, compared in constant time. */
int auth_equal(const uint8_t *a, const uint8_t *b, size_t n);

/* Read a key file: a regular file, no permissions for group or others,
 * AUTH_KEY_MIN..AUTH_KEY_MAX bytes after one trailing newline ("\n" or
 * "\r\n", so `openssl rand -hex 32 > key` works) is dropped.  The key is
 * the file's bytes as they are (hex text is used as text, not decoded).
 * Returns 0 with *ret_len, or PPRPC_EINVAL / PPRPC_EIO with the reason in
 * err (naming the path). */
int auth_key_load(const char *path, uint8_t *key, size_t cap, size_t *ret_len, char *err, size_t errlen);

/* Wipe secret material (not optimised away). */
void auth_wipe(void *p, size_t n);

#endif
