/*
 * libclient/rpc.c — one request/reply exchange over the client's socket.
 *
 * The reply is decoded with the same codec the daemon uses and trusted no
 * more than the daemon trusts its clients: header limits, matching request
 * id and type, bulk exactly the expected size.  A reply that breaks these
 * leaves the stream out of sync, so the client is marked broken.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "libclient/client.h"
#include "proto/frame.h"
#include "proto/meta.h"

int client_fail(pprpc_client *c, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof(c->err), fmt, ap);
	va_end(ap);
	return code;
}

static int broken(pprpc_client *c, int code, const char *what)
{
	c->broken = 1;
	return client_fail(c, code == PPRPC_ECLOSED ? PPRPC_ECONN : code, "%s: %s", what,
			   code == PPRPC_ECLOSED ? "connection closed by the daemon" : pprpc_strerror(code));
}

static int send_request(pprpc_client *c, uint16_t type, uint64_t id, const ProtobufCMessage *req,
			const void *bulk, uint64_t blen)
{
	size_t mlen = meta_size(req);
	uint8_t small[FRAME_HDR_SIZE + 512], *head = small;
	struct frame_hdr h = {
		.version = PPRPC_PROTO_VERSION,
		.type = type,
		.flags = blen ? FRAME_F_BULK : 0,
		.meta_len = (uint32_t)mlen,
		.bulk_len = blen,
		.req_id = id,
	};
	struct iovec iov[2];
	int rc;

	if (mlen > PPRPC_MAX_META)
		return client_fail(c, PPRPC_ETOOBIG, "request meta of %zu bytes exceeds %u", mlen,
				   PPRPC_MAX_META);
	if (FRAME_HDR_SIZE + mlen > sizeof(small) && !(head = malloc(FRAME_HDR_SIZE + mlen)))
		return client_fail(c, PPRPC_ENOMEM, "out of memory");
	frame_hdr_encode(&h, head);
	meta_pack(req, head + FRAME_HDR_SIZE);
	iov[0].iov_base = head;
	iov[0].iov_len = FRAME_HDR_SIZE + mlen;
	iov[1].iov_base = (void *)bulk;
	iov[1].iov_len = (size_t)blen;
	rc = sock_writev_all(c->fd, iov, blen ? 2 : 1);
	if (head != small)
		free(head);
	return rc < 0 ? broken(c, rc, "sending request") : 0;
}

static int read_error_reply(pprpc_client *c, const uint8_t *meta, size_t len)
{
	ProtobufCMessage *m = NULL;
	const Pprpc__ErrorReply *e;
	int code;

	if (meta_unpack(&pprpc__error_reply__descriptor, meta, len, &m) < 0)
		return client_fail(c, PPRPC_EPROTO, "malformed error reply");
	e = (const Pprpc__ErrorReply *)m;
	code = e->code < 0 && e->code > -PPRPC_E_COUNT_ ? e->code : PPRPC_EPROTO;
	client_fail(c, code, "%s", e->message ? e->message : "");
	meta_free(m);
	return code;
}

int rpc_call(pprpc_client *c, uint16_t type, const ProtobufCMessage *req, const void *out_bulk,
	     uint64_t out_len, const ProtobufCMessageDescriptor *rep_desc, ProtobufCMessage **ret_rep,
	     void *in_bulk, uint64_t in_len)
{
	struct frame_limits lim = { .max_meta = PPRPC_MAX_META, .max_bulk = in_len };
	uint8_t hb[FRAME_HDR_SIZE];
	uint8_t *meta = NULL;
	struct frame_hdr h;
	uint64_t id;
	int rc;

	if (c->broken)
		return client_fail(c, PPRPC_ECONN, "connection is closed or out of sync");
	c->err[0] = '\0';
	id = ++c->next_id;
	rc = send_request(c, type, id, req, out_bulk, out_len);
	if (rc < 0)
		return rc;
	rc = sock_read_all(c->fd, hb, sizeof(hb), c->io_timeout_ms);
	if (rc < 0)
		return broken(c, rc, "reading reply");
	rc = frame_hdr_decode(hb, &lim, &h, NULL);
	if (rc < 0 || !(h.flags & FRAME_F_REPLY) || h.req_id != id || h.type != type)
		return broken(c, PPRPC_EPROTO, "unexpected reply frame");
	if (h.meta_len && !(meta = malloc(h.meta_len)))
		return broken(c, PPRPC_ENOMEM, "reply meta");
	rc = sock_read_all(c->fd, meta, h.meta_len, c->io_timeout_ms);
	if (rc < 0) {
		free(meta);
		return broken(c, rc, "reading reply meta");
	}
	if (h.flags & FRAME_F_ERROR) {
		if (h.bulk_len) {
			free(meta);
			return broken(c, PPRPC_EPROTO, "error reply with bulk");
		}
		rc = read_error_reply(c, meta, h.meta_len);
		free(meta);
		return rc;
	}
	if (h.bulk_len != in_len) {
		free(meta);
		return broken(c, PPRPC_EPROTO, "reply bulk size differs from the request");
	}
	if (in_len) {
		rc = sock_read_all(c->fd, in_bulk, (size_t)in_len, c->io_timeout_ms);
		if (rc < 0) {
			free(meta);
			return broken(c, rc, "reading reply bulk");
		}
	}
	if (rep_desc && ret_rep) {
		rc = meta_unpack(rep_desc, meta ? meta : (const uint8_t *)"", h.meta_len, ret_rep);
		if (rc < 0) {
			free(meta);
			return client_fail(c, rc, "malformed reply meta");
		}
	}
	free(meta);
	return 0;
}
