/*
 * ggml-pprpc/dump.c — PPRPC_DUMP_GRAPHS=DIR: each graph the plugin creates on
 * a rank is also written to DIR, as the packed GgmlGraphCreate it sends
 * (one file per graph: <pid>-<device>-<n>.pb).  These are llama.cpp's real
 * graphs, the seeds of the ggml engine's fuzzer (tests/fuzz/seed-ggml-graphs.sh).
 * A failed write is reported once and otherwise ignored: dumping must never
 * change what the tool computes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pg.h"

void pg_dump_graph(const struct pg_device *d, const uint8_t *msg, size_t len)
{
	static unsigned long seq;
	static int warned;
	const char *dir = getenv("PPRPC_DUMP_GRAPHS");
	char path[512];
	FILE *f;

	if (!dir || !*dir)
		return;
	snprintf(path, sizeof(path), "%s/%ld-%s-%lu.pb", dir, (long)getpid(), d->name, seq++);
	f = fopen(path, "wb");
	if (!f || fwrite(msg, 1, len, f) != len) {
		if (!warned++)
			PG_LOG_WARN("pprpc: PPRPC_DUMP_GRAPHS: cannot write %s\n", path);
	}
	if (f)
		fclose(f);
}
