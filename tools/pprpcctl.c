/*
 * pprpcctl — ask running pprpcd ranks for their status or statistics.
 *
 *   pprpcctl status|stats (--rank HOST:PORT | --cluster FILE) [--json] [--timeout-ms N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc.h"

#define MIB (1024.0 * 1024.0)

static void usage(FILE *f)
{
	fprintf(f, "usage: pprpcctl status|stats (--rank HOST:PORT | --cluster FILE) [--json] [--timeout-ms N]\n"
		   "                [--auth-key-file FILE]\n"
		   "  --auth-key-file FILE  shared key of a daemon run with auth-key-file (default $PPRPC_AUTH_KEY_FILE)\n");
}

/* JSON strings here come from the daemon: escape them. */
static void jstr(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
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

/* The transport facts of one connection or link (RDMA activation). */
static void transport_text(const pprpc_conn_stats *k)
{
	if (!strcmp(k->transport, "rdma")) {
		printf("     transport=rdma device=%s gid_index=%d mtu=%u ring=%ux%uKiB rx_depth=%u memlock=%s%s%s\n",
		       k->rdma_device, k->gid_index, k->mtu, k->rdma_tx_depth, k->rdma_chunk >> 10, k->rdma_rx_depth,
		       k->memlock_step, k->memlock_why[0] ? " why=" : "", k->memlock_why);
		/* bytes by path: READ of bulk slots vs the message slots */
		printf("     bulk=\"%s\" bytes_in read=%llu slots=%llu, bytes_out read=%llu slots=%llu\n", k->rdma_bulk,
		       (unsigned long long)k->bulk_bytes_in, (unsigned long long)(k->bytes_in - k->bulk_bytes_in),
		       (unsigned long long)k->bulk_bytes_out, (unsigned long long)(k->bytes_out - k->bulk_bytes_out));
	}
	else if (k->fallback_reason[0])
		printf("     transport=%s fallback=\"%s\"\n", k->transport, k->fallback_reason);
}

static void stats_text(const pprpc_stats *s, const char *rank)
{
	printf("rank %s: pprpcd %s, up %.1f s\n", rank, s->daemon_version, s->uptime_ms / 1000.0);
	printf("requests %llu (errors %llu), protocol errors %llu, connections %u now / %llu total\n",
	       (unsigned long long)s->requests, (unsigned long long)s->request_errors,
	       (unsigned long long)s->protocol_errors, s->nconnections,
	       (unsigned long long)s->connections_total);
	for (uint32_t i = 0; i < s->ndevices; i++) {
		const pprpc_device_stats *d = &s->devices[i];

		printf("device [%u] %s: free %.1f MiB, floor %.1f MiB, buffers %llu (%.1f MiB), queue depth %llu,\n"
		       "           commands %llu, errors %llu, graph creates %llu, graph runs %llu (captures %llu, replays %llu)\n",
		       d->info.index, d->info.name, d->info.free_bytes / MIB, d->info.floor_bytes / MIB,
		       (unsigned long long)d->buffers, d->allocated_bytes / MIB,
		       (unsigned long long)d->queue_depth, (unsigned long long)d->commands,
		       (unsigned long long)d->errors, (unsigned long long)d->graph_creates,
		       (unsigned long long)d->graph_runs, (unsigned long long)d->graph_captures,
		       (unsigned long long)d->graph_replays);
		if (d->ipc_status[0])
			printf("           IPC boundaries: %s, pool %.1f MiB\n", d->ipc_status, d->ipc_pool_bytes / MIB);
		if (d->async_status[0])
			printf("           GPU-side timelines: %s, waits held on the GPU %llu, signals written %llu\n",
			       d->async_status, (unsigned long long)d->gpu_waits, (unsigned long long)d->gpu_signals);
	}
	for (uint32_t i = 0; i < s->nconnections; i++) {
		const pprpc_conn_stats *k = &s->connections[i];

		printf("conn %-40s %s %-6s in %llu B / %llu frames, out %llu B / %llu frames, errors %llu, buffers %llu (%.1f MiB)\n",
		       k->peer, k->transport, k->role, (unsigned long long)k->bytes_in,
		       (unsigned long long)k->frames_in, (unsigned long long)k->bytes_out,
		       (unsigned long long)k->frames_out, (unsigned long long)k->errors,
		       (unsigned long long)k->buffers, k->allocated_bytes / MIB);
		transport_text(k);
	}
	for (uint32_t i = 0; i < s->nlinks; i++) {
		const pprpc_conn_stats *k = &s->links[i];

		printf("link %-40s %s in %llu B / %llu frames, out %llu B / %llu frames\n", k->peer, k->transport,
		       (unsigned long long)k->bytes_in, (unsigned long long)k->frames_in,
		       (unsigned long long)k->bytes_out, (unsigned long long)k->frames_out);
		transport_text(k);
	}
	printf("rdma: %s\n", s->rdma_status[0] ? s->rdma_status : "-");
	printf("staging ring: %.1f of %.1f MiB in use\n", s->staging_used / MIB, s->staging_bytes / MIB);
	if (s->nboundaries)
		printf("%-24s %-5s %-8s %10s %14s %12s %12s %7s %10s\n", "boundary peer", "dir", "path", "transfers",
		       "bytes", "time ms", "MiB/s", "errors", "copy ms");
	for (uint32_t i = 0; i < s->nboundaries; i++) {
		const pprpc_boundary_stats *b = &s->boundaries[i];

		/* copy ms: time in the IPC copies themselves (recv over p2p-ipc) */
		printf("%-24s %-5s %-8s %10llu %14llu %12.3f %12.1f %7llu %10.3f\n", b->peer, b->direction, b->path,
		       (unsigned long long)b->transfers, (unsigned long long)b->bytes, b->time_us / 1000.0,
		       b->time_us ? b->bytes / MIB / (b->time_us / 1e6) : 0.0, (unsigned long long)b->errors,
		       b->copy_us / 1000.0);
	}
}

static void transport_json(const pprpc_conn_stats *k)
{
	printf(", \"rdma_device\": ");
	jstr(k->rdma_device);
	printf(", \"gid_index\": %d, \"mtu\": %u, \"rdma_chunk\": %u, \"rdma_tx_depth\": %u, \"rdma_rx_depth\": %u,"
	       " \"memlock_step\": ", k->gid_index, k->mtu, k->rdma_chunk, k->rdma_tx_depth, k->rdma_rx_depth);
	jstr(k->memlock_step);
	printf(", \"memlock_why\": ");
	jstr(k->memlock_why);
	printf(", \"fallback_reason\": ");
	jstr(k->fallback_reason);
	printf(", \"rdma_bulk\": ");
	jstr(k->rdma_bulk);
	printf(", \"bulk_bytes_in\": %llu, \"bulk_bytes_out\": %llu", (unsigned long long)k->bulk_bytes_in,
	       (unsigned long long)k->bulk_bytes_out);
}

static void stats_json(const pprpc_stats *s, const char *rank)
{
	printf("{\"rank\": ");
	jstr(rank);
	printf(", \"version\": ");
	jstr(s->daemon_version);
	printf(", \"uptime_ms\": %llu, \"requests\": %llu, \"request_errors\": %llu, \"protocol_errors\": %llu,"
	       " \"connections_total\": %llu, \"staging_bytes\": %llu, \"staging_used\": %llu, \"devices\": [",
	       (unsigned long long)s->uptime_ms, (unsigned long long)s->requests,
	       (unsigned long long)s->request_errors, (unsigned long long)s->protocol_errors,
	       (unsigned long long)s->connections_total, (unsigned long long)s->staging_bytes,
	       (unsigned long long)s->staging_used);
	for (uint32_t i = 0; i < s->ndevices; i++) {
		const pprpc_device_stats *d = &s->devices[i];

		printf("%s{\"name\": ", i ? ", " : "");
		jstr(d->info.name);
		printf(", \"free_bytes\": %llu, \"floor_bytes\": %llu, \"buffers\": %llu, \"allocated_bytes\": %llu,"
		       " \"queue_depth\": %llu, \"commands\": %llu, \"errors\": %llu, \"graph_creates\": %llu,"
		       " \"graph_runs\": %llu, \"ipc_pool_bytes\": %llu, \"ipc_status\": ",
		       (unsigned long long)d->info.free_bytes, (unsigned long long)d->info.floor_bytes,
		       (unsigned long long)d->buffers, (unsigned long long)d->allocated_bytes,
		       (unsigned long long)d->queue_depth, (unsigned long long)d->commands,
		       (unsigned long long)d->errors, (unsigned long long)d->graph_creates,
		       (unsigned long long)d->graph_runs, (unsigned long long)d->ipc_pool_bytes);
		jstr(d->ipc_status);
		printf("}");
	}
	printf("], \"connections\": [");
	for (uint32_t i = 0; i < s->nconnections; i++) {
		const pprpc_conn_stats *k = &s->connections[i];

		printf("%s{\"peer\": ", i ? ", " : "");
		jstr(k->peer);
		printf(", \"transport\": ");
		jstr(k->transport);
		printf(", \"role\": ");
		jstr(k->role);
		printf(", \"bytes_in\": %llu, \"bytes_out\": %llu, \"errors\": %llu", (unsigned long long)k->bytes_in,
		       (unsigned long long)k->bytes_out, (unsigned long long)k->errors);
		transport_json(k);
		printf("}");
	}
	printf("], \"links\": [");
	for (uint32_t i = 0; i < s->nlinks; i++) {
		const pprpc_conn_stats *k = &s->links[i];

		printf("%s{\"peer\": ", i ? ", " : "");
		jstr(k->peer);
		printf(", \"transport\": ");
		jstr(k->transport);
		printf(", \"bytes_in\": %llu, \"bytes_out\": %llu", (unsigned long long)k->bytes_in,
		       (unsigned long long)k->bytes_out);
		transport_json(k);
		printf("}");
	}
	printf("], \"rdma_status\": ");
	jstr(s->rdma_status);
	printf(", \"boundaries\": [");
	for (uint32_t i = 0; i < s->nboundaries; i++) {
		const pprpc_boundary_stats *b = &s->boundaries[i];

		printf("%s{\"peer\": ", i ? ", " : "");
		jstr(b->peer);
		printf(", \"direction\": ");
		jstr(b->direction);
		printf(", \"path\": ");
		jstr(b->path);
		printf(", \"transfers\": %llu, \"bytes\": %llu, \"time_us\": %llu, \"errors\": %llu, \"copy_us\": %llu}",
		       (unsigned long long)b->transfers, (unsigned long long)b->bytes, (unsigned long long)b->time_us,
		       (unsigned long long)b->errors, (unsigned long long)b->copy_us);
	}
	printf("]}");
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
