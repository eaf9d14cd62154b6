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
	o->send_in_place = 1;
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
FLAG_SETTER(set_send_in_place, send_in_place)
FLAG_SETTER(set_cpu_ipc, cpu_ipc)

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

static const struct optdef defs[] = {
	{ "listen", "HOST:PORT", "address to serve (port 0 = ephemeral; IPv6 as [::1]:PORT)", set_listen, set_listen_show },
	{ "port-file", "FILE", "write the bound port to FILE once listening", set_port_file, set_port_file_show },
	{ "devices", "LIST", "devices to serve, comma-separated: cpu, cuda:N, ggml:NAME (ggml's device, e.g. ggml:CPU, ggml:CUDA0)", set_devices, set_devices_show },
	{ "threads", "N", "threads of the CPU device and of each ggml device's backend (0 = all cores)", set_threads, set_threads_show },
	{ "memory-floor-mib", "N", "refuse allocations leaving less than N MiB free", set_floor, set_floor_show },
	{ "max-bulk-mib", "N", "largest tensor payload in one message", set_max_bulk, set_max_bulk_show },
	{ "max-meta-kib", "N", "largest control message (meta) in one frame, KiB (max 1024)", set_max_meta, set_max_meta_show },
	{ "max-buffers", "N", "buffers in the whole daemon", set_max_buffers, set_max_buffers_show },
	{ "max-graphs", "N", "graphs in the whole daemon", set_max_graphs, set_max_graphs_show },
	{ "max-timelines", "N", "timelines in the whole daemon", set_max_timelines, set_max_timelines_show },
	{ "max-conn-buffers", "N", "buffers one connection may hold", set_max_conn_buffers, set_max_conn_buffers_show },
	{ "max-conn-mib", "N", "device memory one connection may hold, page-rounded (0 = only the floor)", set_max_conn_mib, set_max_conn_mib_show },
	{ "max-conn-graphs", "N", "graphs one connection may hold", set_max_conn_graphs, set_max_conn_graphs_show },
	{ "max-conn-inflight", "N", "queued commands + unsent replies of one connection (reading pauses at half)", set_max_conn_inflight, set_max_conn_inflight_show },
	{ "max-conn-reply-mib", "N", "TENSOR_GET copies one connection may hold until written to it; a GET beyond waits in its queue (default 256)", set_max_conn_reply_mib, set_max_conn_reply_mib_show },
	{ "max-graph-nodes", "N", "nodes in one graph (max 65536)", set_max_graph_nodes, set_max_graph_nodes_show },
	{ "max-graph-gflop", "N|auto|off", "work one graph run may demand, estimated at GRAPH_CREATE (auto: 32 per CPU thread natively, 1024 per thread on ggml:CPU, 1048576 on a GPU)", set_max_graph_gflop, set_max_graph_gflop_show },
	{ "max-conns", "N", "connections served at once, clients and peers (beyond: closed at once)", set_max_conns, set_max_conns_show },
	{ "hello-timeout-ms", "N", "close a connection whose HELLO (authentication included) or metrics request is not complete within N ms (0 = never)", set_hello_timeout, set_hello_timeout_show },
	{ "auth-key-file", "FILE", "shared key (>= 32 bytes, mode 600): clients and peers must prove it (HMAC)", set_auth_key_file, set_auth_key_file_show },
	{ "insecure-listen", "0|1", "allow a non-loopback --listen without auth-key-file", set_insecure_listen, set_insecure_listen_show },
	{ "staging-mib", "N", "SEND staging ring; a SEND stalls only when it is full", set_staging, set_staging_show },
	{ "cpu-affinity", "SPEC", "pin threads: loop=CPUS,device=CPUS (e.g. loop=0,device=1-3)", set_affinity, set_affinity_show },
	{ "drain-ms", "N", "on SIGTERM, let queued work finish for up to N ms", set_drain, set_drain_show },
	{ "send-in-place", "0|1", "a SEND last in its stream streams from the tensor itself while the destination pulls (default 1)", set_send_in_place, set_send_in_place_show },
	{ "ipc-pool-mib", "N", "IPC staging per device for boundary SENDs (0 = 1024 on a GPU, staging-mib on the CPU)", set_ipc_pool, set_ipc_pool_show },
	{ "cpu-ipc", "0|1", "CPU-to-CPU boundaries with daemons of this host by process_vm_readv (needs ptrace access; default 0)", set_cpu_ipc, set_cpu_ipc_show },
	{ "transfer-timeout-ms", "N", "a SEND or RECV whose partner does not come fails after N ms (0 = never)", set_xfer_timeout, set_xfer_timeout_show },
	{ "peer-timeout-ms", "N", "drop a peer link silent for N ms while we wait on it (0 = never)", set_peer_timeout, set_peer_timeout_show },
	{ "peer-connect-timeout-ms", "N", "a peer link not up (connected, HELLO answered) within N ms fails (0 = never)", set_peer_connect_timeout, set_peer_connect_timeout_show },
	{ "cuda-graphs", "0|1", "capture each graph as a CUDA graph on its first run and replay it (default 1)", set_cuda_graphs, set_cuda_graphs_show },
	{ "ggml-native-gdn", "MODE", "ggml devices: GATED_DELTA_NET on pprpc's chunked kernels: off, auto (prefill: where pprpc runs its chunked form), on (every node that fits) (default off)", set_ggml_native_gdn, set_ggml_native_gdn_show },
	{ "transport", "MODE", "peer links and listener: auto (RDMA if it works, else TCP), tcp, rdma (required)", set_transport, set_transport_show },
	{ "rdma-chunk", "BYTES", "RDMA ring slot size, k/m suffix allowed (env PPRPC_RDMA_CHUNK; 512K)", set_rdma_chunk, set_rdma_chunk_show },
	{ "rdma-tx-depth", "N", "RDMA sends in flight per connection (env PPRPC_RDMA_TX_DEPTH; 8)", set_rdma_tx, set_rdma_tx_show },
	{ "rdma-rx-depth", "N", "RDMA receives posted per connection, >= 24 (env PPRPC_RDMA_RX_DEPTH; 32)", set_rdma_rx, set_rdma_rx_show },
	{ "rdma-bulk", "MODE", "large payloads over RDMA: read (pulled by RDMA READ) or off (message slots) (env PPRPC_RDMA_BULK; off)", set_rdma_bulk, set_rdma_bulk_show },
	{ "rdma-bulk-threshold", "BYTES", "smallest payload for the bulk path, k/m suffix, 4K..1024M (env PPRPC_RDMA_BULK_THRESHOLD; 256K)", set_rdma_bulk_threshold, set_rdma_bulk_threshold_show },
	{ "metrics-listen", "HOST:PORT", "serve Prometheus text metrics over HTTP here", set_metrics_listen, set_metrics_listen_show },
	{ "log-level", "LEVEL", "err, warning, notice, info, debug", set_log, set_log_show },
};

#define NDEFS (sizeof(defs) / sizeof(defs[0]))

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
