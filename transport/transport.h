/*
 * transport/transport.h — the connection interface used by the daemon's loop.
 *
 * A transport delivers whole frames: it feeds received bytes through a
 * frame_reader (proto/frame_reader.h) whose callbacks belong to the owner of
 * the connection, and it reads bulk payloads straight into the memory the
 * owner named in on_meta.  Sending takes an iovec, so a reply's bulk goes out
 * from the tensor's own memory.  Implementations: tcp (libuv streams) and
 * rdma (rdmacm + verbs, rdma.h).  The vtable is in transport_impl.h.
 */
#ifndef PPRPC_TRANSPORT_H
#define PPRPC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto/frame_reader.h"

struct transport_conn;

struct transport_stats {
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t frames_in;
	uint64_t frames_out;
	uint64_t direct_bulk_bytes;  /* bulk bytes read straight into their destination */
	/* Bytes by path on RDMA: moved by READ of bulk slots (in: we pulled;
	 * out: the peer pulled, acknowledged).  The rest went through the
	 * message slots. */
	uint64_t bulk_bytes_in;
	uint64_t bulk_bytes_out;
};

/* What a connection really runs on — reported in logs and STATS, so RDMA
 * activation is proven, not assumed. */
struct transport_info {
	char kind[8];          /* "tcp" | "rdma" */
	char device[32];       /* RDMA device ("" for tcp) */
	int gid_index;         /* source GID index, -1 for tcp */
	uint32_t mtu;          /* RDMA path MTU in bytes, 0 for tcp */
	uint32_t chunk, tx_depth, rx_depth;  /* ring geometry in use */
	char ladder[24];       /* memlock ladder step taken ("" for tcp) */
	char ladder_why[160];  /* why the ladder stepped down ("" at the requested step) */
	char fallback[200];    /* why this is TCP although RDMA was tried ("" if not) */
	char bulk[200];        /* large payloads: "read >= ..." or "off (why)"; "" for tcp */
};

/* Callbacks of the connection's owner. */
struct transport_owner {
	const struct frame_reader_ops *frame;
	/* The stream is unusable (bad header, oversize, a callback refused):
	 * nothing more is read.  The owner may send an error reply, then must
	 * call transport_close. */
	void (*on_reader_error)(void *ctx, int code, uint64_t req_id);
	/* The connection is gone (peer closed, error, or transport_close);
	 * status 0 or a negative code.  Called once; the transport frees the
	 * connection right after. */
	void (*on_close)(void *ctx, int status);
};

typedef void (*transport_send_cb)(void *arg, int status);

/* Start receiving; frames go to owner->frame callbacks with ctx. */
int transport_start(struct transport_conn *c, const struct transport_owner *owner, void *ctx,
		    const struct frame_limits *lim);
/* Queue iov for sending; done(arg, status) runs once the memory may be
 * reused (also when the connection closes first).  The iov array itself is
 * copied; the bytes it points to are not. */
int transport_send(struct transport_conn *c, const struct iovec *iov, int iovcnt,
		   transport_send_cb done, void *arg);
/* Back-pressure: stop / resume reading from the peer. */
int transport_pause(struct transport_conn *c);
int transport_resume(struct transport_conn *c);
/* Close (scheduled: on_close follows from the loop). */
void transport_close(struct transport_conn *c);
/* Close at once, dropping what is queued and not yet written (the send
 * callbacks run with an error, then on_close): for a peer that stopped
 * reading, whose unwritten data would otherwise hold our memory for ever
 * (transport_close waits for it to be written). */
void transport_abort(struct transport_conn *c);
const struct transport_stats *transport_stats(struct transport_conn *c);
const char *transport_name(const struct transport_conn *c);
const char *transport_peer(const struct transport_conn *c);
void transport_get_info(const struct transport_conn *c, struct transport_info *out);
/* Record why this (TCP) connection is not RDMA. */
void transport_set_fallback(struct transport_conn *c, const char *why);
/* One line for logs: "rdma rxe0 gid 1 mtu 4096 ring 8x512 KiB rx 32 (requested)". */
void transport_describe(const struct transport_conn *c, char *buf, size_t len);
/* The frame reader (its raw header bytes and limits, for error reports). */
const struct frame_reader *transport_reader(const struct transport_conn *c);

#endif
