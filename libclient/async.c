/*
 * libclient/async.c — queued commands, timelines, events, synchronize.
 *
 * A queued command is sent with FRAME_F_QUEUED and gets no success reply:
 * the call returns as soon as its bytes are handed to the socket.  Only an
 * async GET has a reply (its bytes); it is registered as a pending request
 * and completed whenever the client makes progress.  Failures surface at
 * pprpc_synchronize: the daemon's FENCE reports the queue's first failure,
 * and this side reports the first failed async GET.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stddef.h>

#include "libclient/client.h"
#include "proto/frame.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

static int queued(pprpc_client *c, uint16_t type, const ProtobufCMessage *m, const void *bulk, uint64_t len)
{
	c->err[0] = '\0';
	return rpc_send(c, type, FRAME_F_QUEUED, m, bulk, len, NULL);
}

int client_set_queued(pprpc_client *c, pprpc_buffer buf, uint64_t offset, const void *data, uint64_t size,
		      const uint8_t *key)
{
	Pprpc__TensorSet req = PPRPC__TENSOR_SET__INIT;

	if (size && !data)
		return client_fail(c, PPRPC_EINVAL, "tensor_set_async: NULL data");
	if (c->max_bulk && size > c->max_bulk)
		return client_fail(c, PPRPC_ETOOBIG, "tensor_set of %llu bytes exceeds the daemon's limit %llu",
				   (unsigned long long)size, (unsigned long long)c->max_bulk);
	req.buffer = buf.id;
	req.offset = offset;
	req.size = size;
	if (key) {
		req.cache_key.data = (uint8_t *)key;
		req.cache_key.len = 32;
	}
	return queued(c, MSG_TENSOR_SET, &req.base, data, size);
}

PPRPC_API int pprpc_tensor_set_async(pprpc_client *c, pprpc_buffer buf, uint64_t offset,
				     const void *data, uint64_t size)
{
	return client_set_queued(c, buf, offset, data, size, NULL);
}

PPRPC_API int pprpc_tensor_get_async(pprpc_client *c, pprpc_buffer buf, uint64_t offset, void *data,
				     uint64_t size)
{
	Pprpc__TensorGet req = PPRPC__TENSOR_GET__INIT;
	struct pending *p;
	int rc;

	if (size && !data)
		return client_fail(c, PPRPC_EINVAL, "tensor_get_async: NULL data");
	p = calloc(1, sizeof(*p));
	if (!p)
		return client_fail(c, PPRPC_ENOMEM, "out of memory");
	p->async = 1;
	req.buffer = buf.id;
	req.offset = offset;
	req.size = size;
	if (host_page_target(c, data, size, &req.host_page, &req.host_page_offset) != 1) {
		req.host_page = 0;
		req.host_page_offset = 0;
		p->bulk = data;
		p->bulk_len = size;
	}
	c->err[0] = '\0';
	/* On failure the pending entry was completed (and freed) by the engine. */
	rc = rpc_send(c, MSG_TENSOR_GET, FRAME_F_QUEUED, &req.base, NULL, 0, p);
	return rc;
}

PPRPC_API int pprpc_tensor_copy_async(pprpc_client *c, pprpc_buffer src, uint64_t src_offset,
				      pprpc_buffer dst, uint64_t dst_offset, uint64_t size)
{
	Pprpc__TensorCopy req = PPRPC__TENSOR_COPY__INIT;

	req.src_buffer = src.id;
	req.src_offset = src_offset;
	req.dst_buffer = dst.id;
	req.dst_offset = dst_offset;
	req.size = size;
	return queued(c, MSG_TENSOR_COPY, &req.base, NULL, 0);
}

PPRPC_API int pprpc_graph_run_async(pprpc_client *c, pprpc_graph g)
{
	Pprpc__GraphRun req = PPRPC__GRAPH_RUN__INIT;

	req.graph = g.id;
	return queued(c, MSG_GRAPH_RUN, &req.base, NULL, 0);
}

PPRPC_API int pprpc_send_async(pprpc_client *c, pprpc_buffer buf, uint64_t offset, uint64_t size,
			       uint64_t transfer_id, const char *dst_rank)
{
	Pprpc__Send req = PPRPC__SEND__INIT;

	req.buffer = buf.id;
	req.offset = offset;
	req.size = size;
	req.transfer_id = transfer_id;
	req.dst_rank = (char *)(dst_rank ? dst_rank : "");
	return queued(c, MSG_SEND, &req.base, NULL, 0);
}

PPRPC_API int pprpc_recv_async(pprpc_client *c2, pprpc_buffer buf, uint64_t offset, uint64_t size,
			       uint64_t transfer_id, const char *src_rank)
{
	Pprpc__Recv req = PPRPC__RECV__INIT;

	if (!src_rank || !*src_rank)
		return client_fail(c2, PPRPC_EINVAL, "recv_async needs the source rank");
	req.buffer = buf.id;
	req.offset = offset;
	req.size = size;
	req.transfer_id = transfer_id;
	req.src_rank = (char *)src_rank;
	return queued(c2, MSG_RECV, &req.base, NULL, 0);
}

PPRPC_API int pprpc_probe_rank(pprpc_client *c, const char *rank, int timeout_ms)
{
	Pprpc__Probe req = PPRPC__PROBE__INIT;

	req.rank = (char *)(rank ? rank : "");
	req.timeout_ms = timeout_ms > 0 ? (uint32_t)timeout_ms : 5000;
	return rpc_call(c, MSG_PROBE, &req.base, NULL, 0, NULL, NULL, NULL, 0);
}

PPRPC_API int pprpc_timeline_create(pprpc_client *c, uint32_t device, uint64_t initial,
				    pprpc_timeline *out)
{
	Pprpc__TimelineCreate req = PPRPC__TIMELINE_CREATE__INIT;

	req.device = device;
	req.initial = initial;
	return rpc_call_u64(c, MSG_TIMELINE_CREATE, &req.base, &pprpc__timeline_create_reply__descriptor,
			    offsetof(Pprpc__TimelineCreateReply, timeline), &out->id);
}

PPRPC_API int pprpc_timeline_destroy(pprpc_client *c, pprpc_timeline t)
{
	Pprpc__TimelineDestroy req = PPRPC__TIMELINE_DESTROY__INIT;

	req.timeline = t.id;
	return rpc_call(c, MSG_TIMELINE_DESTROY, &req.base, NULL, 0, NULL, NULL, NULL, 0);
}

PPRPC_API int pprpc_signal(pprpc_client *c, pprpc_timeline t, uint64_t value)
{
	Pprpc__Signal req = PPRPC__SIGNAL__INIT;

	req.timeline = t.id;
	req.value = value;
	return queued(c, MSG_SIGNAL, &req.base, NULL, 0);
}

PPRPC_API int pprpc_wait(pprpc_client *c, uint32_t device, const char *rank, pprpc_timeline t,
			 uint64_t value)
{
	Pprpc__Wait req = PPRPC__WAIT__INIT;

	req.device = device;
	req.timeline = t.id;
	req.value = value;
	req.rank = (char *)(rank ? rank : "");
	return queued(c, MSG_WAIT, &req.base, NULL, 0);
}

PPRPC_API int pprpc_timeline_query(pprpc_client *c, pprpc_timeline t, uint64_t *out)
{
	Pprpc__TimelineQuery req = PPRPC__TIMELINE_QUERY__INIT;

	req.timeline = t.id;
	return rpc_call_u64(c, MSG_TIMELINE_QUERY, &req.base, &pprpc__timeline_query_reply__descriptor,
			    offsetof(Pprpc__TimelineQueryReply, value), out);
}

PPRPC_API int pprpc_timeline_host_wait(pprpc_client *c, pprpc_timeline t, uint64_t value,
				       int timeout_ms)
{
	Pprpc__HostWait req = PPRPC__HOST_WAIT__INIT;
	int saved = c->io_timeout_ms, rc;

	if (timeout_ms < 0)
		return client_fail(c, PPRPC_EINVAL, "timeout_ms must be >= 0");
	req.timeline = t.id;
	req.value = value;
	/* 0 = no limit on the daemon side; the daemon enforces the timeout. */
	req.timeout_ms = (uint32_t)timeout_ms;
	/* The reply may legitimately take timeout_ms: the client's own I/O
	 * deadline must not cut it short. */
	if (c->io_timeout_ms > 0 && (timeout_ms == 0 || timeout_ms >= c->io_timeout_ms))
		c->io_timeout_ms = timeout_ms ? timeout_ms + c->io_timeout_ms : 0;
	rc = rpc_call(c, MSG_HOST_WAIT, &req.base, NULL, 0, NULL, NULL, NULL, 0);
	c->io_timeout_ms = saved;
	return rc;
}

PPRPC_API int pprpc_event_create(pprpc_client *c, uint32_t device, pprpc_event *out)
{
	pprpc_event ev = { .value = 0, .device = device };
	int rc = pprpc_timeline_create(c, device, 0, &ev.timeline);

	if (rc < 0)
		return rc;
	*out = ev;
	return 0;
}

PPRPC_API int pprpc_event_record(pprpc_client *c, pprpc_event *ev)
{
	int rc = pprpc_signal(c, ev->timeline, ev->value + 1);

	if (rc == 0)
		ev->value++;
	return rc;
}

PPRPC_API int pprpc_event_wait(pprpc_client *c2, uint32_t device, const char *ev_rank,
			       const pprpc_event *ev)
{
	return pprpc_wait(c2, device, ev_rank, ev->timeline, ev->value);
}

PPRPC_API int pprpc_synchronize(pprpc_client *c, uint32_t device)
{
	Pprpc__Fence req = PPRPC__FENCE__INIT;
	int rc;

	req.device = device;
	rc = rpc_call(c, MSG_FENCE, &req.base, NULL, 0, NULL, NULL, NULL, 0);
	/* Replies of earlier GETs on this queue precede the FENCE reply. */
	if (rc == 0 && c->async_err) {
		rc = client_fail(c, c->async_err, "%s", c->async_errmsg);
		c->async_err = 0;
	} else if (rc < 0) {
		c->async_err = 0;
	}
	return rc;
}
