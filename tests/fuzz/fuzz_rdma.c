/*
 * tests/fuzz/fuzz_rdma.c — libFuzzer target for what an RDMA peer controls:
 * the messages that arrive in our receive slots (immediate data = credits
 * and kind, payload = stream bytes, bulk descriptors, ACKs), driven through
 * the ring (rdma_ring.c) and the bulk state machine (rdma_bulk.c) in the
 * order rdma_verbs.c's pump uses them.
 *
 * Input: byte 0 picks the geometry (bulk depth, READs in flight); then ops
 * until the input ends:
 *   op % 4 == 0  a message arrives: kind byte, credits byte, 2-byte length
 *                (little-endian, capped at the slot), then that many payload
 *                bytes (a receive is taken from the posted FIFO; none left
 *                means the peer broke the credit rule: the op is dropped, as
 *                an RNR would fail the QP)
 *   op % 4 == 1  the owner consumes: landed bulk, the FIFO (DESC queues READs,
 *                stream data waits behind unfinished bulk), READs posted
 *   op % 4 == 2  the oldest READ completes (its landing bytes are a pattern:
 *                the descriptor's address is the peer's, never touched)
 *   op % 4 == 3  we post what the ring allows (and it completes)
 * Two sends are queued first, one copied into source slots and one
 * described in place, so ACKs find busy tags.
 *
 * Besides no crash, leak or out-of-bounds access, the target aborts when an
 * invariant breaks: landing slots and READs in flight within their bounds,
 * queued descriptors and owed ACKs within RDMA_BULK_DEPTH_MAX, credits never
 * above what the peer posted, a failed ring stays failed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"
#include "transport/rdma_ring.h"

#define CHUNK 4096u
#define RX 8u
#define TX 4u
#define BCHUNK (64u << 10)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fz {
	struct rdma_ring r;
	uint8_t tx[TX * CHUNK], rx[RX * CHUNK];
	uint8_t *src, *land;
	uint32_t rq[RX], rq_head, rq_n;
	uint8_t payload[BCHUNK];
};

static void check(const struct fz *f)
{
	const struct rdma_bulk *b = &f->r.bulk;

	if (f->r.credits > f->r.peer_rx_depth || f->r.rx_count > RX)
		abort();
	if (!f->r.bulk_on)
		return;
	if (b->land_ready + b->land_inflight > b->depth || b->land_inflight > b->max_reads ||
	    b->pq_tail - b->pq_head > RDMA_BULK_DEPTH_MAX || b->ack_n > RDMA_BULK_DEPTH_MAX ||
	    b->rd_seq < b->pq_head || b->rd_seq > b->pq_tail)
		abort();
}

static void consume(struct fz *f)
{
	uint32_t slot, len;
	const uint8_t *p;
	struct rdma_read rd;

	if (f->r.failed)
		return;
	for (;;) {
		if (rdma_bulk_landed_peek(&f->r.bulk, &p, &len)) {
			if (len == 0 || len > f->r.bulk.chunk)
				abort();
			rdma_bulk_landed_consumed(&f->r.bulk);
			continue;
		}
		if (!rdma_ring_rx_peek(&f->r, &slot, &len))
			break;
		if (rdma_ring_rx_kind(&f->r) == RDMA_MSG_DESC) {
			if (rdma_bulk_desc_in(&f->r.bulk, f->rx + slot * CHUNK, len, 0) < 0) {
				rdma_ring_fail(&f->r, PPRPC_EPROTO);   /* rdma_verbs.c closes */
				return;
			}
		} else if (rdma_bulk_busy(&f->r.bulk)) {
			break;
		}
		rdma_ring_rx_consumed(&f->r);
		f->rq[(f->rq_head + f->rq_n++) % RX] = slot;
	}
	while (rdma_bulk_read_next(&f->r.bulk, &rd)) {
		if (rd.len == 0 || rd.len > f->r.bulk.chunk || rd.local < f->land ||
		    rd.local + rd.len > f->land + (size_t)f->r.bulk.depth * f->r.bulk.chunk)
			abort();
		memset(rd.local, 0x5a, rd.len);
	}
}

static void post(struct fz *f)
{
	struct rdma_tx_msg m;

	while (rdma_ring_next(&f->r, &m) == 1) {
		if (m.len > CHUNK || (!m.ctrl && m.slot >= TX))
			abort();
		if (rdma_ring_tx_done(&f->r, m.ctrl, 0) < 0)
			break;
	}
	rdma_ring_run_done(&f->r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz *f;
	const struct rdma_geom g = { .chunk = CHUNK, .tx_depth = TX, .rx_depth = RX };
	struct iovec copied[2], inplace[2];
	uint8_t hdr[32] = { 0 };
	uint32_t depth, reads;
	size_t i = 1;

	if (size < 1)
		return 0;
	f = calloc(1, sizeof(*f));
	if (!f)
		return 0;
	depth = 1 + (data[0] & 3);
	reads = 1 + ((data[0] >> 2) & 3);
	f->src = calloc(depth, BCHUNK);
	f->land = calloc(depth, BCHUNK);
	if (!f->src || !f->land || rdma_ring_init(&f->r, &g, RX, CHUNK, f->tx) < 0)
		goto out;
	if (rdma_ring_bulk_enable(&f->r, BCHUNK, depth, f->src, f->land, 7, reads) < 0)
		abort();
	for (uint32_t s = 0; s < RX; s++)
		f->rq[f->rq_n++] = s;
	copied[0] = (struct iovec){ hdr, sizeof(hdr) };
	copied[1] = (struct iovec){ f->payload, sizeof(f->payload) };
	inplace[0] = copied[0];
	inplace[1] = copied[1];
	rdma_ring_enqueue_bulk(&f->r, copied, 2, sizeof(hdr), NULL, NULL);
	rdma_ring_enqueue_zc(&f->r, inplace, 2, sizeof(hdr), 9, NULL, NULL);
	while (i < size) {
		uint8_t op = data[i++];
		int was_failed = f->r.failed;

		switch (op % 4) {
		case 0: {
			uint32_t kind, credits, len, slot;

			if (size - i < 4)
				goto out;
			kind = data[i];
			credits = data[i + 1];
			len = data[i + 2] | (uint32_t)data[i + 3] << 8;
			i += 4;
			if (len > CHUNK)
				len %= CHUNK + 1;
			if (len > size - i)
				len = (uint32_t)(size - i);
			if (!f->rq_n)
				break;
			slot = f->rq[f->rq_head];
			f->rq_head = (f->rq_head + 1) % RX;
			f->rq_n--;
			memcpy(f->rx + slot * CHUNK, data + i, len);
			i += len;
			if (rdma_ring_rx_arrived(&f->r, slot, len, rdma_imm(credits, kind & 3), f->rx + slot * CHUNK) == 1)
				f->rq[(f->rq_head + f->rq_n++) % RX] = slot;
			break;
		}
		case 1:
			consume(f);
			break;
		case 2:
			if (f->r.bulk.land_inflight && rdma_bulk_read_done(&f->r.bulk) < 0)
				abort();
			break;
		case 3:
			post(f);
			break;
		}
		if (was_failed && !f->r.failed)
			abort();
		check(f);
	}
out:
	if (f->r.rx_fifo)
		rdma_ring_fini(&f->r);
	free(f->src);
	free(f->land);
	free(f);
	return 0;
}
