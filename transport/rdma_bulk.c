/* transport/rdma_bulk.c — descriptors, READs, acknowledgements (see rdma_bulk.h). */
#include "transport/rdma_bulk.h"

#include <string.h>

#include "pprpc/types.h"

/* Wire format, big-endian:
 *   descriptor: u64 addr, u32 rkey, u32 len, u32 tag, u32 zero   (24 bytes)
 *   ack:        u32 tag, u32 status (0: read; 1: discarded unread) (8 bytes) */
static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int rdma_bulk_init(struct rdma_bulk *b, uint32_t chunk, uint32_t depth, uint8_t *src, uint8_t *land,
		   uint32_t rkey, uint32_t max_reads)
{
	memset(b, 0, sizeof(*b));
	if (chunk < RDMA_BULK_CHUNK_MIN || chunk > RDMA_BULK_CHUNK_MAX || depth < 1 || depth > RDMA_BULK_DEPTH_MAX ||
	    !src || !land || max_reads < 1)
		return PPRPC_EINVAL;
	b->chunk = chunk;
	b->depth = depth;
	b->src = src;
	b->land = land;
	b->rkey = rkey;
	b->max_reads = max_reads < depth ? max_reads : depth;
	return 0;
}

int rdma_bulk_src_free(const struct rdma_bulk *b)
{
	for (uint32_t i = 0; i < b->depth; i++)
		if (!(b->src_busy & (1u << i)))
			return (int)i;
	return -1;
}

static void desc_put(struct rdma_bulk *b, uint32_t tag, uint64_t addr, uint32_t rkey, uint32_t len, uint8_t *out)
{
	b->src_busy |= 1u << tag;
	b->src_len[tag] = len;
	put32(out, (uint32_t)(addr >> 32));
	put32(out + 4, (uint32_t)addr);
	put32(out + 8, rkey);
	put32(out + 12, len);
	put32(out + 16, tag);
	put32(out + 20, 0);
	b->st.descs_out++;
}

void rdma_bulk_desc_make(struct rdma_bulk *b, uint32_t slot, uint32_t len, uint8_t *out)
{
	desc_put(b, slot, (uint64_t)(uintptr_t)rdma_bulk_src_ptr(b, slot), b->rkey, len, out);
}

int rdma_bulk_zc_tag(const struct rdma_bulk *b)
{
	for (uint32_t i = b->depth; i < RDMA_BULK_DEPTH_MAX; i++)
		if (!(b->src_busy & (1u << i)))
			return (int)i;
	return -1;
}

void rdma_bulk_desc_make_zc(struct rdma_bulk *b, uint32_t tag, const void *addr, uint32_t rkey, uint32_t len,
			    void *req, uint8_t *out)
{
	b->zc_req[tag] = req;
	b->st.zc_descs_out++;
	desc_put(b, tag, (uint64_t)(uintptr_t)addr, rkey, len, out);
}

int rdma_bulk_ack_in(struct rdma_bulk *b, const uint8_t *p, uint32_t len, uint32_t *ret_tag)
{
	uint32_t tag, status;

	if (len != RDMA_BULK_ACK_SIZE)
		return PPRPC_EPROTO;
	tag = get32(p);
	status = get32(p + 4);
	if (tag >= RDMA_BULK_DEPTH_MAX || !(b->src_busy & (1u << tag)) || status > 1)
		return PPRPC_EPROTO;
	b->src_busy &= ~(1u << tag);
	if (status == 0)
		b->st.bytes_out += b->src_len[tag];
	b->st.acks_in++;
	*ret_tag = tag;
	return 0;
}

/* Acks owed never exceed the peer's outstanding descriptors, which
 * desc_in caps at RDMA_BULK_DEPTH_MAX together with the queued ones. */
static void owe_ack(struct rdma_bulk *b, uint32_t tag, uint32_t status)
{
	b->ack_tag[b->ack_n++] = tag | status << 31;
}

void rdma_bulk_ack_take(struct rdma_bulk *b, uint8_t *out)
{
	uint32_t v;

	if (!b->ack_n)
		return;
	v = b->ack_tag[--b->ack_n];
	put32(out, v & 0x7fffffffu);
	put32(out + 4, v >> 31);
	b->st.acks_out++;
}

int rdma_bulk_desc_in(struct rdma_bulk *b, const uint8_t *p, uint32_t len, int discard)
{
	struct rdma_bulk_desc d;

	if (len != RDMA_BULK_DESC_SIZE)
		return PPRPC_EPROTO;
	d.addr = (uint64_t)get32(p) << 32 | get32(p + 4);
	d.rkey = get32(p + 8);
	d.len = get32(p + 12);
	d.tag = get32(p + 16);
	d.done = 0;
	if (d.len == 0 || d.len > RDMA_BULK_CHUNK_MAX || d.tag >= RDMA_BULK_DEPTH_MAX ||
	    (b->pq_tail - b->pq_head) + b->ack_n >= RDMA_BULK_DEPTH_MAX)
		return PPRPC_EPROTO;
	b->st.descs_in++;
	if (discard) {
		owe_ack(b, d.tag, 1);
		return 0;
	}
	b->pq[b->pq_tail % RDMA_BULK_DEPTH_MAX] = d;
	b->pq_tail++;
	return 0;
}

int rdma_bulk_read_next(struct rdma_bulk *b, struct rdma_read *out)
{
	struct rdma_bulk_desc *d;
	uint32_t slot, n;

	if (b->land_ready + b->land_inflight >= b->depth || b->land_inflight >= b->max_reads ||
	    b->rd_seq >= b->pq_tail)
		return 0;
	d = &b->pq[b->rd_seq % RDMA_BULK_DEPTH_MAX];
	n = d->len - d->done < b->chunk ? d->len - d->done : b->chunk;
	slot = (b->land_head + b->land_ready + b->land_inflight) % b->depth;
	out->raddr = d->addr + d->done;
	out->rkey = d->rkey;
	out->len = n;
	out->slot = slot;
	out->local = b->land + (size_t)slot * b->chunk;
	b->land_len[slot] = n;
	b->land_seq[slot] = b->rd_seq;
	d->done += n;
	b->land_last[slot] = d->done == d->len;
	if (b->land_last[slot])
		b->rd_seq++;
	b->land_inflight++;
	return 1;
}

int rdma_bulk_read_done(struct rdma_bulk *b)
{
	if (!b->land_inflight)
		return PPRPC_EINTERNAL;
	b->land_inflight--;
	b->land_ready++;
	b->st.reads++;
	return 0;
}

int rdma_bulk_landed_peek(const struct rdma_bulk *b, const uint8_t **ret_p, uint32_t *ret_len)
{
	if (!b->land_ready)
		return 0;
	*ret_p = b->land + (size_t)b->land_head * b->chunk;
	*ret_len = b->land_len[b->land_head];
	return 1;
}

void rdma_bulk_landed_consumed(struct rdma_bulk *b)
{
	uint32_t slot = b->land_head;

	if (!b->land_ready)
		return;
	b->st.bytes_in += b->land_len[slot];
	if (b->land_last[slot]) {
		/* Pieces are delivered in order, so this is the oldest descriptor. */
		owe_ack(b, b->pq[b->pq_head % RDMA_BULK_DEPTH_MAX].tag, 0);
		b->pq_head++;
	}
	b->land_head = (b->land_head + 1) % b->depth;
	b->land_ready--;
}

void rdma_bulk_reset(struct rdma_bulk *b)
{
	b->pq_head = b->pq_tail = b->rd_seq = 0;
	b->land_head = b->land_ready = b->land_inflight = 0;
	b->ack_n = 0;
	b->src_busy = 0;
	memset(b->zc_req, 0, sizeof(b->zc_req));
}
