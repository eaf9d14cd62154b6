/* proto/auth.c — HELLO proofs and key files (see auth.h).  No crypto of our
 * own: HMAC through OpenSSL's EVP_MAC, nonces from RAND_bytes, comparison
 * with CRYPTO_memcmp. */
#include "proto/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "pprpc/types.h"

static const char client_label[] = "pprpc-v1 client"; /* hashed with its NUL */
static const char server_label[] = "pprpc-v1 server";

int auth_random(uint8_t *out, size_t n)
{
	return n <= INT32_MAX && RAND_bytes(out, (int)n) == 1 ? 0 : PPRPC_EINTERNAL;
}

struct part {
	const void *p;
	size_t n;
};

static int hmac_parts(const uint8_t *key, size_t key_len, const struct part *parts, int nparts,
		      uint8_t out[AUTH_PROOF_LEN])
{
	EVP_MAC *mac = NULL;
	EVP_MAC_CTX *ctx = NULL;
	OSSL_PARAM params[2];
	size_t outl = 0;
	int rc = PPRPC_EINTERNAL;

	if (!key || key_len < AUTH_KEY_MIN || key_len > AUTH_KEY_MAX)
		return PPRPC_EINVAL;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (!mac || !(ctx = EVP_MAC_CTX_new(mac)) || !EVP_MAC_init(ctx, key, key_len, params))
		goto out;
	for (int i = 0; i < nparts; i++)
		if (parts[i].n && !EVP_MAC_update(ctx, parts[i].p, parts[i].n))
			goto out;
	if (!EVP_MAC_final(ctx, out, &outl, AUTH_PROOF_LEN) || outl != AUTH_PROOF_LEN)
		goto out;
	rc = 0;
out:
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	return rc;
}

static void put_le32(uint8_t b[4], uint32_t v)
{
	b[0] = (uint8_t)v;
	b[1] = (uint8_t)(v >> 8);
	b[2] = (uint8_t)(v >> 16);
	b[3] = (uint8_t)(v >> 24);
}

int auth_client_proof(const uint8_t *key, size_t key_len, const uint8_t server_nonce[AUTH_NONCE_LEN],
		      const uint8_t client_nonce[AUTH_NONCE_LEN], uint32_t role, const char *name,
		      uint8_t out[AUTH_PROOF_LEN])
{
	size_t nl = name ? strlen(name) : 0;
	uint8_t r[4], l[4];
	struct part parts[] = {
		{ client_label, sizeof(client_label) },
		{ server_nonce, AUTH_NONCE_LEN },
		{ client_nonce, AUTH_NONCE_LEN },
		{ r, 4 },
		{ l, 4 },
		{ name, nl },
	};

	if (nl > UINT32_MAX)
		return PPRPC_EINVAL;
	put_le32(r, role);
	put_le32(l, (uint32_t)nl);
	return hmac_parts(key, key_len, parts, 6, out);
}

int auth_server_proof(const uint8_t *key, size_t key_len, const uint8_t client_nonce[AUTH_NONCE_LEN],
		      const uint8_t server_nonce[AUTH_NONCE_LEN], uint8_t out[AUTH_PROOF_LEN])
{
	struct part parts[] = {
		{ server_label, sizeof(server_label) },
		{ client_nonce, AUTH_NONCE_LEN },
		{ server_nonce, AUTH_NONCE_LEN },
	};

	return hmac_parts(key, key_len, parts, 3, out);
}

int auth_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}

void auth_wipe(void *p, size_t n)
{
	if (p && n)
		OPENSSL_cleanse(p, n);
}

int auth_key_load(const char *path, uint8_t *key, size_t cap, size_t *ret_len, char *err, size_t errlen)
{
	uint8_t buf[AUTH_KEY_MAX + 3];
	struct stat st;
	size_t n = 0;
	int fd, rc = PPRPC_EINVAL;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(err, errlen, "auth key file %s: %s", path, strerror(errno));
		return PPRPC_EIO;
	}
	/* fstat the opened file: what is checked is what is read. */
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "auth key file %s: %s", path, strerror(errno));
		rc = PPRPC_EIO;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "auth key file %s: not a regular file", path);
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(err, errlen,
			 "auth key file %s: permissions %04o give access to group or others; "
			 "it holds a secret (chmod 600 %s)", path, (unsigned)(st.st_mode & 07777), path);
		goto out;
	}
	for (;;) {
		ssize_t k = read(fd, buf + n, sizeof(buf) - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			snprintf(err, errlen, "auth key file %s: %s", path, strerror(errno));
			rc = PPRPC_EIO;
			goto out;
		}
		if (k == 0)
			break;
		n += (size_t)k;
		if (n == sizeof(buf))
			break;
	}
	if (n && buf[n - 1] == '\n')
		n--;
	if (n && buf[n - 1] == '\r')
		n--;
	if (n > AUTH_KEY_MAX || n > cap) {
		snprintf(err, errlen, "auth key file %s: longer than %d bytes", path, AUTH_KEY_MAX);
		goto out;
	}
	if (n < AUTH_KEY_MIN) {
		snprintf(err, errlen, "auth key file %s: the key has %zu bytes, at least %d are needed "
			 "(e.g. openssl rand -hex 32 > %s)", path, n, AUTH_KEY_MIN, path);
		goto out;
	}
	memcpy(key, buf, n);
	*ret_len = n;
	rc = 0;
out:
	auth_wipe(buf, sizeof(buf));
	close(fd);
	return rc;
}
