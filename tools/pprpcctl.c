/*
 * pprpcctl — ask running pprpcd ranks for their status or statistics.
 *
 *   pprpcctl status|stats (--rank HOST:PORT | --cluster FILE) [--json] [--timeout-ms N]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc.h"
#include "tools/common/report.h"

#define MIB (1024.0 * 1024.0)

static void usage(FILE *f)
{
	fprintf(f, "usage: pprpcctl status|stats (--rank HOST:PORT | --cluster FILE) [--json] [--timeout-ms N]\n"
		   "                [--auth-key-file FILE]\n"
		   "  --auth-key-file FILE  shared key of a daemon run with auth-key-file (default $PPRPC_AUTH_KEY_FILE)\n");
}

/* JSON strings here come from the daemon: escaped. */
static void jstr(const char *s)
{
	json_string(stdout, s);
}

static void status_text(pprpc_client *c, const char *rank)
{
	pprpc_caps caps;
	int n = pprpc_device_count(c);

	pprpc_get_caps(c, &caps);
	printf("rank %s: pprpcd %s\n", rank, pprpc_daemon_version(c));
	printf("capabilities: async=%s events=%s p2p=%s rdma=%s\n", caps.async ? "yes" : "no",
	       caps.events ? "yes" : "no", caps.p2p ? "yes" : "no", caps.rdma ? "yes" : "no");
	printf("cpu placement: %s\n", pprpc_daemon_placement(c));
	printf("devices: %d\n", n);
	for (int i = 0; pprpc_device_unavailable(c, i); i++)
		printf("  not served: %s\n", pprpc_device_unavailable(c, i));
	for (int i = 0; i < n; i++) {
		pprpc_device_info di;

		pprpc_device_get(c, (uint32_t)i, &di);
		printf("  [%u] %-8s %-6s total %10.1f MiB  free %10.1f MiB  floor %8.1f MiB  (%s)\n", di.index,
		       di.name, di.kind, di.total_bytes / MIB, di.free_bytes / MIB, di.floor_bytes / MIB,
		       di.description);
	}
}

static void status_json(pprpc_client *c, const char *rank)
{
	pprpc_caps caps;
	int n = pprpc_device_count(c);

	pprpc_get_caps(c, &caps);
	printf("{\"rank\": ");
	jstr(rank);
	printf(", \"version\": ");
	jstr(pprpc_daemon_version(c));
	printf(", \"caps\": {\"async\": %s, \"events\": %s, \"p2p\": %s, \"rdma\": %s}, \"placement\": ",
	       caps.async ? "true" : "false", caps.events ? "true" : "false", caps.p2p ? "true" : "false",
	       caps.rdma ? "true" : "false");
	jstr(pprpc_daemon_placement(c));
	printf(", \"devices\": [");
	for (int i = 0; i < n; i++) {
		pprpc_device_info di;

		pprpc_device_get(c, (uint32_t)i, &di);
		printf("%s{\"index\": %u, \"name\": ", i ? ", " : "", di.index);
		jstr(di.name);
		printf(", \"kind\": ");
		jstr(di.kind);
		printf(", \"total_bytes\": %llu, \"free_bytes\": %llu, \"floor_bytes\": %llu}",
		       (unsigned long long)di.total_bytes, (unsigned long long)di.free_bytes,
		       (unsigned long long)di.floor_bytes);
	}
	printf("]}");
}

#define U(list, i, name) ((unsigned long long)pprpc_stats_u64(s, list, i, name))
#define S(list, i, name) pprpc_stats_str(s, list, i, name)

/* The transport facts of one connection or link (RDMA activation). */
static void transport_text(const pprpc_stats *s, const char *list, int i)
{
	pprpc_stat gid;

	if (!strcmp(S(list, i, "transport"), "rdma")) {
		if (pprpc_stats_find(s, list, i, "gid_index", &gid) < 0 || gid.type != PPRPC_STAT_INT)
			gid.i = -1;
		printf("     transport=rdma device=%s gid_index=%lld mtu=%llu ring=%llux%lluKiB rx_depth=%llu memlock=%s%s%s\n",
		       S(list, i, "rdma_device"), (long long)gid.i, U(list, i, "mtu"), U(list, i, "rdma_tx_depth"),
		       U(list, i, "rdma_chunk") >> 10, U(list, i, "rdma_rx_depth"), S(list, i, "memlock_step"),
		       S(list, i, "memlock_why")[0] ? " why=" : "", S(list, i, "memlock_why"));
		/* bytes by path: READ of bulk slots vs the message slots */
		printf("     bulk=\"%s\" bytes_in read=%llu slots=%llu, bytes_out read=%llu slots=%llu\n",
		       S(list, i, "rdma_bulk"), U(list, i, "bulk_bytes_in"),
		       U(list, i, "bytes_in") - U(list, i, "bulk_bytes_in"), U(list, i, "bulk_bytes_out"),
		       U(list, i, "bytes_out") - U(list, i, "bulk_bytes_out"));
	}
	else if (S(list, i, "fallback_reason")[0])
		printf("     transport=%s fallback=\"%s\"\n", S(list, i, "transport"), S(list, i, "fallback_reason"));
}

/* Which kernels ran GATED_DELTA_NET on device i (only once any did, or on
 * a ggml device, where the setting is shown). */
static void gdn_text(const pprpc_stats *s, int i)
{
	const char *d = "devices";
	unsigned long long native = U(d, i, "gdn_serial") + U(d, i, "gdn_chunked") + U(d, i, "gdn_fallback");
	unsigned long long ggml = U(d, i, "gdn_ggml_off") + U(d, i, "gdn_ggml_auto") + U(d, i, "gdn_ggml_shape") +
				  U(d, i, "gdn_ggml_gate") + U(d, i, "gdn_ggml_nomem");

	if (!native && !ggml && !S(d, i, "gdn_native")[0])
		return;
	printf("           GATED_DELTA_NET: pprpc chunked %llu, serial %llu, fallback %llu", U(d, i, "gdn_chunked"),
	       U(d, i, "gdn_serial"), U(d, i, "gdn_fallback"));
	if (S(d, i, "gdn_native")[0])
		printf("; ggml %llu (off %llu, auto %llu, shape %llu, gate %llu, nomem %llu); native: %s", ggml,
		       U(d, i, "gdn_ggml_off"), U(d, i, "gdn_ggml_auto"), U(d, i, "gdn_ggml_shape"),
		       U(d, i, "gdn_ggml_gate"), U(d, i, "gdn_ggml_nomem"), S(d, i, "gdn_native"));
	printf("\n");
}

/* Where device dev's queue spent its time: mean exec time per command
 * type, four to a line. */
static void exec_text(const pprpc_stats *s, unsigned long long dev)
{
	const char *e = "exec_times";
	int shown = 0;

	for (int i = 0; i < pprpc_stats_count(s, e); i++) {
		unsigned long long n = U(e, i, "execs");

		if (U(e, i, "device") != dev || !n)
			continue;
		printf("%s%s %llu x %.1f us", shown == 0 ? "           exec time: " : shown % 4 ? ", " : ",\n                      ",
		       S(e, i, "type"), n, U(e, i, "ns") / 1000.0 / n);
		if (U(e, i, "load_execs"))
			printf(" (%llu loading)", U(e, i, "load_execs"));
		shown++;
	}
	if (shown)
		printf("\n");
}

/* Clients' requests by type: while their connection loaded (before its
 * first graph or boundary request) | after, with the tensor bytes named. */
static void requests_text(const pprpc_stats *s)
{
	const char *k = "request_counts";

	for (int i = 0; i < pprpc_stats_count(s, k); i++) {
		unsigned long long lb = U(k, i, "load_bytes"), rb = U(k, i, "run_bytes");

		printf("%s%s %llu", i == 0 ? "client requests, loading | running: " : i % 4 ? ", " : ",\n    ",
		       S(k, i, "type"), U(k, i, "load_requests"));
		if (lb)
			printf(" (%.1f MiB)", lb / MIB);
		printf(" | %llu", U(k, i, "run_requests"));
		if (rb)
			printf(" (%.1f MiB)", rb / MIB);
	}
	if (pprpc_stats_count(s, k))
		printf("\n");
}

/* What the rank read from its model files and its weights cache (only when
 * it has either). */
static void weights_text(const pprpc_stats *s)
{
	const char *w = NULL;
	double fs = U(w, 0, "weights.file_ns") / 1e9, cs = U(w, 0, "weights.cache_ns") / 1e9;
	double as = U(w, 0, "weights.ahead_ns") / 1e9;

	if (!S(w, 0, "weights.model_dir")[0] && !S(w, 0, "weights.cache_dir")[0])
		return;
	printf("weights: model-dir %s, cache %s (%.1f MiB in %llu entries)\n",
	       S(w, 0, "weights.model_dir")[0] ? S(w, 0, "weights.model_dir") : "-",
	       S(w, 0, "weights.cache_dir")[0] ? S(w, 0, "weights.cache_dir") : "-", U(w, 0, "weights.cache_bytes") / MIB,
	       U(w, 0, "weights.cache_entries"));
	printf("         mapped as buffers: %.1f MiB in %llu ranges (%.1f MiB mapped now); read ahead %.1f of %.1f MiB "
	       "asked (%.0f MiB/s)\n",
	       U(w, 0, "weights.map_bytes") / MIB, U(w, 0, "weights.maps"), U(w, 0, "weights.mapped_bytes") / MIB,
	       U(w, 0, "weights.ahead_bytes") / MIB, U(w, 0, "weights.ahead_asked") / MIB,
	       as > 0 ? U(w, 0, "weights.ahead_bytes") / MIB / as : 0.0);
	printf("         fills %llu (%llu not filled: the client sent the bytes); from model files %.1f MiB in %llu reads "
	       "(%.0f MiB/s), %llu refused; from the cache %.1f MiB in %llu hits (%.0f MiB/s), %llu misses, %llu bad "
	       "entries removed; stored %.1f MiB in %llu entries, %llu evicted; hashed %.1f MiB of model files\n",
	       U(w, 0, "weights.fills"), U(w, 0, "weights.fills_failed"), U(w, 0, "weights.file_bytes") / MIB,
	       U(w, 0, "weights.file_reads"), fs > 0 ? U(w, 0, "weights.file_bytes") / MIB / fs : 0.0,
	       U(w, 0, "weights.file_refused"), U(w, 0, "weights.cache_hit_bytes") / MIB, U(w, 0, "weights.cache_hits"),
	       cs > 0 ? U(w, 0, "weights.cache_hit_bytes") / MIB / cs : 0.0, U(w, 0, "weights.cache_misses"),
	       U(w, 0, "weights.cache_bad"), U(w, 0, "weights.cache_store_bytes") / MIB, U(w, 0, "weights.cache_stores"),
	       U(w, 0, "weights.cache_evictions"), U(w, 0, "weights.hash_bytes") / MIB);
}

static void stats_text(const pprpc_stats *s, const char *rank)
{
	printf("rank %s: pprpcd %s, up %.1f s\n", rank, S(NULL, 0, "daemon_version"), U(NULL, 0, "uptime_ms") / 1000.0);
	printf("requests %llu (errors %llu), protocol errors %llu, connections %d now / %llu total\n",
	       U(NULL, 0, "requests"), U(NULL, 0, "request_errors"), U(NULL, 0, "protocol_errors"),
	       pprpc_stats_count(s, "connections"), U(NULL, 0, "connections_total"));
	for (int i = 0; i < pprpc_stats_count(s, "devices"); i++) {
		const char *d = "devices";

		printf("device [%llu] %s: free %.1f MiB, floor %.1f MiB, buffers %llu (%.1f MiB), queue depth %llu,\n"
		       "           commands %llu, errors %llu, graph creates %llu, graph runs %llu (captures %llu, replays %llu)\n",
		       U(d, i, "info.index"), S(d, i, "info.name"), U(d, i, "info.free_bytes") / MIB,
		       U(d, i, "info.floor_bytes") / MIB, U(d, i, "buffers"), U(d, i, "allocated_bytes") / MIB,
		       U(d, i, "queue_depth"), U(d, i, "commands"), U(d, i, "errors"), U(d, i, "graph_creates"),
		       U(d, i, "graph_runs"), U(d, i, "graph_captures"), U(d, i, "graph_replays"));
		if (S(d, i, "ipc_status")[0])
			printf("           IPC boundaries: %s, pool %.1f MiB\n", S(d, i, "ipc_status"),
			       U(d, i, "ipc_pool_bytes") / MIB);
		if (S(d, i, "async_status")[0])
			printf("           GPU-side timelines: %s, waits held on the GPU %llu, signals written %llu, "
			       "RECVs held %llu, SENDs put %llu\n",
			       S(d, i, "async_status"), U(d, i, "gpu_waits"), U(d, i, "gpu_signals"), U(d, i, "gpu_recvs"),
			       U(d, i, "gpu_sends"));
		gdn_text(s, i);
		exec_text(s, (unsigned long long)i);
	}
	for (int i = 0; i < pprpc_stats_count(s, "connections"); i++) {
		const char *k = "connections";

		printf("conn %-40s %s %-6s in %llu B / %llu frames, out %llu B / %llu frames, errors %llu, buffers %llu (%.1f MiB)\n",
		       S(k, i, "peer"), S(k, i, "transport"), S(k, i, "role"), U(k, i, "bytes_in"), U(k, i, "frames_in"),
		       U(k, i, "bytes_out"), U(k, i, "frames_out"), U(k, i, "errors"), U(k, i, "buffers"),
		       U(k, i, "allocated_bytes") / MIB);
		transport_text(s, k, i);
	}
	for (int i = 0; i < pprpc_stats_count(s, "links"); i++) {
		const char *k = "links";

		printf("link %-40s %s in %llu B / %llu frames, out %llu B / %llu frames\n", S(k, i, "peer"),
		       S(k, i, "transport"), U(k, i, "bytes_in"), U(k, i, "frames_in"), U(k, i, "bytes_out"),
		       U(k, i, "frames_out"));
		transport_text(s, k, i);
	}
	requests_text(s);
	weights_text(s);
	printf("rdma: %s\n", S(NULL, 0, "rdma_status")[0] ? S(NULL, 0, "rdma_status") : "-");
	printf("staging ring: %.1f of %.1f MiB in use\n", U(NULL, 0, "staging_used") / MIB,
	       U(NULL, 0, "staging_bytes") / MIB);
	if (pprpc_stats_count(s, "boundaries"))
		printf("%-24s %-5s %-8s %10s %14s %12s %12s %7s %10s\n", "boundary peer", "dir", "path", "transfers",
		       "bytes", "time ms", "MiB/s", "errors", "copy ms");
	for (int i = 0; i < pprpc_stats_count(s, "boundaries"); i++) {
		const char *b = "boundaries";
		unsigned long long us = U(b, i, "time_us"), bytes = U(b, i, "bytes");

		/* copy ms: time in the IPC copies themselves (recv over p2p-ipc) */
		printf("%-24s %-5s %-8s %10llu %14llu %12.3f %12.1f %7llu %10.3f\n", S(b, i, "peer"), S(b, i, "direction"),
		       S(b, i, "path"), U(b, i, "transfers"), bytes, us / 1000.0, us ? bytes / MIB / (us / 1e6) : 0.0,
		       U(b, i, "errors"), U(b, i, "copy_us") / 1000.0);
	}
}

/* One value as JSON (a non-finite real as null: JSON has no NaN). */
static void json_value(const pprpc_stat *v)
{
	switch (v->type) {
	case PPRPC_STAT_UINT:
		printf("%llu", (unsigned long long)v->u);
		break;
	case PPRPC_STAT_INT:
		printf("%lld", (long long)v->i);
		break;
	case PPRPC_STAT_REAL:
		if (isfinite(v->d))
			printf("%.17g", v->d);
		else
			printf("null");
		break;
	default:
		jstr(v->s);
	}
}

/* Every value of an item as JSON members, in wire order; a dotted name
 * ("info.free_bytes") becomes a nested object ("info": {"free_bytes": ..}).
 * The members of one nested message are contiguous on the wire, so the
 * open objects are a path that only grows or shrinks at its end. */
static void json_members(const pprpc_stats *s, const char *list, int item, int first)
{
	char open[8][64];
	int depth = 0;
	pprpc_stat v;

	for (int i = 0; pprpc_stats_field(s, list, item, i, &v) == 0; i++) {
		char comp[8][64];
		int n = 0, keep = 0;

		for (const char *p = v.name; n < 8;) {
			const char *dot = strchr(p, '.');
			size_t len = dot ? (size_t)(dot - p) : strlen(p);

			snprintf(comp[n++], sizeof(comp[0]), "%.*s", (int)len, p);
			if (!dot)
				break;
			p = dot + 1;
		}
		while (keep < depth && keep < n - 1 && !strcmp(open[keep], comp[keep]))
			keep++;
		for (; depth > keep; depth--)
			printf("}");
		for (; depth < n - 1; depth++) {
			printf("%s", first ? "" : ", ");
			jstr(comp[depth]);
			printf(": {");
			snprintf(open[depth], sizeof(open[0]), "%s", comp[depth]);
			first = 1;
		}
		printf("%s", first ? "" : ", ");
		jstr(comp[n - 1]);
		printf(": ");
		json_value(&v);
		first = 0;
	}
	for (; depth > 0; depth--)
		printf("}");
}

/* Everything the daemon reported: its own values, then each list. */
static void stats_json(const pprpc_stats *s, const char *rank)
{
	const char *list;

	printf("{\"rank\": ");
	jstr(rank);
	json_members(s, NULL, 0, 0);
	for (int l = 0; (list = pprpc_stats_list(s, l)); l++) {
		printf(", ");
		jstr(list);
		printf(": [");
		for (int i = 0; i < pprpc_stats_count(s, list); i++) {
			printf("%s{", i ? ", " : "");
			json_members(s, list, i, 1);
			printf("}");
		}
		printf("]");
	}
	printf("}");
}

static int one_rank(const char *cmd, const char *rank, int json, pprpc_connect_opts *opts)
{
	pprpc_client *c;
	pprpc_stats *s;
	char err[512] = "";
	int rc;

	opts->err_buf = err;
	opts->err_len = sizeof(err);
	rc = pprpc_connect(rank, opts, &c);
	if (rc < 0) {
		fprintf(stderr, "pprpcctl: cannot reach pprpcd at %s: %s\n", rank, err);
		return 1;
	}
	if (!strcmp(cmd, "status")) {
		json ? status_json(c, rank) : status_text(c, rank);
		pprpc_close(c);
		return 0;
	}
	rc = pprpc_stats_get(c, &s);
	if (rc < 0) {
		fprintf(stderr, "pprpcctl: stats from %s failed: %s (%s)\n", rank, pprpc_strerror(rc),
			pprpc_last_error(c));
		pprpc_close(c);
		return 1;
	}
	json ? stats_json(s, rank) : stats_text(s, rank);
	pprpc_stats_free(s);
	pprpc_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd = NULL, *rank = NULL, *cluster = NULL;
	pprpc_connect_opts opts = { .client_name = "pprpcctl", .connect_timeout_ms = 3000, .io_timeout_ms = 10000 };
	pprpc_cluster *cl = NULL;
	int json = 0, rc = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rank") == 0 && i + 1 < argc) {
			rank = argv[++i];
		} else if (strcmp(argv[i], "--cluster") == 0 && i + 1 < argc) {
			cluster = argv[++i];
		} else if (strcmp(argv[i], "--json") == 0) {
			json = 1;
		} else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
			opts.connect_timeout_ms = opts.io_timeout_ms = atoi(argv[++i]);
			if (opts.connect_timeout_ms <= 0) {
				fprintf(stderr, "pprpcctl: --timeout-ms must be > 0\n");
				return 2;
			}
		} else if (strcmp(argv[i], "--auth-key-file") == 0 && i + 1 < argc) {
			opts.auth_key_file = argv[++i];  /* default: $PPRPC_AUTH_KEY_FILE */
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (!cmd && argv[i][0] != '-') {
			cmd = argv[i];
		} else {
			fprintf(stderr, "pprpcctl: unexpected argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (!cmd || (!rank == !cluster) || (strcmp(cmd, "status") && strcmp(cmd, "stats"))) {
		usage(stderr);
		return 2;
	}
	if (rank)
		rc = one_rank(cmd, rank, json, &opts);
	if (rank && json)
		putchar('\n');
	if (cluster) {
		char err[512];

		if (pprpc_cluster_load(cluster, &cl, err, sizeof(err)) < 0) {
			fprintf(stderr, "pprpcctl: %s\n", err);
			return 2;
		}
		if (json)
			printf("[");
		for (int i = 0; i < pprpc_cluster_size(cl); i++) {
			if (json && i)
				printf(", ");
			else if (!json && i)
				printf("\n");
			if (!json)
				printf("== %s\n", pprpc_cluster_name(cl, i));
			rc |= one_rank(cmd, pprpc_cluster_addr(cl, i), json, &opts);
		}
		if (json)
			printf("]\n");
		pprpc_cluster_free(cl);
	}
	return rc;
}
