/* daemon/xfer/stats.c — per-boundary statistics (loop thread; see xfer.h). */
#include "daemon/xfer/xfer_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct bstat *bstat_get(struct pprpcd *d, const char *peer, const char *dir)
{
	struct bstat *b;

	for (b = d->bstats; b; b = b->next)
		if (!strcmp(b->peer, peer) && !strcmp(b->dir, dir))
			return b;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	snprintf(b->peer, sizeof(b->peer), "%s", peer);
	snprintf(b->dir, sizeof(b->dir), "%s", dir);
	b->next = d->bstats;
	d->bstats = b;
	return b;
}

void xstats_add(struct pprpcd *d, const char *peer, const char *dir, const char *link, uint64_t bytes,
		uint64_t t0_us, uint64_t copy_us, int failed)
{
	struct bstat *b = bstat_get(d, peer, dir);

	if (!b)
		return;
	snprintf(b->path, sizeof(b->path), "p2p-%s", link);
	if (failed) {
		b->errors++;
		return;
	}
	b->transfers++;
	b->bytes += bytes;
	b->time_us += xfer_now_us() - t0_us;
	b->copy_us += copy_us;
	if (!strcmp(link, "ipc"))
		b->ipc_bytes += bytes;
}

void xstats_fini(struct pprpcd *d)
{
	while (d->bstats) {
		struct bstat *b = d->bstats;

		d->bstats = b->next;
		free(b);
	}
}
