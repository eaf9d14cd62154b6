/*
 * daemon/server/options.c — every setting of pprpcd, in one table that drives the
 * command-line flags, the configuration file and --check-config.
 *
 * A setting has one name: `--memory-floor-mib N` on the command line is
 * `memory_floor_mib = N` in the file.  The file is read first (-c FILE, else
 * /etc/pprpc/pprpcd.conf if it exists), then the flags override it.  Unknown
 * keys and bad values are errors naming file:line.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/server/options.h"
#include "daemon/device/device.h"
#include "daemon/pprpcd.h"
#include "daemon/xfer/send_sm.h"
#include "pprpc/types.h"
#include "util/addr.h"
#include "transport/rdma_ring.h"

#define MIB (1024ull * 1024ull)

void pprpcd_opts_default(struct pprpcd_opts *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->listen, sizeof(o->listen), "127.0.0.1:50052");
	snprintf(o->devices, sizeof(o->devices), "cpu");
	o->threads = 0;
	o->memory_floor = 1536 * MIB;
	o->max_bulk = 4096 * MIB;
	o->max_meta = PPRPC_MAX_META;
	o->max_buffers = 65536;
	o->max_graphs = 4096;
	o->max_timelines = 65536;
	o->max_conn_buffers = 16384;
	o->max_conn_bytes = 0;
	o->max_conn_graphs = 1024;
	o->max_conn_inflight = 65536;
	o->max_conn_reply_bytes = 256 * MIB;
	o->max_graph_nodes = PPRPC_MAX_GRAPH_NODES;
	o->max_graph_gflop = -1;
	o->max_conns = 1024;
	o->hello_timeout_ms = 10000;
	o->staging_bytes = 256 * MIB;
	o->drain_ms = 10000;
	o->xfer_timeout_ms = 30000;
	o->peer_timeout_ms = 15000;
	o->peer_connect_timeout_ms = 10000;
	o->cuda_graphs = 1;
	o->ggml_graph_reuse = 1;
	o->send_in_place = 1;
	o->map_model_files = 1;
	o->map_read_ahead = 1;
	o->map_recall = 1;
	o->direct_min = XS_DIRECT_MIN;
	o->land = 1;
	o->land_wait_us = 3000;
	o->land_hold = 0;
	o->land_hold_lead_us = 0;
	o->land_gpu_send = 0;
	o->wake_ahead = 1;
	o->log_level = LOG_NOTICE_;
	o->transport = PPRPCD_TRANSPORT_AUTO;
	o->rdma_chunk = 512u << 10;
	o->rdma_tx_depth = 8;
	o->rdma_rx_depth = 32;
	/* The bulk path is off by default: measured in the Soft-RoCE guest
	 * (make test-rdma, SECTIONS=pathcmp) it was no faster than the
	 * message slots (doc/rdma-bulk.md). */
	o->rdma_bulk_threshold_set = 256u << 10;
	o->rdma_bulk_threshold = 0;
	o->weights_cache_bytes = 102400 * MIB;
}

/* ---- value parsers ------------------------------------------------------------ */

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out, char *err, size_t errlen)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!isdigit((unsigned char)*s)) {
		snprintf(err, errlen, "'%s' is not a number", s);
		return PPRPC_EINVAL;
	}
	v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		snprintf(err, errlen, "'%s' is not a number in %" PRIu64 "..%" PRIu64, s, lo, hi);
		return PPRPC_EINVAL;
	}
	*out = v;
	return 0;
}

static int set_str(char *dst, size_t len, const char *v, char *err, size_t errlen)
{
	if (!*v || strlen(v) >= len) {
		snprintf(err, errlen, "value is empty or longer than %zu characters", len - 1);
		return PPRPC_EINVAL;
	}
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

#define STR_SETTER(fn, field)                                                              \
	static int fn(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)      \
	{                                                                                  \
		return set_str(o->field, sizeof(o->field), v, err, errlen);                \
	}                                                                                  \
	static void fn##_show(const struct pprpcd_opts *o, char *buf, size_t len)          \
	{                                                                                  \
		snprintf(buf, len, "%s", o->field);                                        \
	}

STR_SETTER(set_listen, listen)
STR_SETTER(set_port_file, port_file)
STR_SETTER(set_devices, devices)
STR_SETTER(set_metrics_listen, metrics_listen)
STR_SETTER(set_auth_key_file, auth_key_file)
STR_SETTER(set_model_dir, model_dir)
STR_SETTER(set_weights_cache, weights_cache)
STR_SETTER(set_trace_file, trace_file)

/* A 0|1 switch stored in an int field. */
#define FLAG_SETTER(fn, field)                                                             \
	static int fn(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)      \
	{                                                                                  \
		uint64_t x;                                                                \
		int rc = parse_u64(v, 0, 1, &x, err, errlen);                              \
		if (rc == 0)                                                               \
			o->field = (int)x;                                                 \
		return rc;                                                                 \
	}                                                                                  \
	static void fn##_show(const struct pprpcd_opts *o, char *buf, size_t len)          \
	{                                                                                  \
		snprintf(buf, len, "%d", o->field);                                        \
	}

FLAG_SETTER(set_insecure_listen, insecure_listen)
FLAG_SETTER(set_cuda_graphs, cuda_graphs)
FLAG_SETTER(set_ggml_graph_reuse, ggml_graph_reuse)
FLAG_SETTER(set_send_in_place, send_in_place)
FLAG_SETTER(set_cpu_ipc, cpu_ipc)
FLAG_SETTER(set_land, land)
FLAG_SETTER(set_land_hold, land_hold)
FLAG_SETTER(set_land_gpu_send, land_gpu_send)
FLAG_SETTER(set_wake_ahead, wake_ahead)
FLAG_SETTER(set_map_model_files, map_model_files)
FLAG_SETTER(set_map_read_ahead, map_read_ahead)
FLAG_SETTER(set_map_recall, map_recall)

#define U32_SETTER(fn, field, lo, hi)                                                      \
	static int fn(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)      \
	{                                                                                  \
		uint64_t x;                                                                \
		int rc = parse_u64(v, lo, hi, &x, err, errlen);                            \
		if (rc == 0)                                                               \
			o->field = (uint32_t)x;                                            \
		return rc;                                                                 \
	}                                                                                  \
	static void fn##_show(const struct pprpcd_opts *o, char *buf, size_t len)          \
	{                                                                                  \
		snprintf(buf, len, "%u", o->field);                                        \
	}

/* The global tables hold at most 2^24 - 1 handles (handles.h index bits). */
U32_SETTER(set_max_buffers, max_buffers, 1, HTAB_MAX_SLOTS)
U32_SETTER(set_max_graphs, max_graphs, 1, HTAB_MAX_SLOTS)
U32_SETTER(set_max_timelines, max_timelines, 1, HTAB_MAX_SLOTS)
U32_SETTER(set_max_conn_buffers, max_conn_buffers, 1, 1u << 24)
U32_SETTER(set_max_conn_graphs, max_conn_graphs, 1, 1u << 24)
U32_SETTER(set_max_conn_inflight, max_conn_inflight, 2, 1u << 24)
U32_SETTER(set_max_graph_nodes, max_graph_nodes, 1, PPRPC_MAX_GRAPH_NODES)
U32_SETTER(set_max_conns, max_conns, 1, 1u << 20)

static int set_max_meta(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	uint64_t x;
	int rc = parse_u64(v, 1, PPRPC_MAX_META / 1024, &x, err, errlen);

	if (rc == 0)
		o->max_meta = (uint32_t)(x * 1024);
	return rc;
}

static void set_max_meta_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%u", o->max_meta / 1024);
}

static int set_threads(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	uint64_t x;
	int rc = parse_u64(v, 0, 1024, &x, err, errlen);

	if (rc == 0)
		o->threads = (int)x;
	return rc;
}

static void set_threads_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%d%s", o->threads, o->threads ? "" : " (all cores)");
}

#define MIB_SETTER(fn, field, lo, hi)                                                      \
	static int fn(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)      \
	{                                                                                  \
		uint64_t x;                                                                \
		int rc = parse_u64(v, lo, hi, &x, err, errlen);                            \
		if (rc == 0)                                                               \
			o->field = x * MIB;                                                \
		return rc;                                                                 \
	}                                                                                  \
	static void fn##_show(const struct pprpcd_opts *o, char *buf, size_t len)          \
	{                                                                                  \
		snprintf(buf, len, "%llu", (unsigned long long)(o->field / MIB));          \
	}

MIB_SETTER(set_floor, memory_floor, 0, UINT64_MAX / MIB)
MIB_SETTER(set_max_bulk, max_bulk, 1, 1ull << 20)
MIB_SETTER(set_staging, staging_bytes, 1, 1ull << 20)
MIB_SETTER(set_ipc_pool, ipc_pool_bytes, 0, 1ull << 20)
MIB_SETTER(set_max_conn_mib, max_conn_bytes, 0, 1ull << 30)
MIB_SETTER(set_max_conn_reply_mib, max_conn_reply_bytes, 1, 1ull << 20)
MIB_SETTER(set_weights_cache_mib, weights_cache_bytes, 1, 1ull << 32)

static int set_drain(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	uint64_t x;
	int rc = parse_u64(v, 0, 3600000, &x, err, errlen);

	if (rc == 0)
		o->drain_ms = (uint32_t)x;
	return rc;
}

static void set_drain_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%u", o->drain_ms);
}

static int set_xfer_timeout(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	return parse_u64(v, 0, 86400000, &o->xfer_timeout_ms, err, errlen);
}

static void set_xfer_timeout_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%llu", (unsigned long long)o->xfer_timeout_ms);
}

static int set_land_wait(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	return parse_u64(v, 0, 1000000, &o->land_wait_us, err, errlen);
}

static void set_land_wait_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%llu", (unsigned long long)o->land_wait_us);
}

static int set_land_hold_lead(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	return parse_u64(v, 0, 100000, &o->land_hold_lead_us, err, errlen);
}

static void set_land_hold_lead_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%llu", (unsigned long long)o->land_hold_lead_us);
}

static int set_peer_timeout(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	return parse_u64(v, 0, 86400000, &o->peer_timeout_ms, err, errlen);
}

static void set_peer_timeout_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%llu", (unsigned long long)o->peer_timeout_ms);
}

static int set_peer_connect_timeout(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	return parse_u64(v, 0, 86400000, &o->peer_connect_timeout_ms, err, errlen);
}

static void set_peer_connect_timeout_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%llu", (unsigned long long)o->peer_connect_timeout_ms);
}

/* auto (the device's own bound), off, or a number of Gflop. */
static int set_max_graph_gflop(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	uint64_t x;
	int rc;

	if (!strcmp(v, "auto")) {
		o->max_graph_gflop = -1;
		return 0;
	}
	if (!strcmp(v, "off")) {
		o->max_graph_gflop = 0;
		return 0;
	}
	rc = parse_u64(v, 1, 1ull << 40, &x, err, errlen);
	if (rc < 0)
		snprintf(err, errlen, "'%s' is not auto, off or a number of Gflop in 1..%llu", v, 1ull << 40);
	else
		o->max_graph_gflop = (int64_t)x;
	return rc;
}

static void set_max_graph_gflop_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	if (o->max_graph_gflop < 0)
		snprintf(buf, len, "auto");
	else if (o->max_graph_gflop == 0)
		snprintf(buf, len, "off");
	else
		snprintf(buf, len, "%lld", (long long)o->max_graph_gflop);
}

static int set_hello_timeout(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	return parse_u64(v, 0, 86400000, &o->hello_timeout_ms, err, errlen);
}

static void set_hello_timeout_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%llu", (unsigned long long)o->hello_timeout_ms);
}

static int set_log(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	int l = log_level_parse(v);

	if (l < 0) {
		snprintf(err, errlen, "unknown level '%s' (err, warning, notice, info, debug)", v);
		return PPRPC_EINVAL;
	}
	o->log_level = l;
	return 0;
}

static void set_log_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	static const char *const names[8] = { "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug" };

	snprintf(buf, len, "%s", names[o->log_level & 7]);
}

static int set_affinity(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	struct cpu_affinity a;
	int rc = affinity_parse(v, &a, err, errlen);

	if (rc == 0)
		o->affinity = a;
	return rc;
}

static void set_affinity_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	affinity_format(&o->affinity, buf, len);
}

static const char *const transport_names[] = { "auto", "tcp", "rdma" };

static int set_transport(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(v, transport_names[i])) {
			o->transport = i;
			return 0;
		}
	snprintf(err, errlen, "unknown transport '%s' (auto, tcp, rdma)", v);
	return PPRPC_EINVAL;
}

static void set_transport_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%s", transport_names[o->transport]);
}

/* Bytes, with an optional k/K or m/M suffix (binary), at most max. */
static int parse_size(const char *v, uint64_t max, uint64_t *out, char *err, size_t errlen)
{
	char num[32];
	size_t n = strlen(v);
	uint64_t x, mul = 1;
	int rc;

	if (n == 0 || n >= sizeof(num)) {
		snprintf(err, errlen, "'%s' is not a size", v);
		return PPRPC_EINVAL;
	}
	memcpy(num, v, n + 1);
	if (num[n - 1] == 'k' || num[n - 1] == 'K')
		mul = 1024;
	else if (num[n - 1] == 'm' || num[n - 1] == 'M')
		mul = 1024 * 1024;
	if (mul > 1)
		num[n - 1] = '\0';
	rc = parse_u64(num, 1, max, &x, err, errlen);
	if (rc == 0)
		*out = x * mul;
	return rc;
}

static int set_rdma_chunk(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	uint64_t x;
	int rc = parse_size(v, RDMA_CHUNK_MAX, &x, err, errlen);

	if (rc == 0 && (x < RDMA_CHUNK_MIN || x > RDMA_CHUNK_MAX || x % 4096)) {
		snprintf(err, errlen, "'%s' is not a multiple of 4 KiB in %u KiB..%u MiB", v, RDMA_CHUNK_MIN >> 10,
			 RDMA_CHUNK_MAX >> 20);
		rc = PPRPC_EINVAL;
	}
	if (rc == 0)
		o->rdma_chunk = (uint32_t)x;
	return rc;
}

static int set_direct_min(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	uint64_t x = 0;
	int rc = strcmp(v, "0") == 0 ? 0 : parse_size(v, 1ull << 30, &x, err, errlen);

	if (rc < 0)
		snprintf(err, errlen, "'%s' is not 0 or a size up to 1024M (bytes, k/m suffix allowed)", v);
	else
		o->direct_min = x;
	return rc;
}

static void set_direct_min_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRIu64 "K", o->direct_min >> 10);
}

static void set_rdma_chunk_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%uK", o->rdma_chunk >> 10);
}

static int set_rdma_tx(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	uint64_t x;
	int rc = parse_u64(v, 1, RDMA_TX_DEPTH_MAX, &x, err, errlen);

	if (rc == 0)
		o->rdma_tx_depth = (uint32_t)x;
	return rc;
}

static void set_rdma_tx_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%u", o->rdma_tx_depth);
}

static int set_rdma_rx(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	uint64_t x;
	int rc = parse_u64(v, 24, RDMA_RX_DEPTH_MAX, &x, err, errlen);

	if (rc == 0)
		o->rdma_rx_depth = (uint32_t)x;
	return rc;
}

static void set_rdma_rx_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%u", o->rdma_rx_depth);
}

static int set_rdma_bulk(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	if (!strcmp(v, "read")) {
		o->rdma_bulk_threshold = o->rdma_bulk_threshold_set;
		return 0;
	}
	if (!strcmp(v, "off")) {
		o->rdma_bulk_threshold = 0;
		return 0;
	}
	snprintf(err, errlen, "unknown bulk path '%s' (read, off)", v);
	return PPRPC_EINVAL;
}

static void set_rdma_bulk_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%s", o->rdma_bulk_threshold ? "read" : "off");
}

static int set_rdma_bulk_threshold(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	uint64_t x;
	int rc = parse_size(v, RDMA_BULK_THRESHOLD_MAX, &x, err, errlen);

	if (rc == 0 && (x < RDMA_BULK_THRESHOLD_MIN || x > RDMA_BULK_THRESHOLD_MAX)) {
		snprintf(err, errlen, "'%s' is not in %u KiB..%u MiB", v, RDMA_BULK_THRESHOLD_MIN >> 10,
			 RDMA_BULK_THRESHOLD_MAX >> 20);
		rc = PPRPC_EINVAL;
	}
	if (rc == 0) {
		o->rdma_bulk_threshold_set = (uint32_t)x;
		if (o->rdma_bulk_threshold)
			o->rdma_bulk_threshold = (uint32_t)x;
	}
	return rc;
}

static void set_rdma_bulk_threshold_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%uK", o->rdma_bulk_threshold_set >> 10);
}

static const char *const gdn_native_names[] = { "off", "auto", "on" };

static int set_ggml_native_gdn(struct pprpcd_opts *o, const char *v, char *err, size_t errlen)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(v, gdn_native_names[i])) {
			o->ggml_native_gdn = i;
			return 0;
		}
	snprintf(err, errlen, "unknown mode '%s' (off, auto, on)", v);
	return PPRPC_EINVAL;
}

static void set_ggml_native_gdn_show(const struct pprpcd_opts *o, char *buf, size_t len)
{
	snprintf(buf, len, "%s", gdn_native_names[o->ggml_native_gdn]);
}

/* Each setting: its flag and key, its argument, the --help line, and the
 * longer text of the man page and the example file (`make docs` writes
 * them from here; `make unit` fails when they differ). */
#define OPT(n, a, fn) .name = (n), .arg = (a), .set = fn, .show = fn##_show

static const struct optdef defs[] = {
	{ OPT("listen", "HOST:PORT", set_listen),
	  .help = "address to serve (port 0 = ephemeral; IPv6 as [::1]:PORT)",
	  .doc = "Address to serve.  Loopback by default; anything else exposes the daemon to that network "
		 "(and needs auth-key-file, or insecure-listen 1).  Port 0 picks a free port (see port-file).  "
		 "IPv6 as [::1]:50052." },
	{ OPT("port-file", "FILE", set_port_file),
	  .help = "write the bound port to FILE once listening",
	  .doc = "Write the bound port to FILE once the daemon listens, after the devices are up (empty: "
		 "don't).",
	  .example = "/run/pprpc/rank0.port" },
	{ OPT("devices", "LIST", set_devices),
	  .help = "devices to serve, comma-separated: cpu, cuda:N, ggml:NAME (ggml's device, e.g. ggml:CPU, ggml:CUDA0)",
	  .doc = "Devices to serve, comma-separated: cpu, cuda:0, cuda:1 ..., and ggml:NAME for ggml's own "
		 "backend of ggml device NAME (ggml:CPU, ggml:CUDA0), which runs the ggml graphs "
		 "(GGML_GRAPH_CREATE) of llama.cpp's pprpc backend (doc/ggml.md).  A GPU or ggml device that "
		 "cannot run here is reported (pprpcctl status says why) and skipped." },
	{ OPT("threads", "N", set_threads),
	  .help = "threads of the CPU device and of each ggml device's backend (0 = all cores)",
	  .doc = "Threads of the CPU device (its kernels and OpenBLAS) and of each ggml device's backend; "
		 "0 = all cores." },
	{ OPT("memory-floor-mib", "N", set_floor),
	  .help = "refuse allocations leaving less than N MiB free",
	  .doc = "Refuse an allocation that would leave less than N MiB free (PPRPC_EFLOOR).  On a GPU free "
		 "is cudaMemGetInfo's.  On host devices (cpu, ggml:CPU) the floor counts what the daemon "
		 "committed, touched or not, not only what MemAvailable shows: free is the smaller of "
		 "MemAvailable less the reservations and the baseline (MemAvailable when the daemon held "
		 "nothing) less every host buffer and arena it holds and the reservations.  Host memory a "
		 "request makes the daemon take outside buffers is reserved too: a queued TENSOR_SET's bulk, "
		 "a queued TENSOR_GET's copy, a RECV's landing stage, the CPU kernels' workspaces (a graph "
		 "run reserves them first; daemon/core/hostmem.h)." },
	{ OPT("max-bulk-mib", "N", set_max_bulk),
	  .help = "largest tensor payload in one message",
	  .doc = "Largest tensor payload accepted in one message, MiB.  A larger frame is a protocol error "
		 "(PPRPC_ETOOBIG naming the setting; the connection is closed)." },
	{ OPT("max-meta-kib", "N", set_max_meta),
	  .help = "largest control message (meta) in one frame, KiB (max 1024)",
	  .doc = "Largest control message (protobuf meta) in one frame, KiB (at most 1024).  A larger frame "
		 "is a protocol error (PPRPC_ETOOBIG naming the setting; the connection is closed)." },
	{ OPT("max-buffers", "N", set_max_buffers),
	  .help = "buffers in the whole daemon",
	  .doc = "Buffers in the whole daemon.  Every limit is a setting: exceeding one answers PPRPC_ELIMIT "
		 "with a message naming it (\"connection buffer limit (16384) reached\"), and the connection "
		 "(and everyone else) keeps being served." },
	{ OPT("max-graphs", "N", set_max_graphs),
	  .help = "graphs in the whole daemon",
	  .doc = "Graphs in the whole daemon (PPRPC_ELIMIT beyond)." },
	{ OPT("max-timelines", "N", set_max_timelines),
	  .help = "timelines in the whole daemon",
	  .doc = "Timelines in the whole daemon (PPRPC_ELIMIT beyond)." },
	{ OPT("max-conn-buffers", "N", set_max_conn_buffers),
	  .help = "buffers one connection may hold",
	  .doc = "Buffers one connection (a client or a peer link) may hold." },
	{ OPT("max-conn-mib", "N", set_max_conn_mib),
	  .help = "device memory one connection may hold, page-rounded (0 = only the floor)",
	  .doc = "Device memory one connection may hold, MiB, page-rounded (a 1-byte CPU buffer costs a "
		 "page): buffers and graph arenas together, a ggml graph's context and scratch included; "
		 "0 = no cap beyond the memory floor." },
	{ OPT("max-conn-graphs", "N", set_max_conn_graphs),
	  .help = "graphs one connection may hold",
	  .doc = "Graphs one connection may hold." },
	{ OPT("max-conn-inflight", "N", set_max_conn_inflight),
	  .help = "queued commands + unsent replies of one connection (reading pauses at half)",
	  .doc = "Queued commands, requests answered later (HOST_WAIT, SUBSCRIBE, PROBE, and PULL until its "
		 "transfer lets it go) and replies not yet written, of one connection.  Reading from the "
		 "connection pauses while it has more than half of this (at most 4096) and resumes at half "
		 "that; a connection that still reaches it (frames already read when the pause set in) is "
		 "answered PPRPC_ELIMIT and closed, so memory never grows without bound." },
	{ OPT("max-conn-reply-mib", "N", set_max_conn_reply_mib),
	  .help = "TENSOR_GET copies one connection may hold until written to it; a GET beyond waits in its queue (default 256)",
	  .doc = "TENSOR_GET copies one connection may hold until they are written to it, MiB: a queued GET "
		 "makes its copy only when the copies not yet read by the client leave room (any one copy "
		 "fits when none is held); until then it waits in its queue.  A client that never reads "
		 "holds at most this much." },
	{ OPT("max-graph-nodes", "N", set_max_graph_nodes),
	  .help = "nodes in one graph (max 65536)",
	  .doc = "Nodes in one graph (at most 65536), native and ggml graphs alike." },
	{ OPT("max-graph-gflop", "N|auto|off", set_max_graph_gflop),
	  .help = "work one graph run may demand, estimated at GRAPH_CREATE (auto: 32 per CPU thread natively, 1024 per thread on ggml:CPU, 1048576 on a GPU)",
	  .doc = "The work one graph run may demand, in Gflop, estimated at GRAPH_CREATE (MUL_MAT 2 K per "
		 "output, ATTENTION 4 n_kv, GATED_DELTA_NET 8 d_k, one per element touched otherwise); "
		 "beyond it GRAPH_CREATE answers PPRPC_ELIMIT naming the setting.  A tensor has at most 2^34 "
		 "elements, but zero strides let a graph of a few hundred bytes demand minutes of a device, "
		 "which it would hold from every other client.  auto: 32 per thread of the native cpu device "
		 "(seconds of a CPU), 1024 per thread on ggml:CPU (a ggml graph is a whole stage of a model), "
		 "1048576 (1 Pflop, about a second) on a GPU; off: no bound; or a number." },
	{ OPT("max-conns", "N", set_max_conns),
	  .help = "connections served at once, clients and peers (beyond: closed at once)",
	  .doc = "Connections served at once, clients and peer ranks together; one beyond it is closed as "
		 "soon as it is accepted." },
	{ OPT("hello-timeout-ms", "N", set_hello_timeout),
	  .help = "close a connection whose HELLO (authentication included) or metrics request is not complete within N ms (0 = never)",
	  .doc = "A connection must finish HELLO (authentication included) within N ms, or it is closed; a "
		 "metrics request must be read and answered within it too (0 = no deadline).  Before HELLO "
		 "a frame carries no bulk and at most 4 KiB of meta, with or without a key." },
	{ OPT("auth-key-file", "FILE", set_auth_key_file),
	  .help = "shared key (>= 32 bytes, mode 600): clients and peers must prove it (HMAC)",
	  .doc = "Shared-key authentication.  Every client and every peer rank must prove the key at HELLO "
		 "(an HMAC-SHA256 challenge; the key never travels) and the daemon proves it back.  All ranks "
		 "of a cluster and their clients use the same key: a file of at least 32 bytes (its bytes are "
		 "the key, one trailing newline ignored), mode 600 (group or world access is refused), e.g. "
		 "openssl rand -hex 32 > /etc/pprpc/key && chmod 600 /etc/pprpc/key.  Clients: "
		 "pprpc_connect_opts.auth_key_file or PPRPC_AUTH_KEY_FILE.  This authenticates; it does not "
		 "encrypt: beyond a trusted network, tunnel.",
	  .example = "/etc/pprpc/key" },
	{ OPT("insecure-listen", "0|1", set_insecure_listen),
	  .help = "allow a non-loopback --listen without auth-key-file",
	  .doc = "Without auth-key-file a non-loopback listen address is refused, unless this is 1 (then "
		 "anyone who reaches the port can use the daemon, and it warns).  A non-loopback "
		 "metrics-listen needs it too, key or not: HTTP requests prove no key." },
	{ OPT("staging-mib", "N", set_staging),
	  .help = "SEND staging ring; a SEND stalls only when it is full",
	  .doc = "Staging ring for stage-boundary SENDs, MiB: a SEND copies its tensor here and the queue "
		 "moves on; it stalls only while the ring is full, and then without holding its device "
		 "worker.  With a GPU it is page-locked for fast device-to-host copies." },
	{ OPT("cpu-affinity", "SPEC", set_affinity),
	  .help = "pin threads: loop=CPUS,device=CPUS (e.g. loop=0,device=1-3)",
	  .doc = "CPU placement: pin the event loop and the device workers (and their BLAS threads) to "
		 "separate cores so RPC progress and batch work do not compete.  none, or "
		 "loop=CPUS,device=CPUS (either part optional) with CPUS like 0, 1-3 or 0:2-3 (':' separates "
		 "a list inside a part)." },
	{ OPT("drain-ms", "N", set_drain),
	  .help = "on SIGTERM, let queued work finish for up to N ms",
	  .doc = "On SIGTERM: stop accepting, let queued work finish for up to N ms, then close every "
		 "connection.  A promise: the process is gone at most 500 ms after this, even with a kernel "
		 "still running (it is abandoned with the process: the OS takes the memory back, the GPU "
		 "driver the context; daemon/server/deadline.h)." },
	{ OPT("send-in-place", "0|1", set_send_in_place),
	  .help = "a SEND last in its stream streams from the tensor itself while the destination pulls (default 1)",
	  .doc = "A SEND of 256 KiB or more that is the last command of its stream, with the destination "
		 "already pulling, streams from the tensor itself instead of copying it into the staging "
		 "ring; a later command of the stream makes it copy the rest and move on.  0 = always copy." },
	{ OPT("direct-min", "BYTES", set_direct_min),
	  .help = "boundary SENDs of at least this size may go by IPC or in place; smaller ones are copied to host staging (default 256K)",
	  .doc = "A stage-boundary SEND smaller than this is always copied into the host staging ring and "
		 "sent over the peer link; one this size or larger may go by CUDA IPC (GPU to GPU on this "
		 "host) or stream from the tensor in place.  k/m suffix allowed; 0 = every size may.  "
		 "Decode boundaries are small (one token's hidden state: 16 KiB for a 4096-wide f32 row)." },
	{ OPT("ipc-pool-mib", "N", set_ipc_pool),
	  .help = "IPC staging per device for boundary SENDs (0 = 1024 on a GPU, staging-mib on the CPU)",
	  .doc = "GPU to GPU on this host (native cuda:N and ggml:CUDA devices alike), boundaries go by CUDA "
		 "IPC: the source copies the region into a GPU staging pool of this size, MiB (0 = 1024 per "
		 "GPU; the CPU's, with cpu-ipc: staging-mib), the destination copies from there and releases "
		 "the slots as it goes." },
	{ OPT("cpu-ipc", "0|1", set_cpu_ipc),
	  .help = "CPU-to-CPU boundaries with daemons of this host by process_vm_readv (needs ptrace access; default 0)",
	  .doc = "CPU daemons of this host exchange boundaries by process_vm_readv (one copy instead of a "
		 "socket).  Needs ptrace access between the daemons (same user and Yama ptrace_scope 0, or "
		 "CAP_SYS_PTRACE), hence off by default.  The destination reads only the pool of the process "
		 "at the other end of its link (the one owning the TCP listener at the rank's address, "
		 "checked in /proc), the same pool for the link's life; any other announcement fails the "
		 "RECV with PPRPC_EAUTH." },
	{ OPT("land", "0|1", set_land),
	  .help = "boundaries of 256 KiB or less between daemons of this host through a shared page (default 1)",
	  .doc = "A RECV of 256 KiB or less from a daemon of this host (same boot id) offers its source a slot "
		 "of a shared-memory page it makes under /dev/shm (4 MiB + 4 KiB, mode 0600, one per source "
		 "rank); the source copies the bytes there and rings the slot's bell, and the destination "
		 "copies them into the region: no byte crosses the peer link, no loop hands them on.  A "
		 "source that cannot open the page (another host, another user, another /dev/shm) sends "
		 "them by the link as before.  Both daemons need it on (0 = never offer, never use)." },
	{ OPT("land-wait-us", "N", set_land_wait),
	  .help = "a RECV waits in place up to N us for its landing slot (default 3000)",
	  .doc = "How long, from its first run, a RECV with a landing slot (land) waits for the bytes on its "
		 "device's worker: asleep on the page's wake word, which the source moves after writing and "
		 "the worker's own queue moves when other work comes (the worker serves it and comes back); "
		 "a GPU device's worker polls the slot instead from shortly before the bytes are expected "
		 "(how long the last RECVs from that source waited), so it sees them within a microsecond "
		 "without keeping a core busy meanwhile.  After that the source's answer on the link wakes "
		 "it.  0 = never wait in place." },
	{ OPT("land-hold", "0|1", set_land_hold),
	  .help = "a GPU's RECV with a landing slot waits on the GPU, the next graph launched behind it (default 0)",
	  .doc = "On a device whose streams can wait on host memory (ggml-cuda with 64-bit stream memory "
		 "operations), a RECV with a landing slot (land) is not waited for by the worker: the "
		 "connection's CUDA stream waits for the slot's bell and copies the slot into the region, "
		 "and the GRAPH_RUN behind it is prepared and launched at once, so the stage starts a few "
		 "microseconds after the source rang instead of after a wake-up, an upload and a launch.  The "
		 "TENSOR_SETs behind the RECV that write other memory still run before it ends.  When the "
		 "bytes will not come (the link to the source lost, bytes sent by the link, the connection "
		 "closed, the daemon stopping) the daemon rings the bell itself and the RECV fails or takes "
		 "the link's bytes.  Off by default: on an H100 with four ranks under MPS it made decode no "
		 "faster (llama-completion 2.42 ms a token either way) and llama-bench's 6 % slower "
		 "(doc/gpu-wait.md).  0 = the worker waits (land-wait-us)." },
	{ OPT("land-hold-lead-us", "N", set_land_hold_lead),
	  .help = "a held RECV goes to the GPU N us before its bytes are expected (default 0: at once)",
	  .doc = "With land-hold, when a RECV's stream starts waiting on the GPU: 0 = as soon as the worker "
		 "takes the RECV, which can be a millisecond or more before the bytes come when the "
		 "client sends a token's requests ahead of the pipeline; N = no sooner than N us before the "
		 "bytes are expected, from how long the last RECVs from that source waited (the source "
		 "stamps the time it rang the slot's bell).  Until then the worker waits in place, asleep, "
		 "and hands the RECV over at once if the bytes come first.  The stage's next graph is still "
		 "prepared and launched before its bytes come, if N covers its prepare and launch, and the "
		 "GPU holds a stream waiting on host memory for about N us instead of the whole wait.  "
		 "Default 0: on an H100 with four ranks under MPS a lead of 150 or 400 us was as slow as "
		 "holding at once (decode 0.940 and 0.923 of land-hold 0; doc/gpu-wait.md)." },
	{ OPT("land-gpu-send", "0|1", set_land_gpu_send),
	  .help = "a GPU's SEND into a landing slot is copied and rung by the GPU behind its graph (default 0)",
	  .doc = "On a device whose streams can write host memory (ggml-cuda with 64-bit stream memory "
		 "operations), a SEND of at most a landing slot's size queued behind a GRAPH_RUN still on "
		 "the GPU is not left for the worker to do after the run: once the destination's PULL "
		 "offered a slot (land), the connection's CUDA stream copies the tensor into the slot and "
		 "writes the slot's bell behind the graph, so the next stage's bytes are there when the "
		 "graph ends, with no thread of this daemon (its wait for the run, its copy) in between; "
		 "the run's submit then leaves the worker free instead of waiting for the run's end.  Any "
		 "other path (no slot offered, a larger SEND, a device that refuses) waits for the run as "
		 "before.  STATS and the metrics count the SENDs put by the GPU (gpu_sends, "
		 "pprpc_gpu_sends_total).  With land-hold on the destination, no CPU is on a decoded "
		 "token's path between two stages of one host.  Off by default: together with land-hold it "
		 "made four-rank decode on an H100 under MPS slower (0.806 of the default, 2.68 against 2.36 "
		 "ms a token; doc/gpu-wait.md); alone it is not measured yet.  0 = the worker puts the bytes "
		 "after the run." },
	{ OPT("wake-ahead", "0|1", set_wake_ahead),
	  .help = "be awake when a client's next requests are due, at a steady pace up to 20 ms (default 1)",
	  .doc = "A client that sends its requests in bursts at a steady pace (llama.cpp decoding: a token "
		 "every few ms) finds the daemon's event loop and its devices' workers asleep between them, "
		 "and a thread woken from sleep takes 20 to 160 us to run on some hosts (idle CPUs, halted "
		 "virtual CPUs; bench/wake-probe.c) - twice on the token's path.  With wake-ahead the loop "
		 "foretells the next burst from the last ones (a pace of 20 ms or less; a token's requests "
		 "and its FENCE may be two bursts) and, from 100 us plus twice its recent miss (at most 500 "
		 "us) before the burst is due, polls without sleeping; once the burst's frames come the "
		 "workers look for their commands without sleeping too, until 100 us after the last one.  "
		 "The spinning threads yield the CPU to any thread that wants it.  Nothing while no client "
		 "keeps a pace; metrics pprpc_wake_ahead_windows_total and pprpc_wake_ahead_hits_total.  0 "
		 "= always sleep." },
	{ OPT("transfer-timeout-ms", "N", set_xfer_timeout),
	  .help = "a SEND or RECV whose partner does not come fails after N ms (0 = never)",
	  .doc = "A SEND nobody pulls, or a RECV whose SEND never comes, fails after N ms with a reason "
		 "instead of holding memory or waiting for ever (0 = never)." },
	{ OPT("peer-timeout-ms", "N", set_peer_timeout),
	  .help = "drop a peer link silent for N ms while we wait on it (0 = never)",
	  .doc = "A link to another rank that we are waiting on is pinged when quiet (at a third of this) "
		 "and dropped after N ms without an answer (a stopped or wedged rank); everything waiting on "
		 "it then fails with a clear error.  A destination that shows no life this long while a "
		 "transfer waits on it (bytes unwritten, IPC slots unreleased) loses the transfer and its "
		 "connection, and the SEND fails naming it.  Ranks should share this setting (0 = never)." },
	{ OPT("peer-connect-timeout-ms", "N", set_peer_connect_timeout),
	  .help = "a peer link not up (connected, HELLO answered) within N ms fails (0 = never)",
	  .doc = "A link to another rank must be up (its host name resolved, connected, HELLO answered) "
		 "within N ms: a rank that accepts the connection but never answers (a stopped process, some "
		 "other listener) fails what waits on it instead of holding it for ever (0 = never)." },
	{ OPT("cuda-graphs", "0|1", set_cuda_graphs),
	  .help = "capture each graph as a CUDA graph on its first run and replay it (default 1)",
	  .doc = "Capture each graph as a CUDA graph on its first run on a stream and replay it after; 0 "
		 "launches it node by node (bench-graph_replay measures both)." },
	{ OPT("ggml-graph-reuse", "0|1", set_ggml_graph_reuse),
	  .help = "ggml devices: a created graph is known as the same graph on every run, so ggml-cuda replays its CUDA graph without comparing its nodes (default 1)",
	  .doc = "ggml devices: each created graph carries one graph id (ggml's cgraph uid) for its life.  "
		 "Its nodes never change after it is created, and ggml-cuda, given the id it saw last, "
		 "replays its CUDA graph without comparing every node's fields to the last run's (what "
		 "it does for a graph without an id: ~40 ns a node, on every stage's launch of every "
		 "decoded token).  0 = no id: ggml-cuda compares." },
	{ OPT("ggml-native-gdn", "MODE", set_ggml_native_gdn),
	  .help = "ggml devices: GATED_DELTA_NET on pprpc's chunked kernels: off, auto (prefill: where pprpc runs its chunked form), on (every node that fits) (default off)",
	  .doc = "ggml devices (ggml:CPU, ggml:CUDA0): which kernel runs ggml's GATED_DELTA_NET (Qwen3.5 / "
		 "Qwen3-Next Gated DeltaNet, Kimi-Linear's KDA).  off: ggml's.  auto: pprpc's chunked kernels "
		 "where they take their chunked form (prefill; the CPU from 2 tokens, CUDA from 8 with head "
		 "sizes 64 or 128), ggml's for decode.  on: pprpc's for every node they compute as ggml does "
		 "(decode too).  Nodes pprpc does not compute the same way (state snapshots of intermediate "
		 "tokens, q/k broadcast over sequences) and runs whose gates are not all finite and <= 0 "
		 "stay with ggml's kernel.  On a GPU pprpc's chunked form runs on bf16 tensor cores with "
		 "split operands (a bf16 and its bf16 remainder: RMSE/RMS about 6.5e-6 of ggml's fp32 "
		 "kernel, within test-backend-ops' bound; 3-6x ggml-cuda's kernel on an H200); on the CPU it "
		 "is fp32.  STATS and pprpcctl stats count which kernel ran "
		 "(gdn_chunked, gdn_serial, gdn_ggml_* per reason; doc/ggml.md)." },
	{ OPT("transport", "MODE", set_transport),
	  .help = "peer links and listener: auto (RDMA if it works, else TCP), tcp, rdma (required)",
	  .doc = "Peer links (stage-boundary transfers) and the listener: auto tries RDMA (rdmacm, RoCE or "
		 "iWARP) and falls back to TCP, logging why; tcp never tries; rdma requires it (the daemon "
		 "refuses to start without a device on the listen address).  Clients always connect over "
		 "TCP.  The environment's PPRPC_TRANSPORT overrides the file." },
	{ OPT("rdma-chunk", "BYTES", set_rdma_chunk),
	  .help = "RDMA ring slot size, k/m suffix allowed (env PPRPC_RDMA_CHUNK; 512K)",
	  .doc = "RDMA ring geometry per connection: rdma-tx-depth sends of rdma-chunk bytes (a multiple of "
		 "4 KiB, k/m suffix allowed) in flight and rdma-rx-depth posted receives, registered once, so "
		 "it must fit RLIMIT_MEMLOCK (else the daemon steps down: smaller depth, one 256 KiB chunk, "
		 "TCP; and says so).  The environment's PPRPC_RDMA_CHUNK overrides the file." },
	{ OPT("rdma-tx-depth", "N", set_rdma_tx),
	  .help = "RDMA sends in flight per connection (env PPRPC_RDMA_TX_DEPTH; 8)",
	  .doc = "RDMA sends in flight per connection (see rdma-chunk).  The environment's "
		 "PPRPC_RDMA_TX_DEPTH overrides the file." },
	{ OPT("rdma-rx-depth", "N", set_rdma_rx),
	  .help = "RDMA receives posted per connection, >= 24 (env PPRPC_RDMA_RX_DEPTH; 32)",
	  .doc = "RDMA receives posted per connection, at least 24 (see rdma-chunk).  The environment's "
		 "PPRPC_RDMA_RX_DEPTH overrides the file." },
	{ OPT("rdma-bulk", "MODE", set_rdma_bulk),
	  .help = "large payloads over RDMA: read (pulled by RDMA READ) or off (message slots) (env PPRPC_RDMA_BULK; off)",
	  .doc = "Payloads of at least rdma-bulk-threshold over RDMA: read has the receiver pull them by "
		 "RDMA READ (straight from the registered staging ring for boundaries), off sends them "
		 "through the ring slots.  Off by default: on Soft-RoCE it measured no faster "
		 "(doc/rdma-bulk.md); try read on real RoCE hardware.  The environment's PPRPC_RDMA_BULK "
		 "overrides the file." },
	{ OPT("rdma-bulk-threshold", "BYTES", set_rdma_bulk_threshold),
	  .help = "smallest payload for the bulk path, k/m suffix, 4K..1024M (env PPRPC_RDMA_BULK_THRESHOLD; 256K)",
	  .doc = "Smallest payload for the bulk path (rdma-bulk read), 4K..1024M, k/m suffix allowed.  The "
		 "environment's PPRPC_RDMA_BULK_THRESHOLD overrides the file." },
	{ OPT("model-dir", "DIR", set_model_dir),
	  .help = "model files of this rank: weights llama.cpp names by file identity are read from here",
	  .doc = "A folder of GGUF model files (searched up to 4 levels deep; symlinks are not followed).  "
		 "When the ggml plugin loads a model it first names each weight tensor by its file's "
		 "identity (size, a hash of the head, a hash of the whole content) and offset instead of "
		 "sending it; a file here with that identity fills the tensor from this host's disk.  "
		 "Nothing is trusted by name: the content hash is computed once per file and kept beside "
		 "it (NAME.pprpc-sum, or in weights-cache when the folder is read-only), a file changed or "
		 "truncated under the rank fails the read, and anything that fails is sent by the client "
		 "instead (doc/weights.md).",
	  .example = "/srv/models" },
	{ OPT("map-model-files", "0|1", set_map_model_files),
	  .help = "a CPU device's weights are its mapping of the model-dir copy, not read into memory (default 1)",
	  .doc = "With model-dir, a device that computes on host memory (ggml:CPU) serves a model's "
		 "weights as a copy-on-write mapping of its copy of the file: llama.cpp's plugin asks for "
		 "the range that holds a device's weights, nothing is read or sent at load, and pages come "
		 "from the page cache when first used.  The file must then not change while a model uses "
		 "it: rewritten in place, the next graph run on it fails with the reason (the client "
		 "restarts and sends the bytes); truncated, the rank stops with SIGBUS and names the "
		 "file.  Replace model files by rename, or set 0 to read weights into the device's "
		 "memory instead (doc/weights.md)." },
	{ OPT("map-read-ahead", "0|1", set_map_read_ahead),
	  .help = "a mapped weights range is read into the page cache by background threads at once (default 1)",
	  .doc = "With map-model-files, the rank reads each mapped range ahead of the first graph, in "
		 "parallel and in large requests, while the client still builds its contexts: on a cold "
		 "page cache the graph finds its weights there instead of faulting them in from disk a "
		 "few hundred KiB at a time.  Pages already cached cost a lookup; 0 leaves the reading "
		 "to the graph's page faults (doc/weights.md)." },
	{ OPT("map-recall", "0|1", set_map_recall),
	  .help = "when llama.cpp's plugin connects, read ahead again what the last load's graphs read (default 1)",
	  .doc = "With map-read-ahead, the rank keeps what the graphs of its last mapped load read (the "
		 "file and its regions, in model-dir/.pprpc-last-load, or in the weights cache's sums/ "
		 "folder when model-dir is read-only) and, when llama.cpp's plugin connects after a restart "
		 "or after a load ended, starts reading that again at once: llama.cpp reads its whole model "
		 "before it tells a rank what to map, and the rank's own disk then reads side by side "
		 "with the client's instead of after it.  The file must be the same (size, inode, "
		 "mtime); a client loading another model costs one wasted read of the last one's "
		 "regions (doc/weights.md)." },
	{ OPT("weights-cache", "DIR", set_weights_cache),
	  .help = "content-addressed cache of weights the client sent (filled on a first load, read on the next)",
	  .doc = "A folder where weight bytes the client had to send are kept under their content key, so "
		 "the next load of the same model reads them from this host's disk.  Entries are written "
		 "to a temporary file and renamed (a rank killed mid-write leaves no torn entry), every "
		 "read checks the entry's hash, and only what the client marks as weights is stored "
		 "(never activations).  Bounded by weights-cache-mib, least recently used first out.",
	  .example = "/var/cache/pprpc/weights" },
	{ OPT("weights-cache-mib", "N", set_weights_cache_mib),
	  .help = "bound of weights-cache, MiB (default 102400)",
	  .doc = "The cache's size bound, MiB: a store beyond it evicts the least recently used entries; "
		 "a tensor larger than the bound is not stored." },
	{ OPT("metrics-listen", "HOST:PORT", set_metrics_listen),
	  .help = "serve Prometheus text metrics over HTTP here",
	  .doc = "Prometheus text metrics over HTTP (GET /metrics) at this address (empty: off).  Loopback "
		 "only unless insecure-listen 1 (the requests carry no proof of the key); 16 requests at a "
		 "time, each closed after hello-timeout-ms.",
	  .example = "127.0.0.1:9464" },
	{ OPT("trace-file", "PATH", set_trace_file),
	  .help = "diagnostic: write a line per hop of every request (arrival, exec, reply) to PATH",
	  .doc = "A diagnostic trace, off when empty: for every request of every connection (clients and "
		 "other ranks' links) one line per hop, CLOCK_MONOTONIC ns, connection, role, message type, "
		 "request id and event (arrive, exec_start, exec_end, done, reply), kept in memory and "
		 "written at each tick and at exit; records beyond 65536 between two writes are dropped and "
		 "counted in the file.  bench/llama-vs-rpc/token-trace.py merges it with the client's "
		 "PPRPC_TRACE file into one decoded token's hops (doc/llama.md: Tracing one token).",
	  .example = "/tmp/pprpcd.trace" },
	{ OPT("log-level", "LEVEL", set_log),
	  .help = "err, warning, notice, info, debug",
	  .doc = "err, warning, notice, info, debug.  SIGHUP re-reads this value from the configuration "
		 "file.  Under systemd lines carry syslog priorities (<N> prefixes)." },
};

#undef OPT

#define NDEFS (sizeof(defs) / sizeof(defs[0]))

const struct optdef *pprpcd_optdefs(size_t *ret_n)
{
	*ret_n = NDEFS;
	return defs;
}

/* Names match with '-' and '_' interchangeable. */
static const struct optdef *find(const char *name, size_t len)
{
	for (size_t i = 0; i < NDEFS; i++) {
		const char *n = defs[i].name;
		size_t k;

		for (k = 0; k < len && n[k]; k++)
			if (n[k] != name[k] && !(n[k] == '-' && name[k] == '_'))
				break;
		if (k == len && !n[k])
			return &defs[i];
	}
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: pprpcd [-c FILE] [--check-config] [options]\n"
		   "  -c, --config FILE        configuration file (default /etc/pprpc/pprpcd.conf if present)\n"
		   "  --check-config           validate the configuration, print the effective settings, exit\n");
	for (size_t i = 0; i < NDEFS; i++) {
		char flag[64];

		snprintf(flag, sizeof(flag), "--%s %s", defs[i].name, defs[i].arg);
		fprintf(f, "  %-24s %s\n", flag, defs[i].help);
	}
	fprintf(f, "  --version                print the version and exit\n"
		   "  --help                   this text\n"
		   "Every setting can also be given in the file as name = value (name with _ or -).\n");
}

/* ---- the file ------------------------------------------------------------------ */

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

int pprpcd_config_parse(struct pprpcd_opts *o, const char *path, const char *text, size_t len,
			char *err, size_t errlen)
{
	char line[1024], why[300];
	size_t pos = 0;
	int lineno = 0;

	while (pos < len) {
		size_t n = 0;
		char *s, *eq, *key, *val;
		const struct optdef *def;

		lineno++;
		while (pos < len && text[pos] != '\n') {
			if (n + 1 >= sizeof(line)) {
				snprintf(err, errlen, "%s:%d: line longer than %zu characters", path, lineno, sizeof(line) - 1);
				return PPRPC_EINVAL;
			}
			if (text[pos] == '\0') {
				snprintf(err, errlen, "%s:%d: NUL byte", path, lineno);
				return PPRPC_EINVAL;
			}
			line[n++] = text[pos++];
		}
		pos++; /* the newline */
		line[n] = '\0';
		s = trim(line);
		if (!*s || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			/* One section only, for readers who expect INI. */
			if (strcmp(s, "[pprpcd]") != 0) {
				snprintf(err, errlen, "%s:%d: unknown section %.40s (only [pprpcd])", path, lineno, s);
				return PPRPC_EINVAL;
			}
			continue;
		}
		eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%d: expected 'name = value'", path, lineno);
			return PPRPC_EINVAL;
		}
		*eq = '\0';
		key = trim(s);
		val = trim(eq + 1);
		/* Values may be quoted to keep spaces. */
		if (val[0] == '"' && strlen(val) >= 2 && val[strlen(val) - 1] == '"') {
			val[strlen(val) - 1] = '\0';
			val++;
		}
		def = find(key, strlen(key));
		if (!def) {
			snprintf(err, errlen, "%s:%d: unknown key '%.60s'", path, lineno, key);
			return PPRPC_EINVAL;
		}
		if (def->set(o, val, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s:%d: %s: %s", path, lineno, def->name, why);
			return PPRPC_EINVAL;
		}
	}
	return 0;
}

/* Cap on the file size: a configuration is small; this is not a place to
 * stream gigabytes from. */
#define MAX_CONFIG (1u << 20)

int pprpcd_config_load(struct pprpcd_opts *o, const char *path, int must_exist, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *buf;
	size_t n;
	int rc;

	if (!f) {
		if (!must_exist && errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return PPRPC_EIO;
	}
	buf = malloc(MAX_CONFIG + 1);
	if (!buf) {
		fclose(f);
		return PPRPC_ENOMEM;
	}
	n = fread(buf, 1, MAX_CONFIG + 1, f);
	fclose(f);
	if (n > MAX_CONFIG) {
		snprintf(err, errlen, "%s: larger than %u bytes", path, MAX_CONFIG);
		free(buf);
		return PPRPC_ETOOBIG;
	}
	rc = pprpcd_config_parse(o, path, buf, n, err, errlen);
	free(buf);
	return rc;
}

void pprpcd_config_print(const struct pprpcd_opts *o, FILE *f)
{
	for (size_t i = 0; i < NDEFS; i++) {
		char v[512];

		defs[i].show(o, v, sizeof(v));
		fprintf(f, "%s = %s\n", defs[i].name, v);
	}
}

/* Checks that need more than one value or the daemon's vocabulary. */
int pprpcd_opts_validate(const struct pprpcd_opts *o, char *err, size_t errlen)
{
	char host[256], list[sizeof(o->devices)], *save = NULL, *tok;
	uint16_t port;

	if (addr_split(o->listen, host, sizeof(host), &port, 50052) < 0) {
		snprintf(err, errlen, "listen: cannot parse '%s' (expected HOST:PORT)", o->listen);
		return PPRPC_EINVAL;
	}
	if (o->metrics_listen[0] && addr_split(o->metrics_listen, host, sizeof(host), &port, 9464) < 0) {
		snprintf(err, errlen, "metrics-listen: cannot parse '%s'", o->metrics_listen);
		return PPRPC_EINVAL;
	}
	memcpy(list, o->devices, sizeof(list));
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (!device_spec_known(tok)) {
			snprintf(err, errlen, "devices: unknown device '%s' (%s)", tok, device_spec_names());
			return PPRPC_EINVAL;
		}
	return 0;
}

static const struct {
	const char *env, *key;
} env_map[] = {
	{ "PPRPC_RDMA_CHUNK", "rdma-chunk" },
	{ "PPRPC_RDMA_TX_DEPTH", "rdma-tx-depth" },
	{ "PPRPC_RDMA_RX_DEPTH", "rdma-rx-depth" },
	{ "PPRPC_RDMA_BULK_THRESHOLD", "rdma-bulk-threshold" },
	{ "PPRPC_RDMA_BULK", "rdma-bulk" },
	{ "PPRPC_TRANSPORT", "transport" },
};

int pprpcd_opts_env(struct pprpcd_opts *o, char *err, size_t errlen)
{
	char why[300];

	for (size_t i = 0; i < sizeof(env_map) / sizeof(env_map[0]); i++) {
		const char *v = getenv(env_map[i].env);
		const struct optdef *def = find(env_map[i].key, strlen(env_map[i].key));

		if (!v || !*v)
			continue;
		if (def->set(o, v, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "environment %s: %s", env_map[i].env, why);
			return PPRPC_EINVAL;
		}
	}
	return 0;
}

/* ---- the command line ----------------------------------------------------------------- */

int pprpcd_opts_parse(struct pprpcd_opts *o, int argc, char **argv)
{
	const char *config = NULL;
	int check = 0, rc;
	char err[512];

	/* First pass: the file and the modes, so flags can override the file. */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 1;
		}
		/* Not in --help: the settings as README.md, pprpcd.8 and
		 * pprpcd.conf show them (scripts/gen-docs.sh, make docs). */
		if (!strcmp(argv[i], "--help-table")) {
			if (i + 1 >= argc || pprpcd_opts_doc(argv[i + 1], stdout) < 0) {
				fprintf(stderr, "pprpcd: --help-table needs md, roff or conf\n");
				return PPRPC_EINVAL;
			}
			return 1;
		}
		if (!strcmp(argv[i], "--version")) {
			printf("pprpcd %s (protocol %d)\n", PPRPC_VERSION, PPRPC_PROTO_VERSION);
			return 1;
		}
		if (!strcmp(argv[i], "--check-config"))
			check = 1;
		if ((!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config"))) {
			if (i + 1 >= argc) {
				fprintf(stderr, "pprpcd: %s needs a file\n", argv[i]);
				return PPRPC_EINVAL;
			}
			config = argv[++i];
		}
	}
	rc = pprpcd_config_load(o, config ? config : PPRPCD_DEFAULT_CONFIG, config != NULL, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "pprpcd: %s\n", err);
		return rc;
	}
	snprintf(o->config_path, sizeof(o->config_path), "%s", config ? config : PPRPCD_DEFAULT_CONFIG);
	/* The environment overrides the file; flags override both. */
	if (pprpcd_opts_env(o, err, sizeof(err)) < 0) {
		fprintf(stderr, "pprpcd: %s\n", err);
		return PPRPC_EINVAL;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		const struct optdef *def;
		size_t nl;

		if (!strcmp(a, "--check-config"))
			continue;
		if (!strcmp(a, "-c") || !strcmp(a, "--config")) {
			i++;
			continue;
		}
		if (strncmp(a, "--", 2) != 0) {
			fprintf(stderr, "pprpcd: unexpected argument '%s'\n", a);
			usage(stderr);
			return PPRPC_EINVAL;
		}
		a += 2;
		nl = strcspn(a, "=");
		def = find(a, nl);
		if (!def) {
			fprintf(stderr, "pprpcd: unknown option '%s'\n", argv[i]);
			usage(stderr);
			return PPRPC_EINVAL;
		}
		if (a[nl] == '=')
			v = a + nl + 1;
		else if (i + 1 < argc)
			v = argv[++i];
		if (!v) {
			fprintf(stderr, "pprpcd: --%s needs a value (%s)\n", def->name, def->arg);
			return PPRPC_EINVAL;
		}
		if (def->set(o, v, err, sizeof(err)) < 0) {
			fprintf(stderr, "pprpcd: --%s: %s\n", def->name, err);
			return PPRPC_EINVAL;
		}
	}
	if (pprpcd_opts_validate(o, err, sizeof(err)) < 0) {
		fprintf(stderr, "pprpcd: %s\n", err);
		return PPRPC_EINVAL;
	}
	if (check) {
		printf("# effective configuration (file: %s)\n", config ? config : PPRPCD_DEFAULT_CONFIG);
		pprpcd_config_print(o, stdout);
		return 1;
	}
	return 0;
}
