/*
 * transport/rdma_ring.h — the hardware-free heart of the RDMA transport:
 * TX slots, receiver-driven credits, chunking of a byte stream into
 * messages, completion bookkeeping and failure.  No verbs here: the verbs
 * layer (rdma_verbs.c) posts what this decides and reports what completed,
 * and tests/unit/test_rdma_ring.c drives two rings joined by memcpy.
 *
 * The model.  Each side has a TX ring of tx_depth slots of `chunk` bytes
 * and an RX ring of rx_depth slots, each RX slot posted as one receive.  The
 * stream of frames the owner sends is copied into TX slots in order (many
 * small frames share one slot; a large bulk spans many slots, the last one
 * partial) and each filled slot goes out as one SEND_WITH_IMM.  A sender may
 * only use a receive the peer has posted — a *credit*.  Credits start at the
 * peer's rx_depth and come back in the immediate data of the peer's
 * messages once the peer has *consumed* (delivered and re-posted) a slot, so
 * no message ever arrives without a posted receive and nothing depends on
 * RNR retry (the QP runs with rnr_retry 0: an RNR would be a hard error).
 *
 * Deadlock freedom: data needs two credits, leaving the last one for a
 * credit-only message (length 0, immediate = credits returned).  A side
 * sends one when it owes at least `threshold` credits and has no data to
 * piggyback them on.  Every message carries all credits owed at the time,
 * so when a side spends its last credit the peer gains at least one; two
 * quiescent sides can never both hold zero.  threshold >= 2 (rx_depth >= 4)
 * keeps credit-only messages from answering each other for ever.
 *
 * Back-pressure comes for free: a receiver that stops consuming (the owner
 * paused reading) returns no credits, and the sender stops.
 *
 * Large payloads (rdma_bulk.h): a request may name an offset from which
 * its bytes go by RDMA READ instead: they are copied into a source slot and
 * a DESC message takes their place in the stream; the peer pulls them and
 * answers with an ACK.  Message kinds travel in the top byte of the
 * immediate data (the low 24 bits are credits): DATA (stream bytes, or
 * credit-only when empty), DESC, ACK.  ACKs are sent before data and
 * handled on arrival, outside the stream order.
 *
 * A request's done callback runs once its bytes are copied into TX slots
 * (or source slots)
 * (the caller's memory is then free again, as with a TCP write), or with an
 * error when the ring fails first.  Callbacks are deferred to
 * rdma_ring_run_done so they never run inside the ring's own loops.
 */
#ifndef PPRPC_TRANSPORT_RDMA_RING_H
#define PPRPC_TRANSPORT_RDMA_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "transport/rdma_bulk.h"

#define RDMA_RING_MAX_IOV 8
#define RDMA_RX_DEPTH_MIN 4       /* credit threshold >= 2 needs it */
#define RDMA_RX_DEPTH_MAX 4096
#define RDMA_TX_DEPTH_MAX 1024
#define RDMA_CHUNK_MIN (4u << 10)
#define RDMA_CHUNK_MAX (64u << 20)

struct rdma_geom {
	uint32_t chunk;     /* bytes per slot (TX and RX) */
	uint32_t tx_depth;  /* TX slots: sends in flight */
	uint32_t rx_depth;  /* RX slots: posted receives */
	/* Bulk path (rdma_bulk.h): a frame whose bulk has at least this many
	 * bytes moves it by RDMA READ; 0: never (PPRPC_RDMA_BULK=off).  Not
	 * part of the ring geometry: the memlock ladder ignores it. */
	uint32_t bulk_threshold;
};

#define RDMA_BULK_THRESHOLD_MIN (4u << 10)
#define RDMA_BULK_THRESHOLD_MAX (1u << 30)
/* Bulk slots per connection: source and landing, each depth x chunk. */
#define RDMA_BULK_CHUNK (1u << 20)
#define RDMA_BULK_DEPTH 4

typedef void (*rdma_done_cb)(void *arg, int status);

enum rdma_msg_kind { RDMA_MSG_DATA = 0, RDMA_MSG_DESC = 1, RDMA_MSG_ACK = 2 };
#define RDMA_IMM_CREDITS 0xffffffu
static inline uint32_t rdma_imm(uint32_t credits, uint32_t kind)
{
	return (credits & RDMA_IMM_CREDITS) | kind << 24;
}

struct rdma_txreq {
	struct rdma_txreq *next;
	struct iovec iov[RDMA_RING_MAX_IOV];
	int iovcnt;
	size_t total;
	size_t bulk_off;    /* bytes from here go by READ (SIZE_MAX: none) */
	int zc;             /* ... described in place (owner memory, zc_rkey) */
	uint32_t zc_rkey;
	uint32_t zc_out;    /* its descriptors not yet acknowledged */
	int cur;            /* iov being copied */
	size_t off;         /* within iov[cur] */
	size_t left;        /* bytes not yet copied */
	int status;
	rdma_done_cb done;
	void *arg;
};

/* One message to post: `len` bytes at slot (len 0: credit-only). */
struct rdma_tx_msg {
	uint32_t slot;      /* TX slot index (meaningless for credit-only) */
	uint32_t len;
	uint32_t credits;   /* to put in the immediate data */
	uint32_t kind;      /* enum rdma_msg_kind */
	int ctrl;           /* credit-only */
};

struct rdma_ring_stats {
	uint64_t msgs_out, msgs_in, credit_msgs_out;
	uint64_t stall_no_credit;   /* fill found data but no credit */
	uint64_t stall_no_slot;     /* fill found data but every TX slot in flight */
};

struct rdma_ring {
	struct rdma_geom own;
	uint32_t peer_rx_depth;
	uint32_t msg_max;          /* min(own chunk, peer chunk) */
	uint8_t *tx_mem;           /* tx_depth * own.chunk, not owned */
	uint64_t tx_head;          /* messages filled (data) */
	uint64_t tx_tail;          /* data messages completed */
	uint32_t credits;          /* receives the peer has posted for us */
	uint32_t ctrl_inflight;
	uint32_t owed;             /* our consumed receives not yet reported */
	uint32_t threshold;
	/* Received, not yet consumed (FIFO of RX slots). */
	uint32_t *rx_fifo;
	uint32_t *rx_len;          /* by slot */
	uint8_t *rx_kind;          /* by slot */
	uint32_t rx_head, rx_count;
	struct rdma_txreq *q_head, **q_tail;  /* not yet fully copied */
	struct rdma_txreq *zc_wait;           /* described in place, awaiting ACKs */
	struct rdma_txreq *done_head, **done_tail;
	size_t queued_bytes;
	int failed;                /* first error, sticky */
	int bulk_on;               /* both sides have bulk slots */
	struct rdma_bulk bulk;
	struct rdma_ring_stats st;
};

/* Check a requested geometry; err says which value is out of range. */
int rdma_geom_validate(const struct rdma_geom *g, char *err, size_t errlen);

/* tx_mem: own->tx_depth * own->chunk bytes (registered by the caller).  The
 * peer's rx_depth and chunk come from the connection handshake. */
int rdma_ring_init(struct rdma_ring *r, const struct rdma_geom *own, uint32_t peer_rx_depth,
		   uint32_t peer_chunk, uint8_t *tx_mem);
/* Frees the ring's own memory; queued requests must have been failed. */
void rdma_ring_fini(struct rdma_ring *r);

/* Queue a send (the iov array is copied, the bytes are not). */
int rdma_ring_enqueue(struct rdma_ring *r, const struct iovec *iov, int iovcnt, rdma_done_cb done,
		      void *arg);
/* The same, bytes from bulk_off on moving by READ (needs bulk enabled). */
int rdma_ring_enqueue_bulk(struct rdma_ring *r, const struct iovec *iov, int iovcnt, size_t bulk_off,
			   rdma_done_cb done, void *arg);
/* The same, but bytes from bulk_off (one iovec element, in memory the
 * peer can READ with rkey) are described in place, not copied: done runs
 * only once the peer has acknowledged all of them. */
int rdma_ring_enqueue_zc(struct rdma_ring *r, const struct iovec *iov, int iovcnt, size_t bulk_off, uint32_t rkey,
			 rdma_done_cb done, void *arg);
/* Enable the bulk path once both sides are known to have bulk slots. */
int rdma_ring_bulk_enable(struct rdma_ring *r, uint32_t chunk, uint32_t depth, uint8_t *src, uint8_t *land,
			  uint32_t rkey, uint32_t max_reads);
/* Next message to post: 1 with *out filled, 0 when nothing can go now, or
 * the ring's error.  ACKs first, then data (a DESC when the head request is
 * in its bulk part); else a credit-only message if one is due. */
int rdma_ring_next(struct rdma_ring *r, struct rdma_tx_msg *out);
/* Pointer to a TX slot. */
uint8_t *rdma_ring_tx_slot(const struct rdma_ring *r, uint32_t slot);
/* A posted message completed (status 0) or failed (< 0: the ring fails). */
int rdma_ring_tx_done(struct rdma_ring *r, int ctrl, int status);
/* A message arrived in RX slot `slot`: len bytes at data, immediate imm
 * (credits and kind).  Errors (bad slot/length/kind, more credits than
 * exist, a bad ACK) fail the ring.  Returns 1 for an ACK, which is handled
 * now and counted as consumed: re-post its receive at once. */
int rdma_ring_rx_arrived(struct rdma_ring *r, uint32_t slot, uint32_t len, uint32_t imm, const uint8_t *data);
/* The oldest received, unconsumed message: 1 and its slot and length. */
int rdma_ring_rx_peek(const struct rdma_ring *r, uint32_t *ret_slot, uint32_t *ret_len);
/* Its kind (RDMA_MSG_DATA or RDMA_MSG_DESC). */
uint32_t rdma_ring_rx_kind(const struct rdma_ring *r);
/* The peeked message was consumed and its receive re-posted. */
void rdma_ring_rx_consumed(struct rdma_ring *r);
/* Fail the ring: every queued request completes with code. */
void rdma_ring_fail(struct rdma_ring *r, int code);
/* Run deferred done callbacks (requests copied out or failed). */
void rdma_ring_run_done(struct rdma_ring *r);
/* Data messages posted and not yet completed. */
static inline uint32_t rdma_ring_tx_inflight(const struct rdma_ring *r)
{
	return (uint32_t)(r->tx_head - r->tx_tail);
}

/* ---- memlock ladder ------------------------------------------------------------ */

enum rdma_ladder_step {
	RDMA_STEP_REQUESTED,      /* the configured geometry */
	RDMA_STEP_SMALLER_DEPTH,  /* same chunk, fewer slots */
	RDMA_STEP_SINGLE_CHUNK,   /* one 256 KiB TX chunk, minimal RX */
	RDMA_STEP_TCP,            /* nothing fits: use TCP */
};

#define RDMA_FALLBACK_CHUNK (256u << 10)

const char *rdma_ladder_step_name(enum rdma_ladder_step s);
/* Bytes registered for a geometry (TX + RX rings). */
uint64_t rdma_geom_bytes(const struct rdma_geom *g);
/* Geometry to try at step `s` given the request and a memlock budget in
 * bytes (UINT64_MAX = unlimited).  Returns 0 and *out when the step fits,
 * or a negative code (the step does not fit). */
int rdma_ladder_geom(const struct rdma_geom *req, enum rdma_ladder_step s, uint64_t budget,
		     struct rdma_geom *out);
/* The first step at or after `from` that fits the budget (TCP if none). */
enum rdma_ladder_step rdma_ladder_plan(const struct rdma_geom *req, enum rdma_ladder_step from,
				       uint64_t budget, struct rdma_geom *out);

#endif
