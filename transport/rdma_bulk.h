/*
 * transport/rdma_bulk.h — large payloads by RDMA READ: the hardware-free
 * descriptor / read / acknowledgement state machine under rdma_ring.h.
 *
 * Why.  Through the message slots every byte of a large bulk costs one
 * SEND per chunk, a posted receive, a credit, and a copy into the RX slot.
 * Here the sender copies the payload into a registered *source* slot and
 * sends only a 24-byte descriptor (address, rkey, length, tag); the
 * receiver pulls it with RDMA READs, several in flight, into registered
 * *landing* slots and feeds them to its frame reader in order, then
 * acknowledges the tag so the sender can reuse the source slot.  The
 * descriptor travels in the ordinary message stream, so the payload keeps
 * its place among the frames; no daemon code knows which path moved it.
 *
 * Why bounce slots and not the caller's memory.  Registering the owner's
 * buffers (tensors) would save the copies, but a cached registration of
 * memory that is freed and re-mapped at the same address silently reads
 * stale pages, and registering per message is what the design forbids on
 * the hot path.  The slots are registered once per connection, inside the
 * memlock budget (after the rings: a connection without bulk slots still
 * works, over the message slots).  The exception is memory the owner
 * declares mapped for the whole life of the transport (the daemon's SEND
 * staging ring, rdma_ctx_add_region): a bulk inside it is described in
 * place ("zero-copy"), with tags above the source slots, and its request
 * completes only when every descriptor is acknowledged.
 *
 * Flow control.  A sender holds at most `depth` unacknowledged
 * descriptors (its source slots); the receiver accepts up to
 * RDMA_BULK_DEPTH_MAX of them queued, so a peer that sends more is
 * hostile.  Acknowledgements are handled when they arrive, not in stream
 * order, and the ring sends them before data: two sides both blocked on
 * source slots each release the other's (no deadlock).
 *
 * Nothing here posts anything: the ring and the verbs layer ask what to
 * do (rdma_bulk_read_next, rdma_bulk_ack_take) and report what happened.
 */
#ifndef PPRPC_TRANSPORT_RDMA_BULK_H
#define PPRPC_TRANSPORT_RDMA_BULK_H

#include <stddef.h>
#include <stdint.h>

#define RDMA_BULK_DEPTH_MAX 16
#define RDMA_BULK_CHUNK_MIN (64u << 10)
#define RDMA_BULK_CHUNK_MAX (16u << 20)
#define RDMA_BULK_DESC_SIZE 24
#define RDMA_BULK_ACK_SIZE 8

struct rdma_bulk_stats {
	uint64_t descs_out, descs_in, acks_out, acks_in;
	uint64_t bytes_out;         /* payload bytes the peer pulled from us (acknowledged) */
	uint64_t bytes_in;          /* payload bytes we pulled (delivered) */
	uint64_t reads;             /* READ work requests completed */
	uint64_t stall_no_src;      /* a bulk waited for a free source slot */
	uint64_t zc_descs_out;      /* descriptors of owner memory, in place */
};

/* One READ to post: len bytes from the peer's (raddr, rkey) into local. */
struct rdma_read {
	uint64_t raddr;
	uint32_t rkey;
	uint32_t len;
	uint32_t slot;              /* landing slot (for the work request id) */
	uint8_t *local;
};

struct rdma_bulk_desc {
	uint64_t addr;
	uint32_t rkey, len, tag;
	uint32_t done;              /* bytes read so far (receive side) */
};

struct rdma_bulk {
	uint32_t chunk, depth;      /* own source and landing slots: depth x chunk each */
	uint32_t max_reads;         /* READs in flight (QP initiator depth) */
	uint8_t *src, *land;        /* registered by the caller */
	uint32_t rkey;              /* of src */
	/* send side: tags [0, depth) are source slots, [depth, MAX) describe
	 * owner memory in place */
	uint32_t src_busy;          /* bit per tag awaiting its ack */
	uint32_t src_len[RDMA_BULK_DEPTH_MAX];
	void *zc_req[RDMA_BULK_DEPTH_MAX];   /* the ring's request of a zero-copy tag */
	/* acknowledgements owed to the peer (tags), sent before data */
	uint32_t ack_tag[RDMA_BULK_DEPTH_MAX];
	uint32_t ack_n;
	/* receive side: descriptors in stream order, not yet fully delivered */
	struct rdma_bulk_desc pq[RDMA_BULK_DEPTH_MAX];
	uint64_t pq_head, pq_tail;  /* absolute sequence numbers */
	uint64_t rd_seq;            /* descriptor being read */
	/* landing slots, a FIFO: ready (read, not delivered), then in flight */
	uint32_t land_head, land_ready, land_inflight;
	uint32_t land_len[RDMA_BULK_DEPTH_MAX];
	uint64_t land_seq[RDMA_BULK_DEPTH_MAX];   /* descriptor the slot belongs to */
	uint8_t land_last[RDMA_BULK_DEPTH_MAX];   /* its last piece */
	struct rdma_bulk_stats st;
};

/* src and land: depth * chunk bytes each.  max_reads >= 1. */
int rdma_bulk_init(struct rdma_bulk *b, uint32_t chunk, uint32_t depth, uint8_t *src, uint8_t *land,
		   uint32_t rkey, uint32_t max_reads);

/* ---- send side ---- */
/* A free source slot, or -1. */
int rdma_bulk_src_free(const struct rdma_bulk *b);
static inline uint8_t *rdma_bulk_src_ptr(const struct rdma_bulk *b, uint32_t slot)
{
	return b->src + (size_t)slot * b->chunk;
}
/* Source slot `slot` holds len bytes: mark it busy and write its
 * descriptor (RDMA_BULK_DESC_SIZE bytes) to out. */
void rdma_bulk_desc_make(struct rdma_bulk *b, uint32_t slot, uint32_t len, uint8_t *out);
/* A free zero-copy tag, or -1. */
int rdma_bulk_zc_tag(const struct rdma_bulk *b);
/* Describe len bytes at addr (rkey) in place under zero-copy tag `tag`,
 * owned by request req. */
void rdma_bulk_desc_make_zc(struct rdma_bulk *b, uint32_t tag, const void *addr, uint32_t rkey, uint32_t len,
			    void *req, uint8_t *out);
/* The peer acknowledged (len bytes at p).  Frees the tag (*ret_tag); an
 * ack for a tag not in use, or malformed, is PPRPC_EPROTO. */
int rdma_bulk_ack_in(struct rdma_bulk *b, const uint8_t *p, uint32_t len, uint32_t *ret_tag);
/* Unsent acknowledgements: take one into out (RDMA_BULK_ACK_SIZE bytes). */
static inline int rdma_bulk_ack_pending(const struct rdma_bulk *b)
{
	return b->ack_n > 0;
}
void rdma_bulk_ack_take(struct rdma_bulk *b, uint8_t *out);

/* ---- receive side ---- */
/* A descriptor arrived in stream order.  discard: the owner reads no more
 * (reader failed, closing): acknowledge without reading, so the peer's
 * sends still complete.  Malformed or too many: PPRPC_EPROTO. */
int rdma_bulk_desc_in(struct rdma_bulk *b, const uint8_t *p, uint32_t len, int discard);
/* Descriptors whose bytes are not all delivered: stream data behind them
 * must wait. */
static inline int rdma_bulk_busy(const struct rdma_bulk *b)
{
	return b->pq_head != b->pq_tail;
}
/* Next READ to post: 1 and *out, or 0. */
int rdma_bulk_read_next(struct rdma_bulk *b, struct rdma_read *out);
/* The oldest READ in flight completed (RC completes them in order). */
int rdma_bulk_read_done(struct rdma_bulk *b);
/* The oldest landed piece: 1 with its bytes, or 0. */
int rdma_bulk_landed_peek(const struct rdma_bulk *b, const uint8_t **ret_p, uint32_t *ret_len);
/* That piece was delivered: frees the landing slot, and after a
 * descriptor's last piece owes the peer its acknowledgement. */
void rdma_bulk_landed_consumed(struct rdma_bulk *b);
/* Forget every transfer in progress (the connection failed). */
void rdma_bulk_reset(struct rdma_bulk *b);

#endif
