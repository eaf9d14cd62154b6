/*
 * daemon/xfer/transfer.h — the transfers a daemon knows, by transfer id.
 *
 * A transfer object (the source's struct xsend, the destination's struct
 * xrecv, source.c / dest.c) embeds a struct xfer_node and lives in one
 * table while it is alive: the sources by id (an id names at most one), the
 * destinations by id (several RECVs may share one, from different ranks).
 * Lookups are a hash; walks (the pump, expiry, a closed connection) go
 * through the list in creation order, newest first.  Loop thread only.
 */
#ifndef PPRPC_DAEMON_XFER_TRANSFER_H
#define PPRPC_DAEMON_XFER_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#define XFER_BUCKETS 256

struct xfer_node {
	uint64_t id;
	struct xfer_node *hnext;        /* bucket chain */
	struct xfer_node *prev, *next;  /* the table's list */
};

struct xfer_table {
	struct xfer_node *bucket[XFER_BUCKETS];
	struct xfer_node *head;
	size_t count;
};

void xfer_table_add(struct xfer_table *t, struct xfer_node *n, uint64_t id);
void xfer_table_del(struct xfer_table *t, struct xfer_node *n);
/* The newest node with id, or NULL; xfer_table_find_next: the next older. */
struct xfer_node *xfer_table_find(const struct xfer_table *t, uint64_t id);
struct xfer_node *xfer_table_find_next(const struct xfer_node *n);

#define xfer_container(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#endif
