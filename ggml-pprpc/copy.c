/*
 * ggml-pprpc/copy.c — tensor copies between PPRPC buffers.
 *
 * Same device: TENSOR_COPY on its queue.  Another device (another rank, or
 * another device of the same rank): SEND on the source's queue and RECV on
 * the destination's, matched by a transfer id; the daemons move the bytes
 * between themselves (IPC on one host, RDMA or TCP between hosts), never
 * through this process.  Both halves are queued, so ordering comes from the
 * queues: the SEND captures the source when the source queue gets there
 * (after the work that produced it; later writes cannot touch what was
 * captured), and everything queued after the RECV on the destination sees
 * the bytes.  Nothing waits here.
 */
#include "pg.h"

int pg_copy_between(struct pg_buffer *sb, uint64_t soff, struct pg_buffer *db, uint64_t doff, size_t n)
{
	struct pg_device *sd = sb->dev, *dd = db->dev;
	struct pg_rank *sr = sd->rank, *dr = dd->rank;
	uint64_t id;
	int rc;

	if (soff > sb->size || n > sb->size - soff || doff > db->size || n > db->size - doff)
		pg_fatal(sr, sd->name, "TENSOR_COPY", "copy of %zu bytes from %s+%llu to %s+%llu outside a buffer", n,
			 sd->name, (unsigned long long)soff, dd->name, (unsigned long long)doff);
	if (n == 0)
		return 0;
	if (sd == dd) {
		pg_lock(sr);
		pg_check_alive(sr, sd->name, "TENSOR_COPY");
		rc = pprpc_tensor_copy_async(sr->c, sb->handle, soff, db->handle, doff, n);
		sd->submitted++;
		if (rc < 0)
			pg_fatal_rc(sr, sd->name, "TENSOR_COPY", pg_rank_failed(sr, rc));
		sd->st.local_copies++;
		pg_unlock(sr);
		return 0;
	}
	/* The two halves are issued under each rank's lock in turn, never both
	 * at once (no lock order to get wrong); the daemons pair them by id. */
	pg_lock(sr);
	pg_check_alive(sr, sd->name, "SEND");
	id = pg_rank_xfer_id(sr);
	rc = pprpc_send_async(sr->c, sb->handle, soff, n, id, dr->addr);
	sd->submitted++;
	if (rc < 0)
		pg_fatal_rc(sr, sd->name, "SEND", pg_rank_failed(sr, rc));
	sd->st.p2p_copies++;
	sd->st.p2p_bytes += n;
	pg_unlock(sr);
	pg_lock(dr);
	pg_check_alive(dr, dd->name, "RECV");
	rc = pprpc_recv_async(dr->c, db->handle, doff, n, id, sr->addr);
	dd->submitted++;
	if (rc < 0)
		pg_fatal_rc(dr, dd->name, "RECV", pg_rank_failed(dr, rc));
	pg_unlock(dr);
	return 0;
}
