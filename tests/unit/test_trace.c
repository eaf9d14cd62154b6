/* Unit tests: the request trace (daemon/core/trace.h) — off by default and
 * then writing nothing; on, the header, the lines and the drop count; the
 * per-thread phase marks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pthread.h>

#include <cmocka.h>

#include "daemon/core/core_impl.h"
#include "daemon/core/trace.h"
#include "daemon/server/options.h"
#include "daemon/pprpcd.h"
#include "pprpc.h"
#include "pprpc/types.h"
#include "proto/msgtype.h"

static char *slurp(const char *path)
{
	static char buf[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static void who(const struct conn *c, uint64_t *ret_id, int *ret_peer)
{
	(void)c;
	*ret_id = 7;
	*ret_peer = 1;
}

static void test_off_by_default(void **state)
{
	struct pprpcd_opts o;
	struct pprpcd d;
	char err[256];

	(void)state;
	pprpcd_opts_default(&o);
	assert_string_equal(o.trace_file, "");
	assert_int_equal(pprpcd_config_parse(&o, "t.conf", "trace_file = /tmp/x.trace\n", 25, err, sizeof(err)), 0);
	assert_string_equal(o.trace_file, "/tmp/x.trace");
	/* off: no trace, and recording touches nothing (no ops, no file) */
	memset(&d, 0, sizeof(d));
	trace_req(&d, NULL, MSG_GRAPH_RUN, 1, TRACE_ARRIVE, 1);
	trace_close(NULL);
	trace_flush(NULL);
}

/* A daemon context tracing into a fresh temporary file (path: a mkstemp
 * template, filled in). */
static void open_trace(struct pprpcd *d, struct core_ops *ops, char *path)
{
	char err[256];
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	memset(d, 0, sizeof(*d));
	*ops = core_stub_ops;
	ops->conn_trace_who = who;
	d->ops = ops;
	assert_int_equal(trace_open(path, "127.0.0.1:5", &d->trace, err, sizeof(err)), 0);
}

static void *mark_in_thread(void *arg)
{
	uint64_t *m = arg;

	trace_mark(TRACE_MARK_LAUNCHED);
	trace_marks_take(m);
	return NULL;
}

/* Phase marks: nothing before any trace is open (free when off); then the
 * calling thread's marks, taken once and cleared, and never another
 * thread's; their events have names in the file. */
static void test_marks(void **state)
{
	uint64_t m[TRACE_MARKS], other[TRACE_MARKS];
	char path[] = "/tmp/pprpc-test-trace-XXXXXX";
	struct core_ops ops;
	struct pprpcd d;
	pthread_t th;

	(void)state;
	trace_mark(TRACE_MARK_READY);
	trace_marks_take(m);
	assert_int_equal(m[TRACE_MARK_READY], 0);
	open_trace(&d, &ops, path);
	trace_mark(TRACE_MARK_READY);
	assert_int_equal(pthread_create(&th, NULL, mark_in_thread, other), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_true(other[TRACE_MARK_LAUNCHED] > 0);
	assert_int_equal(other[TRACE_MARK_READY], 0);
	trace_marks_take(m);
	assert_true(m[TRACE_MARK_READY] > 0);
	assert_int_equal(m[TRACE_MARK_LAUNCHED], 0);
	trace_marks_take(m);
	assert_int_equal(m[TRACE_MARK_READY], 0);
	trace_req(&d, NULL, MSG_GRAPH_RUN, 9, TRACE_EXEC_READY, 1500);
	trace_req(&d, NULL, MSG_GRAPH_RUN, 9, TRACE_EXEC_LAUNCHED, 1600);
	trace_close(d.trace);
	assert_non_null(strstr(slurp(path), "\n1500 "));
	assert_non_null(strstr(slurp(path), " c7 peer GRAPH_RUN 9 exec_ready\n"));
	assert_non_null(strstr(slurp(path), " c7 peer GRAPH_RUN 9 exec_launched\n"));
	unlink(path);
}

static void test_lines(void **state)
{
	struct core_ops ops;
	struct pprpcd d;
	char path[] = "/tmp/pprpc-test-trace-XXXXXX", err[256];
	char *text;

	(void)state;
	open_trace(&d, &ops, path);
	trace_req(&d, NULL, MSG_GRAPH_RUN, 42, TRACE_EXEC_START, 1000);
	trace_req(&d, NULL, MSG_GRAPH_RUN, 42, TRACE_EXEC_END, 2000);
	trace_close(d.trace);
	text = slurp(path);
	assert_non_null(strstr(text, "# pprpcd trace v1 pid "));
	assert_non_null(strstr(text, " listen 127.0.0.1:5\n"));
	assert_non_null(strstr(text, "\n1000 "));
	assert_non_null(strstr(text, " c7 peer GRAPH_RUN 42 exec_start\n"));
	assert_non_null(strstr(text, " c7 peer GRAPH_RUN 42 exec_end\n"));
	assert_non_null(strstr(text, "# end: 0 records dropped\n"));
	unlink(path);
	/* a path that cannot be created is an error naming it */
	assert_true(trace_open("/nonexistent-dir/x", "a:1", &d.trace, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "/nonexistent-dir/x"));
}

/* The client's half (libclient/trace.c): PATH.PID with its header and the
 * caller's lines; a path that cannot be created is PPRPC_EINVAL, as
 * pprpc.h says (a missing folder's ENOENT once read as out of memory). */
static void test_client_trace(void **state)
{
	char path[] = "/tmp/pprpc-test-ctrace-XXXXXX", name[64];
	pprpc_trace *t = NULL;
	int fd;

	(void)state;
	assert_int_equal(pprpc_trace_open("/nonexistent-dir/x", &t), PPRPC_EINVAL);
	assert_null(t);
	assert_int_equal(pprpc_trace_open("", &t), PPRPC_EINVAL);
	assert_int_equal(pprpc_trace_open(NULL, &t), PPRPC_EINVAL);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(pprpc_trace_open(path, &t), 0);
	pprpc_trace_event(t, "127.0.0.1:5", "GRAPH_COMPUTE", 3, "graph_start", "nodes=7 ne1=1");
	pprpc_trace_close(t);
	snprintf(name, sizeof(name), "%s.%ld", path, (long)getpid());
	assert_non_null(strstr(slurp(name), "# pprpc client trace v1 pid "));
	assert_non_null(strstr(slurp(name), " 127.0.0.1:5 client GRAPH_COMPUTE 3 graph_start nodes=7 ne1=1\n"));
	unlink(name);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off_by_default),
		cmocka_unit_test(test_marks),
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_client_trace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
