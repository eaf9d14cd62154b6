/*
 * Integration: pprpcctl against two real daemons that moved a boundary
 * daemon to daemon (so devices, connections, a peer link and boundary
 * counters all exist).  `stats --json` and `status --json`, for one rank
 * and for a cluster file, must be valid JSON (checked by python3's parser)
 * and carry every counter the text output shows — the GPU-wait, signal,
 * capture and replay counters included — with the values of the library's
 * own snapshot.  The text output names the same counters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pprpc.h"
#include "tests/integration/harness.h"

struct ctl {
	struct tdaemon a, b;
	char cluster[64];
};

/* A 64 KiB boundary A -> B and a graph-free FENCE on each. */
static void move_boundary(const struct ctl *x)
{
	pprpc_client *ca, *cb;
	pprpc_buffer ba, bb;

	assert_int_equal(pprpc_connect(x->a.addr, NULL, &ca), 0);
	assert_int_equal(pprpc_connect(x->b.addr, NULL, &cb), 0);
	assert_int_equal(pprpc_buffer_alloc(ca, 0, 65536, &ba), 0);
	assert_int_equal(pprpc_buffer_alloc(cb, 0, 65536, &bb), 0);
	assert_int_equal(pprpc_recv_async(cb, bb, 0, 65536, 7, x->a.addr), 0);
	assert_int_equal(pprpc_send_async(ca, ba, 0, 65536, 7, x->b.addr), 0);
	assert_int_equal(pprpc_synchronize(ca, 0), 0);
	assert_int_equal(pprpc_synchronize(cb, 0), 0);
	pprpc_close(ca);
	pprpc_close(cb);
}

static int setup(void **state)
{
	struct ctl *x = calloc(1, sizeof(*x));
	FILE *f;
	int fd;

	if (!x || tdaemon_start(&x->a, NULL) < 0 || tdaemon_start(&x->b, NULL) < 0)
		return -1;
	snprintf(x->cluster, sizeof(x->cluster), "/tmp/pprpc-ctl-XXXXXX");
	if ((fd = mkstemp(x->cluster)) < 0 || !(f = fdopen(fd, "w")))
		return -1;
	fprintf(f, "# two ranks\nr0 %s cpu\nr1 %s cpu\n", x->a.addr, x->b.addr);
	fclose(f);
	move_boundary(x);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct ctl *x = *state;

	unlink(x->cluster);
	tdaemon_stop(&x->a);
	tdaemon_stop(&x->b);
	free(x);
	return 0;
}

/* The checker: reads pprpcctl's JSON on stdin, fails (exit 1, with the
 * parser's or the assertion's message) unless it is valid and complete.
 * argv: the number of rank objects, then "where:key ..." lists ("." for
 * the rank object itself, else a list every item of which has the keys). */
static const char checker[] =
	"import json, sys\n"
	"d = json.load(sys.stdin)\n"
	"ranks = d if isinstance(d, list) else [d]\n"
	"assert len(ranks) == int(sys.argv[1]), 'ranks: %d' % len(ranks)\n"
	"for r in ranks:\n"
	"    for spec in sys.argv[2:]:\n"
	"        where, keys = spec.split(':')\n"
	"        objs = [r] if where == '.' else r[where]\n"
	"        assert len(objs) >= 1, 'no %s' % where\n"
	"        for o in objs:\n"
	"            for k in keys.split():\n"
	"                assert k in o, '%s has no %s' % (where, k)\n"
	"    for dev in r.get('devices', []):\n"
	"        assert dev.get('info', dev)['name'] == 'cpu', dev\n"
	"print('json ok: %d rank(s)' % len(ranks))\n";

/* Run `pprpcctl ARGS | python3 checker N SPECS...`; returns the pipeline's
 * status (pipefail: a failing pprpcctl counts too). */
static int ctl_check(const char *args, const char *n_and_specs)
{
	const char *bindir = getenv("BINDIR") ? getenv("BINDIR") : "build/bin";
	char py[] = "/tmp/pprpc-ctl-check-XXXXXX", cmd[4096];
	FILE *f;
	int fd, st;

	assert_true((fd = mkstemp(py)) >= 0);
	assert_non_null(f = fdopen(fd, "w"));
	fputs(checker, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "bash -o pipefail -c '%s/pprpcctl %s | python3 %s %s'", bindir, args, py,
		 n_and_specs);
	fprintf(stderr, "$ %s\n", cmd);
	st = system(cmd);
	unlink(py);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

#define TOP "\".:rank daemon_version uptime_ms requests request_errors protocol_errors connections_total " \
	    "staging_bytes staging_used rdma_status devices connections links boundaries\""
#define DEV "\"devices:info buffers allocated_bytes queue_depth commands errors graph_creates graph_runs " \
	    "graph_captures graph_replays gpu_waits gpu_signals async_status ipc_status ipc_pool_bytes " \
	    "gdn_serial gdn_chunked gdn_fallback gdn_ggml_off gdn_ggml_gate\""
#define CONN "\"connections:peer transport role bytes_in bytes_out frames_in frames_out errors\""

static void test_stats_json(void **state)
{
	struct ctl *x = *state;
	char args[512];

	/* The receiver: it has the boundary and the peer link. */
	snprintf(args, sizeof(args), "stats --json --rank %s", x->b.addr);
	assert_int_equal(ctl_check(args, "1 " TOP " " DEV " " CONN
				   " \"boundaries:peer direction path transfers bytes time_us errors copy_us ipc_bytes\""
				   " \"links:peer transport bytes_in bytes_out\""), 0);
	/* The cluster: an array of both ranks. */
	snprintf(args, sizeof(args), "stats --json --cluster %s", x->cluster);
	assert_int_equal(ctl_check(args, "2 " TOP " " DEV " " CONN), 0);
}

static void test_status_json(void **state)
{
	struct ctl *x = *state;
	char args[512];

	snprintf(args, sizeof(args), "status --json --cluster %s", x->cluster);
	assert_int_equal(ctl_check(args, "2 \".:rank version caps placement devices\""), 0);
	snprintf(args, sizeof(args), "status --json --rank %s", x->a.addr);
	assert_int_equal(ctl_check(args, "1 \".:rank version caps placement devices\""), 0);
}

/* The JSON and the library's snapshot agree on a counter (graph-free
 * daemon: 0 GPU waits/signals/captures/replays on the CPU device; commands
 * counted), and the text output prints the same counters. */
static void test_text_and_values(void **state)
{
	struct ctl *x = *state;
	const char *bindir = getenv("BINDIR") ? getenv("BINDIR") : "build/bin";
	pprpc_client *c;
	pprpc_stats *s;
	char cmd[512], out[8192];
	size_t n;
	FILE *p;

	assert_int_equal(pprpc_connect(x->b.addr, NULL, &c), 0);
	assert_int_equal(pprpc_stats_get(c, &s), 0);
	assert_int_equal(pprpc_stats_count(s, "devices"), 1);
	assert_string_equal(pprpc_stats_str(s, "devices", 0, "info.name"), "cpu");
	assert_true(pprpc_stats_u64(s, "devices", 0, "commands") >= 2);   /* the RECV and the FENCE */
	assert_true(pprpc_stats_count(s, "boundaries") >= 1);
	assert_true(pprpc_stats_count(s, "links") >= 1);
	pprpc_stats_free(s);
	pprpc_close(c);

	snprintf(cmd, sizeof(cmd), "%s/pprpcctl stats --rank %s", bindir, x->b.addr);
	assert_non_null(p = popen(cmd, "r"));
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	assert_int_equal(pclose(p), 0);
	assert_non_null(strstr(out, "graph runs 0 (captures 0, replays 0)"));
	assert_non_null(strstr(out, "link "));
	assert_non_null(strstr(out, "p2p-tcp"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stats_json),
		cmocka_unit_test(test_status_json),
		cmocka_unit_test(test_text_and_values),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
