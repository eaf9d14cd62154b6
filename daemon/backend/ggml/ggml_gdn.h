/*
 * daemon/backend/ggml/ggml_gdn.h — ggml's GATED_DELTA_NET on pprpc's own
 * kernels (ggml_gdn.c, doc/ggml.md), an op of the device's table
 * (ggml_ops.h): the setting, and why a node ran with ggml's kernel instead.
 */
#ifndef PPRPC_DAEMON_GGML_GDN_H
#define PPRPC_DAEMON_GGML_GDN_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"

struct gge_dev;

enum gge_gdn_mode {
	GGE_GDN_OFF = 0,   /* ggml's kernel for every node */
	GGE_GDN_AUTO = 1,  /* pprpc's where it would take its chunked form (prefill) */
	GGE_GDN_ON = 2,    /* pprpc's wherever the node fits (decode too) */
};
enum gge_gdn_why {
	GGE_GDN_WHY_OFF,    /* the setting is off, or the device has no such kernel */
	GGE_GDN_WHY_AUTO,   /* auto, and pprpc would run its serial form */
	GGE_GDN_WHY_SHAPE,  /* a node pprpc's kernel does not compute as ggml's does */
	GGE_GDN_WHY_GATE,   /* this run's gates are outside the shared domain */
	GGE_GDN_WHY_NOMEM,  /* no workspace or stream for pprpc's kernel */
	GGE_GDN_WHY_COUNT
};
enum gge_gdn_kind { GGE_GDN_NONE = 0, GGE_GDN_CPU, GGE_GDN_CUDA };

/* How GATED_DELTA_NET nodes of g's graphs built from now on run (enum
 * gge_gdn_mode), where they are counted (NULL: as before, at first in the
 * op's own counters) and the device memory pprpc's workspace must leave
 * free.  The first call puts the op in g's table (without it, or without
 * memory for it, ggml's kernel runs every node). */
void gge_dev_gdn_config(struct gge_dev *g, int mode, struct kern_gdn_stats *native, uint64_t *ggml_why,
			uint64_t floor);
/* The setting in words for STATS: "off", "auto", "on", or "off (why)". */
void gge_dev_gdn_status(const struct gge_dev *g, char *buf, size_t len);
/* Which of pprpc's kernels the device has (enum gge_gdn_kind; NONE before
 * gge_dev_gdn_config). */
int gge_dev_gdn_kind(const struct gge_dev *g);
/* The counters: nodes ggml's kernel ran for why, forms pprpc's ran. */
uint64_t gge_dev_gdn_ggml_count(const struct gge_dev *g, int why);
const struct kern_gdn_stats *gge_dev_gdn_native(const struct gge_dev *g);

#endif
