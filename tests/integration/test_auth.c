/*
 * tests/integration/test_auth.c — shared-key authentication (proto/auth.h)
 * against real pprpcd processes on loopback.
 *
 *   - a keyed daemon accepts the right key (file, bytes, environment) and
 *     refuses a wrong key or none with PPRPC_EAUTH and a clear message,
 *     closes that connection, and keeps serving;
 *   - a proof cannot be replayed (same connection, another connection,
 *     another challenge);
 *   - a client with a key refuses a daemon that cannot prove it (a daemon
 *     without a key, and a fake daemon that answers with a bad proof);
 *   - peer links authenticate with the daemon's key: a cross-rank WAIT works
 *     between daemons sharing a key and fails with PPRPC_EAUTH (no hang)
 *     between daemons with different keys;
 *   - the daemon refuses a non-loopback listen address without a key, and
 *     key files readable by others or too short (daemon and client).
 *
 * Only 127.0.0.1 carries traffic; 0.0.0.0 is used once, for a daemon that
 * must exit before it listens.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "pprpc.h"
#include "proto/auth.h"
#include "tests/integration/harness.h"
#include "tests/integration/wire.h"
#include "util/version.h"

/* wire.h helpers this file does not use */
static void unused_wire(void) __attribute__((unused));
static void unused_wire(void)
{
	(void)wire_hello;
	(void)wire_send_rawmeta;
}

static char dir[64];
static char k1[128], k2[128], kopen[128], kshort[128];
static uint8_t k1_bytes[64];

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void random_hex(char *out, size_t nbytes)
{
	uint8_t r[64];

	assert_true(nbytes <= sizeof(r));
	assert_int_equal(auth_random(r, nbytes), 0);
	for (size_t i = 0; i < nbytes; i++)
		sprintf(out + 2 * i, "%02x", r[i]);
}

static int group_setup(void **state)
{
	char hex[130];

	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/pprpc-auth-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(k1, sizeof(k1), "%s/k1", dir);
	snprintf(k2, sizeof(k2), "%s/k2", dir);
	snprintf(kopen, sizeof(kopen), "%s/kopen", dir);
	snprintf(kshort, sizeof(kshort), "%s/kshort", dir);
	random_hex(hex, 32);
	memcpy(k1_bytes, hex, 64);   /* the key is the file's text, newline dropped */
	strcat(hex, "\n");
	write_file(k1, hex, 0600);
	write_file(kopen, hex, 0644);
	random_hex(hex, 32);
	write_file(k2, hex, 0600);
	write_file(kshort, "0123456789abcdef", 0600);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	unlink(k1);
	unlink(k2);
	unlink(kopen);
	unlink(kshort);
	rmdir(dir);
	return 0;
}

static void start(struct tdaemon *d, const char *key)
{
	const char *extra[] = { "--auth-key-file", key, NULL };

	assert_int_equal(tdaemon_start(d, key ? extra : NULL), 0);
}

static void stop(struct tdaemon *d)
{
	int st = tdaemon_stop(d);

	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* pprpc_connect with a key file (NULL: none); returns the code, err gets
 * the reason. */
static int try_connect(const struct tdaemon *d, const char *keyfile, pprpc_client **out, char *err, size_t len)
{
	pprpc_connect_opts o = {
		.client_name = "test-auth",
		.connect_timeout_ms = 5000,
		.io_timeout_ms = 10000,
		.err_buf = err,
		.err_len = len,
		.auth_key_file = keyfile,
	};

	err[0] = '\0';
	*out = NULL;
	return pprpc_connect(d->addr, &o, out);
}

/* The client works: allocate, write, read back. */
static void assert_works(pprpc_client *c)
{
	uint8_t out[1000], in[1000];
	pprpc_buffer b;

	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i * 13 + 1);
	assert_int_equal(pprpc_buffer_alloc(c, 0, sizeof(out), &b), 0);
	assert_int_equal(pprpc_tensor_set(c, b, 0, out, sizeof(out)), 0);
	assert_int_equal(pprpc_tensor_get(c, b, 0, in, sizeof(in)), 0);
	assert_memory_equal(in, out, sizeof(out));
	assert_int_equal(pprpc_buffer_free(c, b), 0);
}

static void assert_serves(const struct tdaemon *d, const char *keyfile)
{
	pprpc_client *c;
	char err[512];
	int rc = try_connect(d, keyfile, &c, err, sizeof(err));

	if (rc) {
		fprintf(stderr, "connect: %s\n", err);
		tdaemon_dump_log(d);
	}
	assert_int_equal(rc, 0);
	assert_works(c);
	pprpc_close(c);
}

/* ---- accept and refuse ----------------------------------------------------- */

static void test_right_key(void **state)
{
	struct tdaemon d;
	pprpc_connect_opts o = { .client_name = "bytes", .auth_key = k1_bytes, .auth_key_len = 64 };
	pprpc_client *c = NULL;

	(void)state;
	start(&d, k1);
	assert_serves(&d, k1);
	/* the key as bytes */
	assert_int_equal(pprpc_connect(d.addr, &o, &c), 0);
	assert_works(c);
	pprpc_close(c);
	/* the key from the environment */
	setenv("PPRPC_AUTH_KEY_FILE", k1, 1);
	assert_int_equal(pprpc_connect(d.addr, NULL, &c), 0);
	unsetenv("PPRPC_AUTH_KEY_FILE");
	assert_works(c);
	pprpc_close(c);
	stop(&d);
}

static void test_wrong_or_no_key(void **state)
{
	struct tdaemon d;
	pprpc_client *c;
	char err[512];

	(void)state;
	start(&d, k1);
	assert_int_equal(try_connect(&d, k2, &c, err, sizeof(err)), PPRPC_EAUTH);
	assert_null(c);
	assert_non_null(strstr(err, "authentication failed: wrong key"));
	assert_int_equal(try_connect(&d, NULL, &c, err, sizeof(err)), PPRPC_EAUTH);
	assert_non_null(strstr(err, "authentication required"));
	assert_non_null(strstr(err, "no key was given"));
	/* A key shorter than 32 bytes is refused before connecting. */
	{
		pprpc_connect_opts o = { .auth_key = "short", .auth_key_len = 5 };

		assert_int_equal(pprpc_connect(d.addr, &o, &c), PPRPC_EINVAL);
	}
	assert_serves(&d, k1);
	assert_true(tdaemon_alive(&d));
	stop(&d);
}

/* ---- the wire: challenge, proof, replay --------------------------------------- */

struct challenge {
	uint8_t sn[AUTH_NONCE_LEN];
};

/* HELLO without a proof: the daemon answers PPRPC_EAUTH with a challenge. */
static void get_challenge(int fd, uint64_t id, struct challenge *ch)
{
	Pprpc__Hello h = PPRPC__HELLO__INIT;
	ProtobufCMessage *m = NULL;
	struct wire_reply r;
	const Pprpc__ErrorReply *e;

	h.proto_version = PPRPC_PROTO_VERSION;
	h.client_name = "wire";
	assert_int_equal(wire_call(fd, MSG_HELLO, id, &h.base, NULL, 0, &r), 0);
	assert_true(r.is_error);
	assert_int_equal(r.code, PPRPC_EAUTH);
	assert_non_null(strstr(r.msg, "authentication required"));
	assert_int_equal(meta_unpack(&pprpc__error_reply__descriptor, r.meta, r.h.meta_len, &m), 0);
	e = (const Pprpc__ErrorReply *)m;
	assert_int_equal(e->auth_challenge.len, AUTH_NONCE_LEN);
	memcpy(ch->sn, e->auth_challenge.data, AUTH_NONCE_LEN);
	meta_free(m);
	wire_reply_free(&r);
}

/* The encoded answering HELLO (the bytes an eavesdropper would record). */
static size_t answer_frame(const struct challenge *ch, const uint8_t *key, size_t klen, uint64_t id,
			   uint8_t *out, size_t cap, uint8_t cn[AUTH_NONCE_LEN])
{
	Pprpc__Hello h = PPRPC__HELLO__INIT;
	uint8_t proof[AUTH_PROOF_LEN];
	size_t mlen;

	assert_int_equal(auth_random(cn, AUTH_NONCE_LEN), 0);
	assert_int_equal(auth_client_proof(key, klen, ch->sn, cn, 0, "wire", proof), 0);
	h.proto_version = PPRPC_PROTO_VERSION;
	h.client_name = "wire";
	h.client_nonce.data = cn;
	h.client_nonce.len = AUTH_NONCE_LEN;
	h.server_nonce.data = (uint8_t *)ch->sn;
	h.server_nonce.len = AUTH_NONCE_LEN;
	h.auth_proof.data = proof;
	h.auth_proof.len = AUTH_PROOF_LEN;
	mlen = meta_size(&h.base);
	assert_true(FRAME_HDR_SIZE + mlen <= cap);
	wire_hdr(out, PPRPC_PROTO_VERSION, MSG_HELLO, 0, (uint32_t)mlen, 0, id);
	meta_pack(&h.base, out + FRAME_HDR_SIZE);
	return FRAME_HDR_SIZE + mlen;
}

/* A refusal: PPRPC_EAUTH naming why, then the connection closes. */
static void expect_refused(int fd, const char *why)
{
	struct wire_reply r;

	assert_int_equal(wire_read_reply(fd, &r, WIRE_TIMEOUT_MS), 0);
	assert_true(r.is_error);
	assert_int_equal(r.code, PPRPC_EAUTH);
	if (!strstr(r.msg, why))
		fprintf(stderr, "refusal '%s' does not say '%s'\n", r.msg, why);
	assert_non_null(strstr(r.msg, why));
	wire_reply_free(&r);
	assert_int_equal(wire_wait_closed(fd, WIRE_TIMEOUT_MS, NULL), 0);
}

static void test_replay(void **state)
{
	struct tdaemon d;
	struct challenge ch, ch2;
	uint8_t frame[512], cn[AUTH_NONCE_LEN], want[AUTH_PROOF_LEN];
	struct wire_reply r;
	ProtobufCMessage *m = NULL;
	const Pprpc__HelloReply *rep;
	size_t n;
	int fd;

	(void)state;
	start(&d, k1);

	/* A correct exchange; keep the answer's bytes. */
	fd = traw_connect(&d);
	assert_true(fd >= 0);
	get_challenge(fd, 1, &ch);
	n = answer_frame(&ch, k1_bytes, 64, 2, frame, sizeof(frame), cn);
	assert_int_equal(wire_send_all(fd, frame, n, WIRE_TIMEOUT_MS), 0);
	assert_int_equal(wire_read_reply(fd, &r, WIRE_TIMEOUT_MS), 0);
	assert_false(r.is_error);
	assert_int_equal(wire_reply_unpack(&r, &pprpc__hello_reply__descriptor, &m), 0);
	rep = (const Pprpc__HelloReply *)m;
	/* ... and the daemon proved the key too. */
	assert_int_equal(rep->auth_proof.len, AUTH_PROOF_LEN);
	assert_int_equal(auth_server_proof(k1_bytes, 64, cn, ch.sn, want), 0);
	assert_memory_equal(rep->auth_proof.data, want, AUTH_PROOF_LEN);
	meta_free(m);
	wire_reply_free(&r);
	/* The same HELLO again on that connection: a second HELLO, refused. */
	assert_int_equal(wire_send_all(fd, frame, n, WIRE_TIMEOUT_MS), 0);
	assert_int_equal(wire_read_reply(fd, &r, WIRE_TIMEOUT_MS), 0);
	assert_true(r.is_error);
	assert_int_equal(r.code, PPRPC_EPROTO);
	wire_reply_free(&r);
	close(fd);

	/* Replayed as the first message of a new connection: no challenge. */
	fd = traw_connect(&d);
	assert_true(fd >= 0);
	assert_int_equal(wire_send_all(fd, frame, n, WIRE_TIMEOUT_MS), 0);
	expect_refused(fd, "no challenge is outstanding");
	close(fd);

	/* Replayed in answer to a fresh challenge: another challenge. */
	fd = traw_connect(&d);
	assert_true(fd >= 0);
	get_challenge(fd, 1, &ch2);
	assert_memory_not_equal(ch.sn, ch2.sn, AUTH_NONCE_LEN);
	assert_int_equal(wire_send_all(fd, frame, n, WIRE_TIMEOUT_MS), 0);
	expect_refused(fd, "answers another challenge");
	close(fd);

	/* A wrong proof uses the challenge up: no second attempt. */
	fd = traw_connect(&d);
	assert_true(fd >= 0);
	get_challenge(fd, 1, &ch2);
	{
		uint8_t bad[64];

		memset(bad, 'x', sizeof(bad));
		n = answer_frame(&ch2, bad, sizeof(bad), 2, frame, sizeof(frame), cn);
	}
	assert_int_equal(wire_send_all(fd, frame, n, WIRE_TIMEOUT_MS), 0);
	expect_refused(fd, "wrong key");
	close(fd);

	/* Before authentication nothing but HELLO is served. */
	fd = traw_connect(&d);
	assert_true(fd >= 0);
	get_challenge(fd, 1, &ch2);
	{
		Pprpc__BufferAlloc ba = PPRPC__BUFFER_ALLOC__INIT;

		ba.size = 4096;
		assert_int_equal(wire_call(fd, MSG_BUFFER_ALLOC, 2, &ba.base, NULL, 0, &r), 0);
		assert_true(r.is_error);
		assert_int_equal(r.code, PPRPC_EPROTO);
		wire_reply_free(&r);
		assert_int_equal(wire_wait_closed(fd, WIRE_TIMEOUT_MS, NULL), 0);
	}
	close(fd);

	assert_serves(&d, k1);
	stop(&d);
}

/* ---- the client checks the daemon --------------------------------------------- */

struct fake {
	int lfd;
	uint16_t port;
	pthread_t th;
	int answered;  /* the fake got a proof and answered it */
};

static int read_request(int fd, struct frame_hdr *h, uint8_t *meta, size_t cap)
{
	struct frame_limits lim = { .max_meta = PPRPC_MAX_META, .max_bulk = 0 };
	uint8_t hb[FRAME_HDR_SIZE];

	if (wire_recv_all(fd, hb, sizeof(hb), WIRE_TIMEOUT_MS) != (ssize_t)sizeof(hb) ||
	    frame_hdr_decode(hb, &lim, h, NULL) < 0 || h->meta_len > cap)
		return -1;
	return wire_recv_all(fd, meta, h->meta_len, WIRE_TIMEOUT_MS) == (ssize_t)h->meta_len ? 0 : -1;
}

static void send_reply(int fd, const struct frame_hdr *req, uint32_t flags, const ProtobufCMessage *m)
{
	uint8_t buf[1024];
	size_t mlen = meta_size(m);

	wire_hdr(buf, PPRPC_PROTO_VERSION, req->type, FRAME_F_REPLY | flags, (uint32_t)mlen, 0, req->req_id);
	meta_pack(m, buf + FRAME_HDR_SIZE);
	wire_send_all(fd, buf, FRAME_HDR_SIZE + mlen, WIRE_TIMEOUT_MS);
}

/* An impostor: challenges like a keyed daemon, accepts any proof, and
 * answers with a proof it cannot compute. */
static void *fake_daemon(void *arg)
{
	struct fake *f = arg;
	uint8_t meta[4096], sn[AUTH_NONCE_LEN], junk[AUTH_PROOF_LEN];
	struct frame_hdr h;
	int fd = accept(f->lfd, NULL, NULL);

	if (fd < 0)
		return NULL;
	if (read_request(fd, &h, meta, sizeof(meta)) == 0) {
		Pprpc__ErrorReply e = PPRPC__ERROR_REPLY__INIT;

		auth_random(sn, sizeof(sn));
		e.code = PPRPC_EAUTH;
		e.message = "authentication required";
		e.auth_challenge.data = sn;
		e.auth_challenge.len = sizeof(sn);
		send_reply(fd, &h, FRAME_F_ERROR, &e.base);
	}
	if (read_request(fd, &h, meta, sizeof(meta)) == 0) {
		Pprpc__HelloReply rep = PPRPC__HELLO_REPLY__INIT;

		auth_random(junk, sizeof(junk));
		rep.proto_version = PPRPC_PROTO_VERSION;
		rep.daemon_version = PPRPC_VERSION;
		rep.auth_proof.data = junk;
		rep.auth_proof.len = sizeof(junk);
		send_reply(fd, &h, 0, &rep.base);
		f->answered = 1;
	}
	/* Wait for the client to hang up. */
	wire_wait_closed(fd, WIRE_TIMEOUT_MS, NULL);
	close(fd);
	return NULL;
}

static void test_client_refuses_impostor(void **state)
{
	struct tdaemon d;
	struct fake f = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	pprpc_connect_opts o = { .connect_timeout_ms = 5000, .auth_key_file = k1 };
	char err[512], addr[64];
	pprpc_client *c = NULL;

	(void)state;
	/* A daemon without a key asks for no proof: with a key, refuse it. */
	start(&d, NULL);
	assert_int_equal(try_connect(&d, k1, &c, err, sizeof(err)), PPRPC_EAUTH);
	assert_non_null(strstr(err, "did not ask for authentication"));
	assert_serves(&d, NULL);
	stop(&d);

	/* A fake daemon whose proof is wrong. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f.lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f.lfd >= 0);
	assert_int_equal(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f.lfd, 1), 0);
	assert_int_equal(getsockname(f.lfd, (struct sockaddr *)&sa, &sl), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	assert_int_equal(pthread_create(&f.th, NULL, fake_daemon, &f), 0);
	o.err_buf = err;
	o.err_len = sizeof(err);
	assert_int_equal(pprpc_connect(addr, &o, &c), PPRPC_EAUTH);
	assert_null(c);
	assert_non_null(strstr(err, "proof does not match"));
	pthread_join(f.th, NULL);
	assert_true(f.answered);
	close(f.lfd);
}

/* ---- peers ------------------------------------------------------------------- */

/* Client b's queue waits for a timeline of a's daemon, which a signals. */
static int cross_rank_wait(const struct tdaemon *da, const char *ka, const struct tdaemon *db, const char *kb,
			   char *why, size_t len)
{
	pprpc_client *ca, *cb;
	pprpc_timeline t;
	char err[512];
	int rc;

	rc = try_connect(da, ka, &ca, err, sizeof(err));
	if (rc == 0)
		rc = try_connect(db, kb, &cb, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "connect: %s\n", err);
		tdaemon_dump_log((struct tdaemon *)da);
		tdaemon_dump_log((struct tdaemon *)db);
	}
	assert_int_equal(rc, 0);
	assert_int_equal(pprpc_timeline_create(ca, 0, 0, &t), 0);
	assert_int_equal(pprpc_wait(cb, 0, da->addr, t, 1), 0);
	assert_int_equal(pprpc_signal(ca, t, 1), 0);
	assert_int_equal(pprpc_synchronize(ca, 0), 0);
	rc = pprpc_synchronize(cb, 0);
	snprintf(why, len, "%s", pprpc_last_error(cb));
	/* Either way the queue is usable again. */
	assert_works(cb);
	pprpc_close(ca);
	pprpc_close(cb);
	return rc;
}

static void test_peers(void **state)
{
	struct tdaemon a, b;
	char why[512];
	int64_t t0;

	(void)state;
	start(&a, k1);
	start(&b, k1);
	if (cross_rank_wait(&a, k1, &b, k1, why, sizeof(why)) != 0) {
		fprintf(stderr, "cross-rank wait with the shared key failed: %s\n", why);
		tdaemon_dump_log(&a);
		tdaemon_dump_log(&b);
		fail();
	}
	stop(&b);

	/* Another key on b: a refuses b's peer link; the WAIT fails, fast. */
	start(&b, k2);
	t0 = wire_now_ms();
	assert_int_equal(cross_rank_wait(&a, k1, &b, k2, why, sizeof(why)), PPRPC_EAUTH);
	fprintf(stderr, "cross-rank wait with another key: %s (%lld ms)\n", why, (long long)(wire_now_ms() - t0));
	assert_non_null(strstr(why, "authentication failed"));
	assert_true(wire_now_ms() - t0 < 5000);
	stop(&b);

	/* b without a key is refused by a the same way. */
	start(&b, NULL);
	assert_int_equal(cross_rank_wait(&a, k1, &b, NULL, why, sizeof(why)), PPRPC_EAUTH);
	stop(&b);
	assert_serves(&a, k1);
	stop(&a);
}

/* ---- start-up refusals ------------------------------------------------------------ */

/* Start pprpcd with extra flags; it must exit with status 1 before
 * listening, and its log must say why. */
static void expect_start_refused(const char *const *extra, const char *why)
{
	const char *bin = getenv("PPRPCD") ? getenv("PPRPCD") : "build/bin/pprpcd";
	struct spawned s;
	char err[512], line[1024];
	int found = 0, st;
	FILE *f;

	assert_int_equal(spawn_daemon(bin, extra, 5000, &s, err, sizeof(err)), -1);
	for (int i = 0; i < 1000 && spawn_alive(&s); i++)
		usleep(5000);
	assert_false(spawn_alive(&s));
	st = -s.pid - 1;
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 1);
	f = fopen(s.log, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, why))
			found = 1;
	fclose(f);
	if (!found)
		spawn_dump_log(&s);
	assert_true(found);
	spawn_stop(&s, 0);
}

static void test_startup_refusals(void **state)
{
	const char *const any[] = { "--listen", "0.0.0.0:0", NULL };
	const char *const open_key[] = { "--auth-key-file", kopen, NULL };
	const char *const short_key[] = { "--auth-key-file", kshort, NULL };
	const char *const missing[] = { "--auth-key-file", "/nonexistent/pprpc-key", NULL };
	const char *const insecure_lo[] = { "--insecure-listen", "1", NULL };
	struct tdaemon d;
	pprpc_client *c;
	char err[512];

	(void)state;
	expect_start_refused(any, "refusing to listen on non-loopback address 0.0.0.0 without authentication");
	expect_start_refused(open_key, "give access to group or others");
	expect_start_refused(short_key, "at least 32 are needed");
	expect_start_refused(missing, "No such file");
	/* insecure-listen changes nothing on loopback */
	assert_int_equal(tdaemon_start(&d, insecure_lo), 0);
	assert_serves(&d, NULL);
	/* The client applies the same rules to its key file. */
	assert_int_equal(try_connect(&d, kopen, &c, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "chmod 600"));
	assert_int_equal(try_connect(&d, kshort, &c, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "at least 32"));
	stop(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_right_key),
		cmocka_unit_test(test_wrong_or_no_key),
		cmocka_unit_test(test_replay),
		cmocka_unit_test(test_client_refuses_impostor),
		cmocka_unit_test(test_peers),
		cmocka_unit_test(test_startup_refusals),
	};

	return cmocka_run_group_tests_name("integration_auth", tests, group_setup, group_teardown);
}
