/* daemon/options.c — command-line flags (see pprpcd --help). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/pprpcd.h"
#include "pprpc_types.h"

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
	o->staging_bytes = 256 * MIB;
	o->log_level = LOG_NOTICE_;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pprpcd [options]\n"
		"  --listen HOST:PORT       address to serve (default 127.0.0.1:50052; port 0 = ephemeral;\n"
		"                           IPv6 as [::1]:PORT)\n"
		"  --port-file FILE         write the bound port to FILE once listening\n"
		"  --devices LIST           devices to serve, comma-separated (default: cpu)\n"
		"  --threads N              CPU device threads (default: all cores)\n"
		"  --memory-floor-mib N     refuse allocations leaving less than N MiB free (default 1536)\n"
		"  --max-bulk-mib N         largest tensor payload per message (default 4096)\n"
		"  --staging-mib N          SEND staging ring (default 256); a SEND stalls only when it is full\n"
		"  --log-level LEVEL        err|warning|notice|info|debug (default notice)\n"
		"  --version                print the version and exit\n"
		"  --help                   this text\n");
}

static int parse_u64(const char *name, const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || !*s || *end || s[0] == '-' || v > max) {
		fprintf(stderr, "pprpcd: %s: '%s' is not a number in 0..%" PRIu64 "\n", name, s, max);
		return PPRPC_EINVAL;
	}
	*out = v;
	return 0;
}

static int copy_str(const char *name, const char *s, char *dst, size_t len)
{
	if (strlen(s) >= len || !*s) {
		fprintf(stderr, "pprpcd: %s: value empty or too long\n", name);
		return PPRPC_EINVAL;
	}
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

enum { O_LISTEN = 256, O_PORT_FILE, O_DEVICES, O_THREADS, O_FLOOR, O_MAX_BULK, O_STAGING, O_LOG, O_VERSION, O_HELP };

int pprpcd_opts_parse(struct pprpcd_opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "port-file", required_argument, NULL, O_PORT_FILE },
		{ "devices", required_argument, NULL, O_DEVICES },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "memory-floor-mib", required_argument, NULL, O_FLOOR },
		{ "max-bulk-mib", required_argument, NULL, O_MAX_BULK },
		{ "staging-mib", required_argument, NULL, O_STAGING },
		{ "log-level", required_argument, NULL, O_LOG },
		{ "version", no_argument, NULL, O_VERSION },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t v;
	int c, rc = 0;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_LISTEN: rc = copy_str("--listen", optarg, o->listen, sizeof(o->listen)); break;
		case O_PORT_FILE: rc = copy_str("--port-file", optarg, o->port_file, sizeof(o->port_file)); break;
		case O_DEVICES: rc = copy_str("--devices", optarg, o->devices, sizeof(o->devices)); break;
		case O_THREADS:
			rc = parse_u64("--threads", optarg, 1024, &v);
			o->threads = (int)v;
			break;
		case O_FLOOR:
			rc = parse_u64("--memory-floor-mib", optarg, UINT64_MAX / MIB, &v);
			o->memory_floor = v * MIB;
			break;
		case O_MAX_BULK:
			rc = parse_u64("--max-bulk-mib", optarg, 1ull << 20, &v);
			if (rc == 0 && v == 0) {
				fprintf(stderr, "pprpcd: --max-bulk-mib must be at least 1\n");
				rc = PPRPC_EINVAL;
			}
			o->max_bulk = v * MIB;
			break;
		case O_STAGING:
			rc = parse_u64("--staging-mib", optarg, 1ull << 20, &v);
			if (rc == 0 && v < 1) {
				fprintf(stderr, "pprpcd: --staging-mib must be at least 1\n");
				rc = PPRPC_EINVAL;
			}
			o->staging_bytes = v * MIB;
			break;
		case O_LOG:
			o->log_level = log_level_parse(optarg);
			if (o->log_level < 0) {
				fprintf(stderr, "pprpcd: --log-level: unknown level '%s'\n", optarg);
				rc = PPRPC_EINVAL;
			}
			break;
		case O_VERSION:
			printf("pprpcd %s (protocol %d)\n", PPRPCD_VERSION, PPRPC_PROTO_VERSION);
			return 1;
		case O_HELP:
			usage(stdout);
			return 1;
		default:
			fprintf(stderr, "pprpcd: unknown or incomplete option '%s'\n", argv[optind - 1]);
			usage(stderr);
			return PPRPC_EINVAL;
		}
		if (rc < 0)
			return rc;
	}
	if (optind < argc) {
		fprintf(stderr, "pprpcd: unexpected argument '%s'\n", argv[optind]);
		return PPRPC_EINVAL;
	}
	return 0;
}
