/*
 * pprpcctl — ask a running pprpcd for its status or statistics.
 *
 *   pprpcctl status --rank HOST:PORT
 *   pprpcctl stats  --rank HOST:PORT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc.h"

#define MIB (1024.0 * 1024.0)

static void usage(FILE *f)
{
	fprintf(f, "usage: pprpcctl status|stats --rank HOST:PORT [--timeout-ms N] [--auth-key-file FILE]\n"
		   "  --auth-key-file FILE  shared key of a daemon run with auth-key-file (default $PPRPC_AUTH_KEY_FILE)\n");
}

static int status(pprpc_client *c, const char *rank)
{
	pprpc_caps caps;
	int n = pprpc_device_count(c);

	pprpc_get_caps(c, &caps);
	printf("rank %s: pprpcd %s\n", rank, pprpc_daemon_version(c));
	printf("capabilities: async=%s events=%s p2p=%s rdma=%s\n", caps.async ? "yes" : "no",
	       caps.events ? "yes" : "no", caps.p2p ? "yes" : "no", caps.rdma ? "yes" : "no");
	printf("cpu placement: %s\n", pprpc_daemon_placement(c));
	printf("devices: %d\n", n);
	for (int i = 0; i < n; i++) {
		pprpc_device_info di;

		pprpc_device_get(c, (uint32_t)i, &di);
		printf("  [%u] %-8s %-6s total %10.1f MiB  free %10.1f MiB  floor %8.1f MiB  (%s)\n", di.index,
		       di.name, di.kind, di.total_bytes / MIB, di.free_bytes / MIB, di.floor_bytes / MIB,
		       di.description);
	}
	return 0;
}

static int stats(pprpc_client *c, const char *rank)
{
	pprpc_stats *s;
	int rc = pprpc_stats_get(c, &s);

	if (rc < 0) {
		fprintf(stderr, "pprpcctl: stats from %s failed: %s (%s)\n", rank, pprpc_strerror(rc),
			pprpc_last_error(c));
		return 1;
	}
	printf("rank %s: pprpcd %s, up %.1f s\n", rank, s->daemon_version, s->uptime_ms / 1000.0);
	printf("requests %llu (errors %llu), protocol errors %llu, connections %u now / %llu total\n",
	       (unsigned long long)s->requests, (unsigned long long)s->request_errors,
	       (unsigned long long)s->protocol_errors, s->nconnections,
	       (unsigned long long)s->connections_total);
	for (uint32_t i = 0; i < s->ndevices; i++) {
		const pprpc_device_stats *d = &s->devices[i];

		printf("device [%u] %s: free %.1f MiB, floor %.1f MiB, buffers %llu (%.1f MiB), queue depth %llu,\n"
		       "           commands %llu, errors %llu, graph creates %llu, graph runs %llu\n",
		       d->info.index, d->info.name, d->info.free_bytes / MIB, d->info.floor_bytes / MIB,
		       (unsigned long long)d->buffers, d->allocated_bytes / MIB,
		       (unsigned long long)d->queue_depth, (unsigned long long)d->commands,
		       (unsigned long long)d->errors, (unsigned long long)d->graph_creates,
		       (unsigned long long)d->graph_runs);
	}
	for (uint32_t i = 0; i < s->nconnections; i++) {
		const pprpc_conn_stats *k = &s->connections[i];

		printf("conn %-40s %s %-6s in %llu B / %llu frames, out %llu B / %llu frames, errors %llu, buffers %llu (%.1f MiB)\n",
		       k->peer, k->transport, k->role, (unsigned long long)k->bytes_in,
		       (unsigned long long)k->frames_in, (unsigned long long)k->bytes_out,
		       (unsigned long long)k->frames_out, (unsigned long long)k->errors,
		       (unsigned long long)k->buffers, k->allocated_bytes / MIB);
	}
	printf("staging ring: %.1f of %.1f MiB in use\n", s->staging_used / MIB, s->staging_bytes / MIB);
	if (s->nboundaries)
		printf("%-24s %-5s %-8s %10s %14s %12s %12s %7s\n", "boundary peer", "dir", "path", "transfers",
		       "bytes", "time ms", "MiB/s", "errors");
	for (uint32_t i = 0; i < s->nboundaries; i++) {
		const pprpc_boundary_stats *b = &s->boundaries[i];

		printf("%-24s %-5s %-8s %10llu %14llu %12.3f %12.1f %7llu\n", b->peer, b->direction, b->path,
		       (unsigned long long)b->transfers, (unsigned long long)b->bytes, b->time_us / 1000.0,
		       b->time_us ? b->bytes / MIB / (b->time_us / 1e6) : 0.0, (unsigned long long)b->errors);
	}
	pprpc_stats_free(s);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cmd = NULL, *rank = NULL;
	pprpc_connect_opts opts = { .client_name = "pprpcctl", .connect_timeout_ms = 3000, .io_timeout_ms = 10000 };
	pprpc_client *c;
	char err[512] = "";
	int rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--rank") == 0 && i + 1 < argc) {
			rank = argv[++i];
		} else if (strcmp(argv[i], "--timeout-ms") == 0 && i + 1 < argc) {
			opts.connect_timeout_ms = opts.io_timeout_ms = atoi(argv[++i]);
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
	if (!cmd || !rank || (strcmp(cmd, "status") && strcmp(cmd, "stats"))) {
		usage(stderr);
		return 2;
	}
	opts.err_buf = err;
	opts.err_len = sizeof(err);
	rc = pprpc_connect(rank, &opts, &c);
	if (rc < 0) {
		fprintf(stderr, "pprpcctl: cannot reach pprpcd at %s: %s\n", rank, err);
		return 1;
	}
	rc = strcmp(cmd, "status") == 0 ? status(c, rank) : stats(c, rank);
	pprpc_close(c);
	return rc;
}
