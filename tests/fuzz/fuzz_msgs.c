/*
 * tests/fuzz/fuzz_msgs.c — libFuzzer target for every request type, through
 * the daemon's real request path, without a network.
 *
 * Each input is one client connection: conn_accept() takes a fake transport
 * (the vtable of transport/transport_impl.h) whose send checks and records
 * each reply and completes it later, as a socket would.  The input's
 * records become frames fed through the transport's frame reader — so the
 * decode + validate layer (daemon/server/conn.c), the dispatch table and the
 * handlers run as they do for a socket, queued commands execute on the CPU
 * device's worker, and completions come back through the uv loop.  The
 * connection then closes as a vanished client would (on_close), and
 * everything it owned must be gone.
 *
 * Input layout:
 *   byte 0  control: bit 0 no automatic HELLO first; bit 1 run the loop
 *           between frames; bits 2-4 feed in pieces of 1..2^n bytes (0 =
 *           whole frames); bit 5 bulk through frame_reader_window/advance
 *           (as a transport reading straight into the destination); bit 6
 *           sends fail (EIO, synchronously) after byte 1 % 16 replies;
 *           bit 7 close without draining the queue first
 *   byte 1  see bit 6
 *   then records:
 *     type    1 byte: message type = b % (MSG_TYPE_COUNT + 1) (those without a handler are refused);
 *             0xf8.. : 2 more bytes, a raw type
 *     flags   1 byte: bit 0 FRAME_F_QUEUED; bit 1 bulk from the input;
 *             bit 2 the meta as is: no handle mapping, and the input's
 *             bytes unless a bound below had to change it; bit 3 also set
 *             the REPLY flag (a protocol error)
 *     len     1 byte meta length (0xff: 2 more bytes), then the meta
 *     [bulk]  with flag bit 1: 2 bytes length % 8192, then that many bytes
 *
 * Fix-ups of a meta that decodes (so inputs reach past the handle checks;
 * the result is packed again): a buffer / graph / timeline handle 1..64
 * names an object of this input (the connection's three buffers, then what
 * BUFFER_ALLOC / GRAPH_CREATE / TIMELINE_CREATE replies returned); other
 * values are used as is.  No network: a rank that parses as HOST:PORT is
 * cleared (WAIT becomes local, RECV and PROBE are refused) — a rank that
 * does not parse still reaches the "bad rank" paths.  Bounds of the harness:
 * BUFFER_ALLOC sizes over 1 MiB (or after the 8th) are raised above any free
 * memory, so the floor check refuses them without mapping anything; a
 * GRAPH_CREATE with too much scratch space (fuzz_daemon.h) is sent empty;
 * GRAPH_RUN of a graph over the work bound names no graph; a TENSOR_SET
 * without bulk from the input gets a zero bulk of its size (<= 64 KiB).
 *
 * Host pages: the harness makes one real host page once (a sealed memfd
 * named as libclient's, its header holding a fixed key, 64 KiB after it).
 * A HOST_PAGE_MAP naming pid 1, fd 1, size 1, a 1-byte key or host "1"
 * has that field replaced by this process, the page's fd, its size, its
 * key and the fuzzed daemon's boot id ("x"), so inputs reach a mapping by
 * naming "1"s; other values go as they are (to the refusals).  A
 * TensorGet.host_page or HostPageUnmap.host_page 1..64 names a page the
 * input's MAPs returned.  The daemon never writes the page's header, and
 * every page a connection mapped goes with it.
 *
 * The same decoded messages also go straight to buffer_region() against the
 * static owner's buffers, checking its contract.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/server/dispatch.h"
#include "daemon/exec/queue.h"
#include "daemon/core/staging.h"
#include "daemon/xfer/xfer.h"
#include "proto/frame.h"
#include "proto/hostpage.h"
#include "proto/meta.h"
#include "proto/msgtype.h"
#include "tests/fuzz/fuzz_daemon.h"
#include "util/addr.h"
#include "transport/transport_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OBJ 16
#define CONN_NBUF 3
static const uint64_t conn_buf_size[CONN_NBUF] = { 256, 4000, 65536 - 24 };

/* Objects of the input's connection, by kind, for the handle fix-ups. */
struct objs {
	uint64_t buf[MAX_OBJ], graph[MAX_OBJ], tl[MAX_OBJ], hp[MAX_OBJ];
	int nbuf, ngraph, ntl, nhp;
};

/* ---- the host page ------------------------------------------------------------ */

#define HP_BYTES (HOSTPAGE_HDR + 65536)

/* One host page for the whole process, as pprpc_host_alloc makes them. */
struct hpage {
	int fd;
	uint8_t *base;                 /* HP_BYTES: the header, then the memory */
	uint8_t key[HOSTPAGE_KEY];
	uint8_t hdr[HOSTPAGE_HDR];     /* the header as made: never written by the daemon */
};

static struct hpage *hpage_get(void)
{
	static struct hpage *hp;

	if (hp)
		return hp;
	hp = calloc(1, sizeof(*hp));
	FZ_CHECK(hp);
	hp->fd = memfd_create(HOSTPAGE_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	FZ_CHECK(hp->fd >= 0);
	FZ_CHECK(ftruncate(hp->fd, HP_BYTES) == 0);
	FZ_CHECK(fcntl(hp->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0);
	hp->base = mmap(NULL, HP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, hp->fd, 0);
	FZ_CHECK(hp->base != MAP_FAILED);
	for (unsigned i = 0; i < HOSTPAGE_KEY; i++)
		hp->key[i] = (uint8_t)(0xa5 ^ i * 37);
	hostpage_hdr_init(hp->base, HP_BYTES, hp->key);
	memcpy(hp->hdr, hp->base, HOSTPAGE_HDR);
	return hp;
}

/* ---- fake transport ------------------------------------------------------------- */

struct pend {
	struct pend *next;
	transport_send_cb done;
	void *arg;
};

struct ftc {
	struct transport_conn base;   /* first */
	struct objs *objs;
	struct pend *head, **tail;
	int sends, fail_after;        /* fail_after < 0: never */
	uint64_t replies;
	uint8_t bulk_sum;             /* every reply bulk byte is read */
};

static int f_start(struct transport_conn *t)
{
	(void)t;
	return 0;
}

static void record(struct objs *o, uint16_t type, const uint8_t *meta, size_t len)
{
	ProtobufCMessage *m = NULL;

	switch (type) {
	case MSG_BUFFER_ALLOC:
		if (meta_unpack(&pprpc__buffer_alloc_reply__descriptor, meta, len, &m) == 0 && o->nbuf < MAX_OBJ)
			o->buf[o->nbuf++] = ((Pprpc__BufferAllocReply *)m)->buffer;
		break;
	case MSG_GRAPH_CREATE:
		if (meta_unpack(&pprpc__graph_create_reply__descriptor, meta, len, &m) == 0 && o->ngraph < MAX_OBJ)
			o->graph[o->ngraph++] = ((Pprpc__GraphCreateReply *)m)->graph;
		break;
	case MSG_TIMELINE_CREATE:
		if (meta_unpack(&pprpc__timeline_create_reply__descriptor, meta, len, &m) == 0 && o->ntl < MAX_OBJ)
			o->tl[o->ntl++] = ((Pprpc__TimelineCreateReply *)m)->timeline;
		break;
	case MSG_HOST_PAGE_MAP:
		if (meta_unpack(&pprpc__host_page_map_reply__descriptor, meta, len, &m) == 0 && o->nhp < MAX_OBJ)
			o->hp[o->nhp++] = ((Pprpc__HostPageMapReply *)m)->host_page;
		break;
	default:
		break;
	}
	meta_free(m);
}

/* Every reply is a well-formed frame; an error reply carries a code and a
 * reason; a reply's bulk is readable (ASan checks where it points). */
static int f_send(struct transport_conn *t, const struct iovec *iov, int iovcnt,
		  transport_send_cb done, void *arg)
{
	struct ftc *f = (struct ftc *)t;
	const struct frame_limits lim = { .max_meta = PPRPC_MAX_META, .max_bulk = UINT64_MAX };
	struct frame_hdr h;
	uint64_t req_id, bulk = 0;
	const uint8_t *meta;
	uint8_t sum = 0;
	struct pend *p;

	FZ_CHECK(!t->closing);
	FZ_CHECK(iovcnt >= 1 && iovcnt <= 2 && iov[0].iov_len >= FRAME_HDR_SIZE);
	FZ_CHECK(frame_hdr_decode(iov[0].iov_base, &lim, &h, &req_id) == 0);
	FZ_CHECK(h.flags & FRAME_F_REPLY);
	FZ_CHECK(iov[0].iov_len == FRAME_HDR_SIZE + (size_t)h.meta_len);
	for (int i = 1; i < iovcnt; i++)
		bulk += iov[i].iov_len;
	FZ_CHECK(bulk == h.bulk_len);
	for (int i = 1; i < iovcnt; i++)
		for (size_t k = 0; k < iov[i].iov_len; k++)
			sum ^= ((const uint8_t *)iov[i].iov_base)[k];
	f->bulk_sum ^= sum;	meta = (const uint8_t *)iov[0].iov_base + FRAME_HDR_SIZE;
	if (h.flags & FRAME_F_ERROR) {
		ProtobufCMessage *m = NULL;
		const Pprpc__ErrorReply *e;

		FZ_CHECK(meta_unpack(&pprpc__error_reply__descriptor, meta, h.meta_len, &m) == 0);
		e = (const Pprpc__ErrorReply *)m;
		FZ_CHECK(e->code < 0 && e->code > -PPRPC_E_COUNT_ && e->message && e->message[0]);
		meta_free(m);
	} else {
		record(f->objs, h.type, meta, h.meta_len);
	}
	f->replies++;
	if (f->fail_after >= 0 && f->sends >= f->fail_after)
		return PPRPC_EIO;
	f->sends++;
	p = malloc(sizeof(*p));
	FZ_CHECK(p);
	p->next = NULL;
	p->done = done;
	p->arg = arg;
	*f->tail = p;
	f->tail = &p->next;
	return 0;
}

/* Written (status 0) or cancelled by the close (as libuv does). */
static void f_complete(struct ftc *f, int status)
{
	while (f->head) {
		struct pend *p = f->head;

		f->head = p->next;
		if (!f->head)
			f->tail = &f->head;
		if (p->done)
			p->done(p->arg, status);
		free(p);
	}
}

static int f_pause(struct transport_conn *t) { (void)t; return 0; }
static int f_resume(struct transport_conn *t) { (void)t; return 0; }

/* Scheduled, as a socket's: on_close comes from the harness afterwards. */
static void f_close(struct transport_conn *t)
{
	t->closing = 1;
}

static const struct transport_ops fake_ops = {
	.name = "fuzz",
	.start = f_start,
	.send = f_send,
	.pause = f_pause,
	.resume = f_resume,
	.close = f_close,
};

/* ---- input -------------------------------------------------------------------- */

struct rd {
	const uint8_t *p;
	size_t n;
};

static uint8_t rd8(struct rd *r)
{
	if (!r->n)
		return 0;
	r->n--;
	return *r->p++;
}

static uint32_t rd16(struct rd *r)
{
	uint32_t v = rd8(r);

	return v | (uint32_t)rd8(r) << 8;
}

static uint64_t map(const uint64_t *tab, int n, uint64_t v)
{
	if (v == 0 || v > 64 || n == 0)
		return v;
	return tab[(v - 1) % (uint64_t)n];
}

/* A rank that would make the daemon connect somewhere is cleared (1). */
static int no_network(char *rank)
{
	char host[256];
	uint16_t port;

	if (rank && *rank && addr_split(rank, host, sizeof(host), &port, 50052) == 0) {
		rank[0] = '\0';
		return 1;
	}
	return 0;
}

/* The contract of buffer_region, against the static owner's buffers. */
static void check_region(struct fz *fz, uint64_t handle, uint64_t offset, uint64_t size)
{
	struct dbuf *b = NULL;
	char err[256] = "";
	uint64_t h = fz_map_buffer(fz, handle);
	int rc = buffer_region(&fz->d, &fz->owner->own, h, offset, size, &b, err, sizeof(err));

	if (rc == 0) {
		FZ_CHECK(b && b->handle == h && b->owner == &fz->owner->own);
		FZ_CHECK(offset <= b->size && size <= b->size - offset);
	} else {
		FZ_CHECK((rc == PPRPC_EHANDLE || rc == PPRPC_ERANGE) && err[0] && !b);
	}
}

struct input {
	struct fz *fz;
	struct conn *c;
	struct objs o;
	int nalloc;
	/* a HostPageMap's key the fix-up replaced: put back before the
	 * message is freed (its bytes are the unpacker's) */
	ProtobufCBinaryData *key_at, key_was;
};

static void unfix(struct input *in)
{
	if (in->key_at)
		*in->key_at = in->key_was;
	in->key_at = NULL;
}

/* Fix up a decoded request.  raw: only what keeps the harness bounded and
 * off the network (no handle mapping).  Returns -1 to send an empty message
 * of the type instead, 1 when something changed, 0 when nothing did. */
static int fixup(struct input *in, uint16_t type, ProtobufCMessage *msg, int raw)
{
	static struct objs none;
	struct objs *o = raw ? &none : &in->o;
	struct fz *fz = in->fz;

	switch (type) {
	case MSG_BUFFER_ALLOC: {
		Pprpc__BufferAlloc *m = (Pprpc__BufferAlloc *)msg;

		if (++in->nalloc > 8 || (m->size > (1u << 20) && m->size < (1ull << 46))) {
			m->size |= 1ull << 46;
			return 1;
		}
		break;
	}
	case MSG_BUFFER_FREE:
		((Pprpc__BufferFree *)msg)->buffer = map(o->buf, o->nbuf, ((Pprpc__BufferFree *)msg)->buffer);
		break;
	case MSG_BUFFER_CLEAR:
		((Pprpc__BufferClear *)msg)->buffer = map(o->buf, o->nbuf, ((Pprpc__BufferClear *)msg)->buffer);
		break;
	case MSG_TENSOR_SET: {
		Pprpc__TensorSet *m = (Pprpc__TensorSet *)msg;

		if (!raw)
			check_region(fz, m->buffer, m->offset, m->size);
		m->buffer = map(o->buf, o->nbuf, m->buffer);
		break;
	}
	case MSG_TENSOR_GET: {
		Pprpc__TensorGet *m = (Pprpc__TensorGet *)msg;

		if (!raw)
			check_region(fz, m->buffer, m->offset, m->size);
		m->buffer = map(o->buf, o->nbuf, m->buffer);
		m->host_page = map(o->hp, o->nhp, m->host_page);
		break;
	}
	case MSG_HOST_PAGE_MAP: {
		Pprpc__HostPageMap *m = (Pprpc__HostPageMap *)msg;
		struct hpage *hp = hpage_get();
		int changed = 0;

		if (raw)
			break;
		if (m->pid == 1)
			m->pid = (uint64_t)getpid(), changed = 1;
		if (m->fd == 1)
			m->fd = hp->fd, changed = 1;
		if (m->size == 1)
			m->size = HP_BYTES, changed = 1;
		if (m->key.len == 1) {
			in->key_at = &m->key;
			in->key_was = m->key;
			m->key.data = hp->key;
			m->key.len = HOSTPAGE_KEY;
			changed = 1;
		}
		if (m->host && !strcmp(m->host, "1"))
			m->host[0] = 'x', changed = 1;  /* fuzz_daemon.h's boot id */
		return changed;
	}
	case MSG_HOST_PAGE_UNMAP:
		((Pprpc__HostPageUnmap *)msg)->host_page = map(o->hp, o->nhp, ((Pprpc__HostPageUnmap *)msg)->host_page);
		break;
	case MSG_TENSOR_COPY: {
		Pprpc__TensorCopy *m = (Pprpc__TensorCopy *)msg;

		if (!raw)
			check_region(fz, m->src_buffer, m->src_offset, m->size);
		if (!raw)
			check_region(fz, m->dst_buffer, m->dst_offset, m->size);
		m->src_buffer = map(o->buf, o->nbuf, m->src_buffer);
		m->dst_buffer = map(o->buf, o->nbuf, m->dst_buffer);
		break;
	}
	case MSG_GRAPH_CREATE: {
		Pprpc__GraphCreate *m = (Pprpc__GraphCreate *)msg;

		for (size_t i = 0; i < m->n_tensors; i++)
			m->tensors[i]->buffer = map(o->buf, o->nbuf, m->tensors[i]->buffer);
		if (!fz_scratch_ok(m))
			return -1;
		break;
	}
	case MSG_GRAPH_RUN: {
		Pprpc__GraphRun *m = (Pprpc__GraphRun *)msg;
		struct graph *g;

		m->graph = map(o->graph, o->ngraph, m->graph);
		g = graph_get(&fz->d, &in->c->own, m->graph);
		if (g && fz_graph_work(g) > FZ_MAX_WORK) {
			m->graph = 0;
			return 1;
		}
		break;
	}
	case MSG_GRAPH_FREE:
		((Pprpc__GraphFree *)msg)->graph = map(o->graph, o->ngraph, ((Pprpc__GraphFree *)msg)->graph);
		break;
	case MSG_TIMELINE_DESTROY:
		((Pprpc__TimelineDestroy *)msg)->timeline =
			map(o->tl, o->ntl, ((Pprpc__TimelineDestroy *)msg)->timeline);
		break;
	case MSG_TIMELINE_QUERY:
		((Pprpc__TimelineQuery *)msg)->timeline = map(o->tl, o->ntl, ((Pprpc__TimelineQuery *)msg)->timeline);
		break;
	case MSG_SIGNAL:
		((Pprpc__Signal *)msg)->timeline = map(o->tl, o->ntl, ((Pprpc__Signal *)msg)->timeline);
		break;
	case MSG_HOST_WAIT:
		((Pprpc__HostWait *)msg)->timeline = map(o->tl, o->ntl, ((Pprpc__HostWait *)msg)->timeline);
		break;
	case MSG_SUBSCRIBE:
		((Pprpc__Subscribe *)msg)->timeline = map(o->tl, o->ntl, ((Pprpc__Subscribe *)msg)->timeline);
		break;
	case MSG_WAIT: {
		Pprpc__Wait *m = (Pprpc__Wait *)msg;

		m->timeline = map(o->tl, o->ntl, m->timeline);
		return no_network(m->rank);
		break;
	}
	case MSG_SEND: {
		Pprpc__Send *m = (Pprpc__Send *)msg;

		if (!raw)
			check_region(fz, m->buffer, m->offset, m->size);
		m->buffer = map(o->buf, o->nbuf, m->buffer);
		/* A PULL of it would ask the named rank whether it is its own. */
		return no_network(m->dst_rank);
		break;
	}
	case MSG_RECV: {
		Pprpc__Recv *m = (Pprpc__Recv *)msg;

		if (!raw)
			check_region(fz, m->buffer, m->offset, m->size);
		m->buffer = map(o->buf, o->nbuf, m->buffer);
		return no_network(m->src_rank);
		break;
	}
	case MSG_PROBE:
		return no_network(((Pprpc__Probe *)msg)->rank);
		break;
	case MSG_PULL: {
		/* Any host named becomes this one ("x", fuzz_daemon.h), in
		 * place: the IPC answers are reached. */
		Pprpc__Pull *m = (Pprpc__Pull *)msg;

		if (m->ipc_host && *m->ipc_host)
			m->ipc_host[0] = 'x', m->ipc_host[1] = '\0';
		break;
	}
	default:
		break;
	}
	return 0;
}

/* One record of the input as a frame: header, meta, bulk.  Returns the frame
 * length (0 at the end of the input); *out is malloc'ed. */
static size_t make_frame(struct input *in, struct rd *r, uint64_t req_id, uint8_t **out)
{
	const struct handler *hd;
	struct frame_hdr h = { .version = PPRPC_PROTO_VERSION, .req_id = req_id };
	uint8_t t, fl, *frame, *meta = NULL;
	size_t mlen, blen = 0, total;
	const uint8_t *bulk = NULL;
	ProtobufCMessage *msg = NULL;

	if (!r->n)
		return 0;
	t = rd8(r);
	h.type = t >= 0xf8 ? (uint16_t)rd16(r) : (uint16_t)(t % (MSG_TYPE_COUNT + 1));
	fl = rd8(r);
	mlen = rd8(r);
	if (mlen == 0xff)
		mlen = rd16(r);
	if (mlen > r->n)
		mlen = r->n;
	meta = malloc(mlen ? mlen : 1);
	FZ_CHECK(meta);
	memcpy(meta, r->p, mlen);
	r->p += mlen;
	r->n -= mlen;
	if (fl & 2) {
		blen = rd16(r) % 8192;
		if (blen > r->n)
			blen = r->n;
		bulk = r->p;
		r->p += blen;
		r->n -= blen;
	}
	hd = dispatch_lookup(h.type);
	if (hd && meta_unpack(hd->desc, meta, mlen, &msg) == 0) {
		int fx = fixup(in, h.type, msg, fl & 4);
		size_t n;

		if (fx == 0 && (fl & 4)) {
			/* as the input has it, byte for byte */
		} else if (fx < 0) {
			/* an empty message of the type */
			unfix(in);
			meta_free(msg);
			msg = NULL;
			mlen = 0;
		} else {
			n = meta_size(msg);
			free(meta);
			meta = malloc(n ? n : 1);
			FZ_CHECK(meta);
			FZ_CHECK(meta_pack(msg, meta) == n);
			mlen = n;
			if (h.type == MSG_TENSOR_SET && !(fl & 2) && ((Pprpc__TensorSet *)msg)->size <= 65536)
				blen = ((Pprpc__TensorSet *)msg)->size;  /* zeros */
		}
	}
	unfix(in);
	meta_free(msg);
	h.flags = (fl & 1 ? FRAME_F_QUEUED : 0) | (fl & 8 ? FRAME_F_REPLY : 0) | (blen ? FRAME_F_BULK : 0);
	h.meta_len = (uint32_t)mlen;
	h.bulk_len = blen;
	total = FRAME_HDR_SIZE + mlen + blen;
	frame = calloc(1, total);
	FZ_CHECK(frame);
	frame_hdr_encode(&h, frame);
	memcpy(frame + FRAME_HDR_SIZE, meta, mlen);
	if (bulk)
		memcpy(frame + FRAME_HDR_SIZE + mlen, bulk, blen);
	free(meta);
	*out = frame;
	return total;
}

static size_t hello_frame(uint8_t **out)
{
	Pprpc__Hello m = PPRPC__HELLO__INIT;
	struct frame_hdr h = { .version = PPRPC_PROTO_VERSION, .type = MSG_HELLO, .req_id = 0 };
	size_t n;

	m.proto_version = PPRPC_PROTO_VERSION;
	m.client_name = "fuzz";
	n = meta_size(&m.base);
	h.meta_len = (uint32_t)n;
	*out = malloc(FRAME_HDR_SIZE + n);
	FZ_CHECK(*out);
	frame_hdr_encode(&h, *out);
	meta_pack(&m.base, *out + FRAME_HDR_SIZE);
	return FRAME_HDR_SIZE + n;
}

/* Feed one frame's bytes; returns the reader's status. */
static int feed(struct ftc *f, const uint8_t *p, size_t n, unsigned piece_bits, int window)
{
	uint32_t seed = (uint32_t)n;
	int rc = 0;

	while (n > 0 && rc == 0) {
		size_t piece = n;

		if (piece_bits) {
			seed = seed * 1103515245u + 12345u;
			piece = 1 + (seed >> 16) % (1u << piece_bits);
			if (piece > n)
				piece = n;
		}
		if (window) {
			void *dst = NULL;
			size_t room = 0;

			frame_reader_window(&f->base.reader, &dst, &room);
			if (room > 0) {
				if (piece > room)
					piece = room;
				memcpy(dst, p, piece);
				rc = transport_advance(&f->base, piece);
				p += piece;
				n -= piece;
				continue;
			}
		}
		rc = transport_feed(&f->base, p, piece);
		p += piece;
		n -= piece;
	}
	return rc;
}

static void guard_cb(uv_timer_t *t)
{
	(*(uint64_t *)t->data)++;
}

/* Run the loop until the device queue is empty (or nothing happened for a
 * few ms: a WAIT that nobody will signal), completing written replies. */
static void drain(struct fz *fz, struct ftc *f, uint64_t ms)
{
	uv_timer_t guard;
	uint64_t ticks = 0;

	/* A repeating tick, so that a poll never blocks without a timeout
	 * (a one-shot guard that fired at the top of uv_run would leave the
	 * poll waiting for ever on a blocked worker). */
	uv_update_time(fz->d.loop);
	uv_timer_init(fz->d.loop, &guard);
	guard.data = &ticks;
	uv_timer_start(&guard, guard_cb, 1, 1);
	while (ticks < ms) {
		if (f)
			f_complete(f, 0);
		if (queue_depth(fz->d.dev[0]->q) == 0)
			break;
		uv_run(fz->d.loop, UV_RUN_ONCE);
	}
	uv_timer_stop(&guard);
	uv_close((uv_handle_t *)&guard, NULL);
	uv_run(fz->d.loop, UV_RUN_NOWAIT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz *fz = fz_get();
	struct pprpcd *d = &fz->d;
	struct input in;
	struct ftc *f;
	struct conn *c;
	struct dbuf *own[CONN_NBUF];
	uint64_t allocated = d->dev[0]->allocated;
	uint32_t nbuffers = d->buffers.count;
	struct rd r;
	char err[256];
	uint8_t ctl;
	uint8_t *frame;
	size_t n;
	int rc = 0;

	if (size < 2)
		return 0;
	ctl = data[0];
	r.p = data + 2;
	r.n = size - 2;

	memset(&in, 0, sizeof(in));
	in.fz = fz;
	f = calloc(1, sizeof(*f));
	FZ_CHECK(f);
	f->base.ops = &fake_ops;
	snprintf(f->base.peer, sizeof(f->base.peer), "fuzz:1");
	f->objs = &in.o;
	f->tail = &f->head;
	f->fail_after = ctl & 0x40 ? data[1] % 16 : -1;
	conn_accept(d, &f->base);
	c = d->conns;
	FZ_CHECK(c && c->t == &f->base);
	in.c = c;
	conn_ref(c);  /* ours: tells when everything else let go */

	/* The connection's own buffers; an extra reference keeps the memory
	 * (and its guarded tail) until the harness unguards it. */
	for (int i = 0; i < CONN_NBUF; i++) {
		FZ_CHECK(buffer_alloc(d, &c->own, d->dev[0], conn_buf_size[i], &own[i], err, sizeof(err)) == 0);
		buffer_ref(own[i]);
		fz_guard(own[i]->ptr, own[i]->size);
		in.o.buf[in.o.nbuf++] = own[i]->handle;
	}

	if (!(ctl & 1)) {
		n = hello_frame(&frame);
		rc = feed(f, frame, n, 0, 0);
		free(frame);
	}
	for (uint64_t id = 1; rc == 0 && !f->base.closing; id++) {
		n = make_frame(&in, &r, id, &frame);
		if (!n)
			break;
		rc = feed(f, frame, n, (ctl >> 2) & 7, ctl & 0x20);
		free(frame);
		if (ctl & 2) {
			f_complete(f, 0);
			uv_run(d->loop, UV_RUN_NOWAIT);
		}
	}
	if (!(ctl & 0x80))
		drain(fz, f, 5);

	/* The client goes away: the transport cancels what it had not written
	 * and reports the close. */
	f->base.closing = 1;
	f_complete(f, PPRPC_ECLOSED);
	f->base.owner->on_close(f->base.owner_ctx, 0);
	frame_reader_fini(&f->base.reader);
	free(f);
	/* Queued commands complete (cancelled), handles close, references drop. */
	for (int spins = 0; c->refs > 1; spins++) {
		FZ_CHECK(spins < 500);  /* a reference is never dropped, or something hangs */
		drain(fz, NULL, 10);
	}
	xfer_expire(d, uv_now(d->loop) + 1000000);
	FZ_CHECK(c->refs == 1 && c->closed && !c->own.bufs && !c->own.graphs && !c->own.timelines && !c->lwaits);
	FZ_CHECK(!c->own.hostpages && c->own.nhostpages == 0);
	conn_unref(c);

	for (int i = 0; i < CONN_NBUF; i++) {
		FZ_CHECK(own[i]->refs == 1 && own[i]->handle == 0);
		fz_unguard(own[i]->ptr, own[i]->size);
		buffer_unref(own[i]);
	}
	/* Nothing of the connection outlives it. */
	FZ_CHECK(d->conns == NULL);
	FZ_CHECK(d->buffers.count == nbuffers && d->graphs.count == 0 && d->timelines.count == 0);
	FZ_CHECK(d->hostpages.count == 0);
	FZ_CHECK(!memcmp(hpage_get()->base, hpage_get()->hdr, HOSTPAGE_HDR));
	FZ_CHECK(d->dev[0]->allocated == allocated);
	FZ_CHECK(xfer_live_sources(d) == 0 && staging_used(&d->staging) == 0);
	FZ_CHECK(queue_depth(d->dev[0]->q) == 0);
	return 0;
}
