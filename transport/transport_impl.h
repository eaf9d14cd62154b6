/*
 * transport/transport_impl.h — the transport vtable (for implementations).
 *
 * Every operation is mandatory except those marked optional, which point to
 * transport_unsupported() when absent so callers never test for NULL.
 */
#ifndef PPRPC_TRANSPORT_IMPL_H
#define PPRPC_TRANSPORT_IMPL_H

#include "transport/transport.h"

struct transport_ops {
	const char *name;
	int (*start)(struct transport_conn *c);
	int (*send)(struct transport_conn *c, const struct iovec *iov, int iovcnt,
		    transport_send_cb done, void *arg);
	int (*pause)(struct transport_conn *c);   /* optional */
	int (*resume)(struct transport_conn *c);  /* optional */
	void (*close)(struct transport_conn *c);
	void (*info)(const struct transport_conn *c, struct transport_info *out); /* optional */
	/* optional (default: close): close at once, dropping what is queued
	 * and unwritten; its send callbacks run with an error. */
	void (*abort)(struct transport_conn *c);
};

/* The part every implementation embeds first. */
struct transport_conn {
	const struct transport_ops *ops;
	const struct transport_owner *owner;
	void *owner_ctx;
	struct frame_reader reader;
	struct transport_stats stats;
	char peer[64];
	char fallback[200];   /* transport_set_fallback */
	int closing;
};

int transport_unsupported(struct transport_conn *c);
/* Default info: the kind is the vtable's name, nothing else known. */
void transport_info_basic(const struct transport_conn *c, struct transport_info *out);

/* For implementations: feed received bytes / direct bulk to the reader,
 * counting them. */
int transport_feed(struct transport_conn *c, const uint8_t *data, size_t len);
int transport_advance(struct transport_conn *c, size_t n);

#endif
