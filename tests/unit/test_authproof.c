/* Unit tests: HELLO proofs and key files (proto/auth.c), the listen policy
 * (daemon/server/authn.c), and the authentication and limit settings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/server/authn.h"
#include "daemon/server/options.h"
#include "daemon/pprpcd.h"
#include "pprpc/types.h"
#include "proto/auth.h"

static const uint8_t key[40] = "0123456789abcdef0123456789abcdef-key-40";

static void nonce(uint8_t n[AUTH_NONCE_LEN], uint8_t seed)
{
	for (int i = 0; i < AUTH_NONCE_LEN; i++)
		n[i] = (uint8_t)(seed + i * 7);
}

/* The documented layout, hashed by OpenSSL's one-shot HMAC: the proof is
 * exactly HMAC-SHA256(K, label NUL || Ns || Nc || role le32 || len le32 || name). */
static void test_client_proof_layout(void **state)
{
	uint8_t sn[32], cn[32], proof[32], msg[256], want[32];
	unsigned wl = 0;
	size_t n = 0;

	(void)state;
	nonce(sn, 1);
	nonce(cn, 2);
	assert_int_equal(auth_client_proof(key, sizeof(key), sn, cn, 1, "node-a", proof), 0);
	memcpy(msg, "pprpc-v1 client", 16);  /* with its NUL */
	n = 16;
	memcpy(msg + n, sn, 32);
	n += 32;
	memcpy(msg + n, cn, 32);
	n += 32;
	memcpy(msg + n, "\x01\0\0\0\x06\0\0\0node-a", 14);
	n += 14;
	assert_non_null(HMAC(EVP_sha256(), key, sizeof(key), msg, n, want, &wl));
	assert_int_equal(wl, 32);
	assert_memory_equal(proof, want, 32);
}

static void test_server_proof_layout(void **state)
{
	uint8_t sn[32], cn[32], proof[32], msg[128], want[32];
	unsigned wl = 0;

	(void)state;
	nonce(sn, 3);
	nonce(cn, 4);
	assert_int_equal(auth_server_proof(key, sizeof(key), cn, sn, proof), 0);
	memcpy(msg, "pprpc-v1 server", 16);
	memcpy(msg + 16, cn, 32);
	memcpy(msg + 48, sn, 32);
	assert_non_null(HMAC(EVP_sha256(), key, sizeof(key), msg, 80, want, &wl));
	assert_memory_equal(proof, want, 32);
}

/* Every input changes the proof; the two directions never coincide. */
static void test_proof_binds_inputs(void **state)
{
	uint8_t sn[32], cn[32], base[32], p[32], other_key[40];

	(void)state;
	nonce(sn, 5);
	nonce(cn, 6);
	assert_int_equal(auth_client_proof(key, sizeof(key), sn, cn, 0, "x", base), 0);
	assert_int_equal(auth_client_proof(key, sizeof(key), sn, cn, 0, "x", p), 0);
	assert_true(auth_equal(base, p, 32));
	assert_int_equal(auth_client_proof(key, sizeof(key), sn, cn, 1, "x", p), 0);
	assert_false(auth_equal(base, p, 32));
	assert_int_equal(auth_client_proof(key, sizeof(key), sn, cn, 0, "y", p), 0);
	assert_false(auth_equal(base, p, 32));
	assert_int_equal(auth_client_proof(key, sizeof(key), sn, cn, 0, NULL, p), 0);
	assert_false(auth_equal(base, p, 32));
	/* nonces swapped */
	assert_int_equal(auth_client_proof(key, sizeof(key), cn, sn, 0, "x", p), 0);
	assert_false(auth_equal(base, p, 32));
	memcpy(other_key, key, sizeof(key));
	other_key[0] ^= 1;
	assert_int_equal(auth_client_proof(other_key, sizeof(key), sn, cn, 0, "x", p), 0);
	assert_false(auth_equal(base, p, 32));
	/* the daemon's proof over the same nonces is different (no reflection) */
	assert_int_equal(auth_server_proof(key, sizeof(key), cn, sn, p), 0);
	assert_false(auth_equal(base, p, 32));
	/* keys below 32 bytes are refused */
	assert_int_equal(auth_client_proof(key, 31, sn, cn, 0, "x", p), PPRPC_EINVAL);
	assert_int_equal(auth_server_proof(key, 0, cn, sn, p), PPRPC_EINVAL);
}

static void test_random(void **state)
{
	uint8_t a[32], b[32];

	(void)state;
	assert_int_equal(auth_random(a, sizeof(a)), 0);
	assert_int_equal(auth_random(b, sizeof(b)), 0);
	assert_false(auth_equal(a, b, 32));
}

static char tmpdir[64];

static void put(const char *name, const void *data, size_t n, mode_t mode, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, n, f), n);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_key_files(void **state)
{
	char path[128], err[512];
	uint8_t k[AUTH_KEY_MAX], big[AUTH_KEY_MAX + 10];
	size_t kl = 0;

	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/pprpc-ut-auth-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));

	put("ok", "0123456789abcdef0123456789abcdef\n", 33, 0600, path, sizeof(path));
	assert_int_equal(auth_key_load(path, k, sizeof(k), &kl, err, sizeof(err)), 0);
	assert_int_equal(kl, 32);
	assert_memory_equal(k, "0123456789abcdef0123456789abcdef", 32);
	unlink(path);
	put("crlf", "0123456789abcdef0123456789abcdef\r\n", 34, 0400, path, sizeof(path));
	assert_int_equal(auth_key_load(path, k, sizeof(k), &kl, err, sizeof(err)), 0);
	assert_int_equal(kl, 32);
	unlink(path);
	/* binary keys are used as they are */
	memset(big, 0, 64);
	put("bin", big, 64, 0600, path, sizeof(path));
	assert_int_equal(auth_key_load(path, k, sizeof(k), &kl, err, sizeof(err)), 0);
	assert_int_equal(kl, 64);
	unlink(path);

	put("group", "0123456789abcdef0123456789abcdef", 32, 0640, path, sizeof(path));
	assert_int_equal(auth_key_load(path, k, sizeof(k), &kl, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "0640"));
	assert_non_null(strstr(err, "chmod 600"));
	unlink(path);
	put("world", "0123456789abcdef0123456789abcdef", 32, 0604, path, sizeof(path));
	assert_int_equal(auth_key_load(path, k, sizeof(k), &kl, err, sizeof(err)), PPRPC_EINVAL);
	unlink(path);
	put("short", "0123456789abcdef0123456789abcde\n", 32, 0600, path, sizeof(path));
	assert_int_equal(auth_key_load(path, k, sizeof(k), &kl, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "31 bytes"));
	unlink(path);
	memset(big, 'k', sizeof(big));
	put("long", big, sizeof(big), 0600, path, sizeof(path));
	assert_int_equal(auth_key_load(path, k, sizeof(k), &kl, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "longer than"));
	unlink(path);
	assert_int_equal(auth_key_load(tmpdir, k, sizeof(k), &kl, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	snprintf(path, sizeof(path), "%s/missing", tmpdir);
	assert_int_equal(auth_key_load(path, k, sizeof(k), &kl, err, sizeof(err)), PPRPC_EIO);
	rmdir(tmpdir);
}

static void sa4(struct sockaddr_in *sa, const char *ip)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, ip, &sa->sin_addr), 1);
}

static void sa6(struct sockaddr_in6 *sa, const char *ip)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, ip, &sa->sin6_addr), 1);
}

/* Addresses are only classified here; nothing listens or connects. */
static void test_listen_policy(void **state)
{
	struct sockaddr_in a;
	struct sockaddr_in6 b;

	(void)state;
	sa4(&a, "127.0.0.1");
	assert_int_equal(authn_listen_policy((struct sockaddr *)&a, 0, 0), AUTHN_LISTEN_OK);
	sa4(&a, "127.3.2.1");
	assert_int_equal(authn_listen_policy((struct sockaddr *)&a, 0, 0), AUTHN_LISTEN_OK);
	sa6(&b, "::1");
	assert_int_equal(authn_listen_policy((struct sockaddr *)&b, 0, 0), AUTHN_LISTEN_OK);
	sa4(&a, "0.0.0.0");
	assert_int_equal(authn_listen_policy((struct sockaddr *)&a, 0, 0), AUTHN_LISTEN_REFUSE);
	assert_int_equal(authn_listen_policy((struct sockaddr *)&a, 0, 1), AUTHN_LISTEN_WARN);
	assert_int_equal(authn_listen_policy((struct sockaddr *)&a, 1, 0), AUTHN_LISTEN_OK);
	sa4(&a, "10.1.2.3");
	assert_int_equal(authn_listen_policy((struct sockaddr *)&a, 0, 0), AUTHN_LISTEN_REFUSE);
	sa6(&b, "::");
	assert_int_equal(authn_listen_policy((struct sockaddr *)&b, 0, 0), AUTHN_LISTEN_REFUSE);
	assert_int_equal(authn_listen_policy((struct sockaddr *)&b, 1, 1), AUTHN_LISTEN_OK);
}

static void test_settings(void **state)
{
	struct pprpcd_opts o;
	char err[256] = "";
	const char *text = "auth_key_file = /etc/pprpc/key\ninsecure-listen = 1\nmax_conn_buffers = 5\n"
			   "max-conn-mib = 7\nmax_conn_graphs = 3\nmax_conn_inflight = 100\n"
			   "max_graph_nodes = 12\nmax_meta_kib = 64\nmax_buffers = 99\n";

	(void)state;
	pprpcd_opts_default(&o);
	assert_int_equal(o.max_graph_nodes, PPRPC_MAX_GRAPH_NODES);
	assert_int_equal(o.max_conn_bytes, 0);
	assert_string_equal(o.auth_key_file, "");
	assert_int_equal(pprpcd_config_parse(&o, "t.conf", text, strlen(text), err, sizeof(err)), 0);
	assert_string_equal(o.auth_key_file, "/etc/pprpc/key");
	assert_int_equal(o.insecure_listen, 1);
	assert_int_equal(o.max_conn_buffers, 5);
	assert_int_equal(o.max_conn_bytes, 7ull << 20);
	assert_int_equal(o.max_conn_graphs, 3);
	assert_int_equal(o.max_conn_inflight, 100);
	assert_int_equal(o.max_graph_nodes, 12);
	assert_int_equal(o.max_meta, 64 * 1024);
	assert_int_equal(o.max_buffers, 99);
	/* above the protocol's caps: refused, naming the setting */
	text = "max_graph_nodes = 65537\n";
	assert_int_equal(pprpcd_config_parse(&o, "t.conf", text, strlen(text), err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "max-graph-nodes"));
	text = "max_meta_kib = 1025\n";
	assert_int_equal(pprpcd_config_parse(&o, "t.conf", text, strlen(text), err, sizeof(err)), PPRPC_EINVAL);
	text = "insecure_listen = 2\n";
	assert_int_equal(pprpcd_config_parse(&o, "t.conf", text, strlen(text), err, sizeof(err)), PPRPC_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_client_proof_layout),
		cmocka_unit_test(test_server_proof_layout),
		cmocka_unit_test(test_proof_binds_inputs),
		cmocka_unit_test(test_random),
		cmocka_unit_test(test_key_files),
		cmocka_unit_test(test_listen_policy),
		cmocka_unit_test(test_settings),
	};

	return cmocka_run_group_tests_name("authproof", tests, NULL, NULL);
}
