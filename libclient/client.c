/* libclient/client.c — connect, HELLO, close, connection facts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libclient/client.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

static void copy_str(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

static int hello(pprpc_client *c, const char *name)
{
	Pprpc__Hello req = PPRPC__HELLO__INIT;
	ProtobufCMessage *m = NULL;
	const Pprpc__HelloReply *rep;
	int rc;

	req.proto_version = PPRPC_PROTO_VERSION;
	req.role = PPRPC__ROLE__ROLE_CLIENT;
	req.client_name = (char *)(name ? name : "");
	rc = rpc_call(c, MSG_HELLO, &req.base, NULL, 0, &pprpc__hello_reply__descriptor, &m, NULL, 0);
	if (rc < 0)
		return rc;
	rep = (const Pprpc__HelloReply *)m;
	if (rep->proto_version != PPRPC_PROTO_VERSION) {
		meta_free(m);
		return client_fail(c, PPRPC_EVERSION, "daemon speaks protocol %u, this library %u",
				   rep->proto_version, PPRPC_PROTO_VERSION);
	}
	copy_str(c->daemon_version, sizeof(c->daemon_version), rep->daemon_version);
	copy_str(c->placement, sizeof(c->placement), rep->placement);
	c->nunavailable = 0;
	for (size_t i = 0; i < rep->n_unavailable && i < 4; i++)
		copy_str(c->unavailable[c->nunavailable++], sizeof(c->unavailable[0]), rep->unavailable[i]);
	if (rep->caps) {
		c->caps.async = rep->caps->async;
		c->caps.events = rep->caps->events;
		c->caps.p2p = rep->caps->p2p;
		c->caps.rdma = rep->caps->rdma;
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

PPRPC_API int pprpc_connect(const char *addr, const pprpc_connect_opts *opts, pprpc_client **out)
{
	pprpc_client *c;
	char err[768];
	int rc, tmo = opts && opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms : 5000;

	if (!out)
		return PPRPC_EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return PPRPC_ENOMEM;
	c->fd = -1;
	rc = sock_connect(addr, tmo, &c->fd, err, sizeof(err));
	if (rc < 0)
		goto fail;
	rc = rpc_init(c);
	if (rc < 0) {
		snprintf(err, sizeof(err), "out of memory");
		goto fail;
	}
	/* HELLO is bounded by the connect timeout: a port that accepts but never
	 * answers (not a pprpcd) must not hang the caller. */
	c->io_timeout_ms = tmo;
	rc = hello(c, opts ? opts->client_name : NULL);
	if (rc < 0) {
		snprintf(err, sizeof(err), "HELLO to %s failed: %s", addr, c->err);
		goto fail;
	}
	c->io_timeout_ms = opts ? opts->io_timeout_ms : 0;
	*out = c;
	return 0;
fail:
	/* The caller has no client to ask for the reason: it goes to err_buf. */
	if (opts && opts->err_buf && opts->err_len)
		snprintf(opts->err_buf, opts->err_len, "%s", err);
	pprpc_close(c);
	return rc;
}

PPRPC_API void pprpc_close(pprpc_client *c)
{
	if (!c)
		return;
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
