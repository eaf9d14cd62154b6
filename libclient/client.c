/* libclient/client.c — connect, HELLO, close, connection facts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libclient/client.h"
#include "proto/auth.h"
#include "proto/hello_client.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

_Static_assert(sizeof(((struct pending *)0)->challenge) == AUTH_NONCE_LEN, "client.h: challenge size");

static void copy_str(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

/* One HELLO exchange; *ret_rep gets the reply (free with meta_free).  On an
 * error reply p->err, p->has_challenge and p->challenge tell why. */
static int hello_call(pprpc_client *c, const Pprpc__Hello *req, struct pending *p, ProtobufCMessage **ret_rep)
{
	int rc;

	memset(p, 0, sizeof(*p));
	p->rep_desc = &pprpc__hello_reply__descriptor;
	rc = rpc_send(c, MSG_HELLO, 0, &req->base, NULL, 0, p);
	if (rc == 0)
		rc = rpc_wait(c, p);
	if (!p->done) {
		snprintf(p->err, sizeof(p->err), "%.255s", c->err);
		return rc < 0 ? rc : PPRPC_EINTERNAL;
	}
	if (p->rc < 0) {
		meta_free(p->rep);
		return p->rc;
	}
	*ret_rep = p->rep;
	return 0;
}

/* HELLO, answering the daemon's challenge when it has a key and checking
 * its proof when we have one (proto/hello_client.h; the exchange is
 * described in proto/auth.h). */
static int hello(pprpc_client *c, const char *name, const uint8_t *key, size_t key_len)
{
	struct hello_client h;
	Pprpc__Hello req;
	ProtobufCMessage *m = NULL;
	const Pprpc__HelloReply *rep;
	struct pending p;
	int rc;

	hello_client_init(&h, PPRPC__ROLE__ROLE_CLIENT, name, key, key_len,
			  "pprpc_connect_opts auth_key or auth_key_file, or PPRPC_AUTH_KEY_FILE");
	do {
		hello_client_request(&h, &req);
		rc = hello_call(c, &req, &p, &m);
		if (rc < 0 && p.done)
			rc = hello_client_refused(&h, rc, p.err, p.has_challenge ? p.challenge : NULL,
						  p.has_challenge ? sizeof(p.challenge) : 0);
		else if (rc < 0)
			snprintf(h.why, sizeof(h.why), "%s", p.err);
	} while (rc == HELLO_AGAIN);
	if (rc == 0 && (rc = hello_client_accept(&h, (const Pprpc__HelloReply *)m)) < 0)
		meta_free(m);
	hello_client_wipe(&h);
	if (rc < 0)
		return client_fail(c, rc, "%s", h.why);
	rep = (const Pprpc__HelloReply *)m;
	copy_str(c->daemon_version, sizeof(c->daemon_version), rep->daemon_version);
	copy_str(c->placement, sizeof(c->placement), rep->placement);
	copy_str(c->daemon_host, sizeof(c->daemon_host), rep->host);
	c->nunavailable = 0;
	for (size_t i = 0; i < rep->n_unavailable && i < 4; i++)
		copy_str(c->unavailable[c->nunavailable++], sizeof(c->unavailable[0]), rep->unavailable[i]);
	if (rep->caps) {
		c->caps.async = rep->caps->async;
		c->caps.events = rep->caps->events;
		c->caps.p2p = rep->caps->p2p;
		c->caps.rdma = rep->caps->rdma;
		c->caps.ggml_create_run = rep->caps->ggml_create_run;
		c->weights_file = rep->caps->weights_file;
		c->weights_cache = rep->caps->weights_cache;
	}
	c->max_bulk = rep->max_bulk;
	c->ndev = 0;
	for (size_t i = 0; i < rep->n_devices && c->ndev < CLIENT_MAX_DEVICES; i++) {
		const Pprpc__DeviceInfo *di = rep->devices[i];
		pprpc_device_info *o = &c->dev[c->ndev++];

		o->index = di->index;
		copy_str(o->name, sizeof(o->name), di->name);
		copy_str(o->kind, sizeof(o->kind), di->kind);
		copy_str(o->description, sizeof(o->description), di->description);
		o->total_bytes = di->total_bytes;
		o->free_bytes = di->free_bytes;
		o->floor_bytes = di->floor_bytes;
	}
	meta_free(m);
	return 0;
}

/* The key from opts (raw bytes or a file) or from PPRPC_AUTH_KEY_FILE;
 * *key_len = 0 when there is none.  The file name used is kept in c so a
 * reconnect can read it again (raw keys are the caller's: never copied). */
static int load_key(pprpc_client *c, const pprpc_connect_opts *opts, uint8_t *key, size_t *key_len, char *err,
		    size_t errlen)
{
	const char *key_file = opts && opts->auth_key_file ? opts->auth_key_file : getenv("PPRPC_AUTH_KEY_FILE");

	*key_len = 0;
	if (opts && opts->auth_key) {
		if (opts->auth_key_len < AUTH_KEY_MIN || opts->auth_key_len > AUTH_KEY_MAX) {
			snprintf(err, errlen, "auth_key has %zu bytes; %d..%d are needed", opts->auth_key_len,
				 AUTH_KEY_MIN, AUTH_KEY_MAX);
			return PPRPC_EINVAL;
		}
		memcpy(key, opts->auth_key, opts->auth_key_len);
		*key_len = opts->auth_key_len;
		return 0;
	}
	if (!opts && c->key_file[0])
		key_file = c->key_file;
	if (!key_file || !*key_file)
		return 0;
	if (strlen(key_file) >= sizeof(c->key_file)) {
		snprintf(err, errlen, "auth key file name too long");
		return PPRPC_EINVAL;
	}
	if (key_file != c->key_file)
		snprintf(c->key_file, sizeof(c->key_file), "%s", key_file);
	return auth_key_load(key_file, key, AUTH_KEY_MAX, key_len, err, errlen);
}

/* Connect c (no socket yet) to c->addr and say HELLO. */
static int open_session(pprpc_client *c, const uint8_t *key, size_t key_len, char *err, size_t errlen)
{
	int rc;

	c->fd = -1;
	rc = sock_connect(c->addr, c->connect_timeout_ms, &c->fd, err, errlen);
	if (rc < 0)
		return rc;
	rc = rpc_init(c);
	if (rc < 0) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	/* HELLO is bounded by the connect timeout: a port that accepts but never
	 * answers (not a pprpcd) must not hang the caller. */
	c->io_timeout_ms = c->connect_timeout_ms;
	rc = hello(c, c->name, key_len ? key : NULL, key_len);
	if (rc < 0) {
		snprintf(err, errlen, "HELLO to %.200s failed: %.500s", c->addr, c->err);
		return rc;
	}
	c->io_timeout_ms = c->user_io_timeout_ms;
	return 0;
}

static void set_params(pprpc_client *c, const pprpc_connect_opts *opts)
{
	c->connect_timeout_ms = opts && opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms : 5000;
	c->user_io_timeout_ms = opts ? opts->io_timeout_ms : 0;
	copy_str(c->name, sizeof(c->name), opts ? opts->client_name : NULL);
}

PPRPC_API int pprpc_connect(const char *addr, const pprpc_connect_opts *opts, pprpc_client **out)
{
	pprpc_client *c = NULL;
	uint8_t key[AUTH_KEY_MAX];
	size_t key_len = 0;
	char err[768];
	int rc;

	if (!out || !addr)
		return PPRPC_EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		rc = PPRPC_ENOMEM;
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	c->fd = -1;
	c->cancel_fd = -1;
	c->spin = 1;
	if (strlen(addr) >= sizeof(c->addr)) {
		rc = PPRPC_EINVAL;
		snprintf(err, sizeof(err), "address too long");
		goto fail;
	}
	snprintf(c->addr, sizeof(c->addr), "%s", addr);
	set_params(c, opts);
	rc = load_key(c, opts, key, &key_len, err, sizeof(err));
	if (rc < 0)
		goto fail;
	rc = open_session(c, key, key_len, err, sizeof(err));
	if (rc < 0)
		goto fail;
	auth_wipe(key, sizeof(key));
	*out = c;
	return 0;
fail:
	auth_wipe(key, sizeof(key));
	/* The caller has no client to ask for the reason: it goes to err_buf. */
	if (opts && opts->err_buf && opts->err_len)
		snprintf(opts->err_buf, opts->err_len, "%s", err);
	pprpc_close(c);
	return rc;
}

PPRPC_API int pprpc_reconnect(pprpc_client *c, const pprpc_connect_opts *opts)
{
	uint8_t key[AUTH_KEY_MAX];
	size_t key_len = 0;
	char err[768];
	int rc;

	if (!c)
		return PPRPC_EINVAL;
	/* Everything in flight on the old session is lost with it: complete it
	 * with PPRPC_ECLOSED so no waiter is left hanging. */
	if (c->inbuf)
		rpc_fini(c);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->broken = 0;
	c->cur = NULL;
	c->async_outstanding = 0;
	c->async_err = 0;
	c->async_errmsg[0] = '\0';
	host_page_forget(c);
	if (opts)
		set_params(c, opts);
	rc = load_key(c, opts, key, &key_len, err, sizeof(err));
	if (rc == 0)
		rc = open_session(c, key, key_len, err, sizeof(err));
	auth_wipe(key, sizeof(key));
	if (rc < 0) {
		/* Leave c usable for another attempt, refusing calls meanwhile. */
		if (c->inbuf)
			rpc_fini(c);
		if (c->fd >= 0)
			close(c->fd);
		c->fd = -1;
		c->broken = 1;
		return client_fail(c, rc, "reconnect to %.200s failed: %.280s", c->addr, err);
	}
	return 0;
}

PPRPC_API void pprpc_close(pprpc_client *c)
{
	if (!c)
		return;
	if (c->inbuf)
		rpc_fini(c);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

PPRPC_API const char *pprpc_last_error(const pprpc_client *c)
{
	return c ? c->err : "";
}

PPRPC_API const char *pprpc_daemon_version(const pprpc_client *c)
{
	return c->daemon_version;
}

PPRPC_API const char *pprpc_daemon_placement(const pprpc_client *c)
{
	return c->placement;
}

PPRPC_API const char *pprpc_device_unavailable(const pprpc_client *c, int i)
{
	return i >= 0 && i < c->nunavailable ? c->unavailable[i] : NULL;
}

PPRPC_API int pprpc_get_caps(const pprpc_client *c, pprpc_caps *out)
{
	*out = c->caps;
	return 0;
}

PPRPC_API uint64_t pprpc_daemon_max_bulk(const pprpc_client *c)
{
	return c->max_bulk;
}

PPRPC_API int pprpc_connection_state(const pprpc_client *c)
{
	return c->broken ? PPRPC_CONN_BROKEN : PPRPC_CONN_OPEN;
}

PPRPC_API int pprpc_device_count(const pprpc_client *c)
{
	return (int)c->ndev;
}

PPRPC_API int pprpc_device_get(const pprpc_client *c, uint32_t index, pprpc_device_info *out)
{
	if (index >= c->ndev)
		return PPRPC_EINVAL;
	*out = c->dev[index];
	return 0;
}
