/*
 * daemon/handlers/h_hostpage.c — HOST_PAGE_MAP / HOST_PAGE_UNMAP: a client
 * of this host lends memory of its own for its TENSOR_GETs to land in
 * (daemon/objects/hostpage.h says what is checked, h_tensor.c uses them).
 */
#include <stdio.h>
#include <string.h>

#include "daemon/objects/hostpage.h"
#include "daemon/pprpcd.h"
#include "daemon/server/conn.h"
#include "daemon/server/dispatch.h"
#include "daemon/server/reply.h"
#include "proto/frame.h"
#include "pprpc/types.h"

/* Both are answered: the client must know whether its GETs may land. */
static int refuse_queued(struct conn *c, struct request *r)
{
	if (!(r->hdr.flags & FRAME_F_QUEUED))
		return 0;
	reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EINVAL, "HOST_PAGE_MAP/UNMAP are answered, never queued");
	return 1;
}

void h_host_page_map(struct conn *c, struct request *r)
{
	const Pprpc__HostPageMap *m = (const Pprpc__HostPageMap *)r->msg;
	Pprpc__HostPageMapReply rep = PPRPC__HOST_PAGE_MAP_REPLY__INIT;
	struct hostpage *p;
	char err[384];
	int rc;

	if (refuse_queued(c, r))
		return;
	if (!c->d->boot_id[0] || !m->host || strcmp(m->host, c->d->boot_id)) {
		snprintf(err, sizeof(err), "HOST_PAGE_MAP: the client is on another host (or this one's boot id is unknown)");
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EUNSUPP, err);
		return;
	}
	rc = hostpage_map(c->d, &c->own, m->pid, m->fd, m->size, m->key.data, m->key.len, &p, err, sizeof(err));
	if (rc < 0) {
		/* said by reply_error, which keeps a hostile client's refusals
		 * out of the journal after the first few */
		reply_error(c, r->hdr.type, r->hdr.req_id, rc, err);
		return;
	}
	/* the first few of a connection: a client mapping and unmapping
	 * in a loop does not fill the journal */
	if (++c->own.hostpage_maps <= 4)
		LOG(c->d, LOG_INFO_, "%s: host page of %llu bytes (process %llu fd %d) mapped%s", c->name,
		    (unsigned long long)m->size, (unsigned long long)m->pid, (int)m->fd,
		    p->pinned_by ? ", page-locked" : ", not page-locked");
	c->d->stats.host_pages++;
	c->d->stats.host_pages_pinned += p->pinned_by != NULL;
	rep.host_page = p->handle;
	rep.pinned = p->pinned_by != NULL;
	reply_send(c, r->hdr.type, r->hdr.req_id, &rep.base, NULL, 0, NULL, NULL);
}

void h_host_page_unmap(struct conn *c, struct request *r)
{
	const Pprpc__HostPageUnmap *m = (const Pprpc__HostPageUnmap *)r->msg;
	struct hostpage *p;

	if (refuse_queued(c, r))
		return;
	p = hostpage_get(c->d, &c->own, m->host_page);
	if (!p) {
		reply_error(c, r->hdr.type, r->hdr.req_id, PPRPC_EINVAL, "HOST_PAGE_UNMAP: no such host page");
		return;
	}
	/* queued GETs into it still hold the mapping */
	hostpage_retire(c->d, p);
	reply_ok(c, r->hdr.type, r->hdr.req_id);
}
