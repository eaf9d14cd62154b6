/*
 * Integration: the pipeline helper (pprpc_pipeline_*) on real daemons
 * (plans for a ragged last micro-batch included), and the pp-fence-test
 * tool (2 and 3 spawned ranks, ragged ubatches, its negative control).
 *
 * Stage s computes y = x * 2 + (s + 1) on N floats: exact in f32 for the
 * small integers used, so every boundary has one right answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pprpc.h"
#include "pprpc_graph.h"
#include "pprpc_pipeline.h"
#include "libclient/pipeline_hooks.h"
#include "tests/integration/harness.h"

enum { N = 4096, MAXM = 9, MAXS = 3 };

static struct tdaemon g_d[2];

static int setup(void **state)
{
	(void)state;
	for (int i = 0; i < 2; i++)
		if (tdaemon_start(&g_d[i], NULL) < 0)
			return -1;
	return 0;
}

static int teardown(void **state)
{
	int bad = 0;

	(void)state;
	for (int i = 0; i < 2; i++)
		bad |= tdaemon_stop(&g_d[i]) != 0;
	return bad ? -1 : 0;
}

static pprpc_client *connect_ok(const struct tdaemon *d)
{
	pprpc_client *c = NULL;
	char err[256] = "";
	pprpc_connect_opts o = { .client_name = "test_pipeline", .err_buf = err, .err_len = sizeof(err) };
	int rc = pprpc_connect(d->addr, &o, &c);

	if (rc < 0)
		fprintf(stderr, "connect %s: %s\n", d->addr, err);
	assert_int_equal(rc, 0);
	return c;
}

static float stage_bias(int s)
{
	return (float)(s + 1);
}

/* Buffers and the two slot graphs of stage s on client c. */
static void make_stage(pprpc_client *c, const char *rank, int s, pprpc_stage *st)
{
	memset(st, 0, sizeof(*st));
	st->client = c;
	st->rank = rank;
	st->in_bytes = st->out_bytes = N * 4;
	for (int k = 0; k < 2; k++) {
		pprpc_graph_builder *gb;
		pprpc_tensor ti, to;
		int ii, io;

		assert_int_equal(pprpc_buffer_alloc(c, 0, N * 4, &st->in_buf[k]), 0);
		assert_int_equal(pprpc_buffer_alloc(c, 0, N * 4, &st->out_buf[k]), 0);
		ti = pprpc_tensor_make(st->in_buf[k], 0, PPRPC_F32, N, 1, 1, 1);
		to = pprpc_tensor_make(st->out_buf[k], 0, PPRPC_F32, N, 1, 1, 1);
		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		ii = pprpc_gb_tensor(gb, &ti);
		io = pprpc_gb_tensor(gb, &to);
		assert_true(pprpc_gb_scale(gb, ii, 2.0f, stage_bias(s), io) >= 0);
		assert_int_equal(pprpc_graph_create(c, 0, gb, &st->graph[k]), 0);
		pprpc_graph_builder_free(gb);
	}
}

static float g_in[MAXM][N], g_out[MAXM][N];
static const void *g_inp[MAXM];
static void *g_outp[MAXM];

static void make_inputs(int M, int salt)
{
	for (int m = 0; m < M; m++) {
		for (int i = 0; i < N; i++)
			g_in[m][i] = (float)((i * 7 + m * 131 + salt) % 1000);
		memset(g_out[m], 0, sizeof(g_out[m]));
		g_inp[m] = g_in[m];
		g_outp[m] = g_out[m];
	}
}

static float expect_after(int S, float x)
{
	for (int s = 0; s < S; s++)
		x = x * 2.0f + stage_bias(s);
	return x;
}

/* 1 if every output is right. */
static int outputs_ok(int S, int M)
{
	for (int m = 0; m < M; m++)
		for (int i = 0; i < N; i++)
			if (g_out[m][i] != expect_after(S, g_in[m][i]))
				return 0;
	return 1;
}

struct seen {
	int S, count[MAXS][MAXM], bad_data;
};

static void observe(void *arg, const pprpc_pipeline_event *ev)
{
	struct seen *sn = arg;
	const float *d = ev->data;

	assert_in_range(ev->stage, 0, sn->S - 1);
	assert_in_range(ev->micro, 0, MAXM - 1);
	assert_int_equal(ev->slot, ev->micro % 2);
	assert_true(ev->done_ns >= ev->issue_ns);
	assert_int_equal(ev->bytes, N * 4);
	sn->count[ev->stage][ev->micro]++;
	for (int i = 0; i < N; i++)
		if (d[i] != expect_after(ev->stage + 1, g_in[ev->micro][i]))
			sn->bad_data++;
}

static void two_ranks(int transfer)
{
	pprpc_client *c[2] = { connect_ok(&g_d[0]), connect_ok(&g_d[1]) };
	pprpc_stage st[2];
	pprpc_pipeline *p = NULL;
	struct seen sn;
	pprpc_pipeline_opts o = { .observe = observe, .observe_arg = &sn, .transfer = transfer };
	const char *why = NULL;

	for (int s = 0; s < 2; s++)
		make_stage(c[s], g_d[s].addr, s, &st[s]);
	memset(&sn, 0, sizeof(sn));
	sn.S = 2;
	assert_int_equal(pprpc_pipeline_create(st, 2, &o, &p), 0);
	assert_string_equal(pprpc_pipeline_error(p), "");
	assert_string_equal(pprpc_pipeline_transfer(p, &why),
			    transfer == PPRPC_TRANSFER_P2P ? "p2p" : "client");
	/* Several runs on one pipeline (timeline values keep increasing), odd
	 * and even M, M below the pipeline depth. */
	static const int Ms[] = { 5, 8, 1, 2, 9 };
	for (size_t r = 0; r < sizeof(Ms) / sizeof(Ms[0]); r++) {
		int M = Ms[r];

		memset(&sn, 0, sizeof(sn));
		sn.S = 2;
		make_inputs(M, (int)r);
		assert_int_equal(pprpc_pipeline_run(p, M, g_inp, g_outp), 0);
		assert_true(outputs_ok(2, M));
		/* On the p2p path only the last stage's outputs reach us. */
		for (int s = 0; s < 2; s++)
			for (int m = 0; m < M; m++)
				assert_int_equal(sn.count[s][m], transfer == PPRPC_TRANSFER_P2P && s == 0 ? 0 : 1);
		assert_int_equal(sn.bad_data, 0);
	}
	if (transfer == PPRPC_TRANSFER_P2P)
		assert_int_equal(pprpc_pipeline_client_bytes(p), 0);
	else
		assert_true(pprpc_pipeline_client_bytes(p) > 0);
	assert_int_equal(pprpc_pipeline_run(p, 0, NULL, NULL), 0);
	assert_int_equal(pprpc_pipeline_run(p, -1, g_inp, g_outp), PPRPC_EINVAL);
	/* The queues are clean afterwards. */
	assert_int_equal(pprpc_synchronize(c[0], 0), 0);
	assert_int_equal(pprpc_synchronize(c[1], 0), 0);
	pprpc_pipeline_free(p);
	pprpc_close(c[0]);
	pprpc_close(c[1]);
}

static void test_two_ranks(void **state)
{
	(void)state;
	two_ranks(PPRPC_TRANSFER_P2P);
	two_ranks(PPRPC_TRANSFER_CLIENT);
}

/* ---- plans: ragged micro-batches ------------------------------------------------------- */

enum { R = N / 4 + 3 };   /* floats in the ragged last micro-batch */

/* The tail graphs of a stage: the same op on the first R floats of each
 * slot's buffers. */
static void make_tail(pprpc_client *c, int s, const pprpc_stage *st, pprpc_graph tail[2])
{
	for (int k = 0; k < 2; k++) {
		pprpc_graph_builder *gb;
		pprpc_tensor ti = pprpc_tensor_make(st->in_buf[k], 0, PPRPC_F32, R, 1, 1, 1);
		pprpc_tensor to = pprpc_tensor_make(st->out_buf[k], 0, PPRPC_F32, R, 1, 1, 1);
		int ii, io;

		assert_int_equal(pprpc_graph_builder_new(&gb), 0);
		ii = pprpc_gb_tensor(gb, &ti);
		io = pprpc_gb_tensor(gb, &to);
		assert_true(pprpc_gb_scale(gb, ii, 2.0f, stage_bias(s), io) >= 0);
		assert_int_equal(pprpc_graph_create(c, 0, gb, &tail[k]), 0);
		pprpc_graph_builder_free(gb);
	}
}

struct ragged {
	int M, mode;              /* mode 0: the last micro-batch ragged; 1: too big; 2: not chained */
	pprpc_graph tail[MAXS][2];
	int calls, events[MAXS][MAXM], polled;
	uint64_t bytes[MAXS][MAXM];
};

static int plan_ragged(void *arg, int stage, int micro, int slot, pprpc_micro_plan *pl)
{
	struct ragged *g = arg;

	g->calls++;
	assert_int_equal(pl->in_bytes, N * 4);   /* the defaults come first */
	assert_true(pl->graph.id != 0);
	if (micro != g->M - 1)
		return 0;
	pl->graph = g->tail[stage][slot];
	pl->in_bytes = pl->out_bytes = R * 4;
	if (g->mode == 1 && stage == 1)
		pl->out_bytes = N * 4 + 4;
	if (g->mode == 2 && stage == 1)
		pl->in_bytes = R * 4 + 4;
	return 0;
}

static void observe_ragged(void *arg, const pprpc_pipeline_event *ev)
{
	struct ragged *g = arg;

	g->events[ev->stage][ev->micro]++;
	g->bytes[ev->stage][ev->micro] = ev->bytes;
	g->polled += !ev->data;
	assert_true(ev->done_ns >= ev->issue_ns);
}

static void ragged(int transfer)
{
	pprpc_client *c[2] = { connect_ok(&g_d[0]), connect_ok(&g_d[1]) };
	pprpc_stage st[2];
	pprpc_pipeline *p = NULL;
	struct ragged g;
	pprpc_pipeline_opts o = { .transfer = transfer, .plan = plan_ragged, .plan_arg = &g,
				  .observe = observe_ragged, .observe_arg = &g, .observe_poll_us = 200 };
	const int M = 5;

	memset(&g, 0, sizeof(g));
	g.M = M;
	for (int s = 0; s < 2; s++) {
		make_stage(c[s], g_d[s].addr, s, &st[s]);
		make_tail(c[s], s, &st[s], g.tail[s]);
	}
	assert_int_equal(pprpc_pipeline_create(st, 2, &o, &p), 0);
	make_inputs(M, 11);
	for (int i = R; i < N; i++)
		g_out[M - 1][i] = -1.0f;
	assert_int_equal(pprpc_pipeline_run(p, M, g_inp, g_outp), 0);
	assert_int_equal(g.calls, 2 * M);
	for (int m = 0; m < M; m++)
		for (int i = 0; i < (m == M - 1 ? R : N); i++)
			assert_true(g_out[m][i] == expect_after(2, g_in[m][i]));
	/* only the ragged part came back */
	for (int i = R; i < N; i++)
		assert_true(g_out[M - 1][i] == -1.0f);
	/* every stage reported every micro-batch with its size (on p2p, stage
	 * 0 through the poll of its timeline) */
	for (int s = 0; s < 2; s++)
		for (int m = 0; m < M; m++) {
			assert_int_equal(g.events[s][m], 1);
			assert_int_equal(g.bytes[s][m], m == M - 1 ? R * 4 : N * 4);
		}
	assert_int_equal(g.polled, transfer == PPRPC_TRANSFER_P2P ? M : 0);

	/* Plans that do not fit or do not chain refuse the run before anything
	 * is queued; the pipeline runs again afterwards. */
	for (g.mode = 1; g.mode <= 2; g.mode++) {
		assert_int_equal(pprpc_pipeline_run(p, M, g_inp, g_outp), PPRPC_EINVAL);
		fprintf(stderr, "(expected) %s\n", pprpc_pipeline_error(p));
		assert_non_null(strstr(pprpc_pipeline_error(p), g.mode == 1 ? "outside" : "!="));
	}
	g.mode = 0;
	make_inputs(M, 12);
	assert_int_equal(pprpc_pipeline_run(p, M, g_inp, g_outp), 0);
	assert_true(g_out[M - 1][R - 1] == expect_after(2, g_in[M - 1][R - 1]));
	assert_int_equal(pprpc_synchronize(c[0], 0), 0);
	assert_int_equal(pprpc_synchronize(c[1], 0), 0);
	pprpc_pipeline_free(p);
	pprpc_close(c[0]);
	pprpc_close(c[1]);
}

static void test_ragged_plan(void **state)
{
	(void)state;
	ragged(PPRPC_TRANSFER_P2P);
	ragged(PPRPC_TRANSFER_CLIENT);
}

/* PPRPC_P2P=0, and daemons that cannot reach each other, fall back to the
 * client path and say why. */
static void test_fallback(void **state)
{
	pprpc_client *c[2] = { connect_ok(&g_d[0]), connect_ok(&g_d[1]) };
	pprpc_stage st[2];
	pprpc_pipeline *p = NULL;
	const char *why = NULL;

	(void)state;
	for (int s = 0; s < 2; s++)
		make_stage(c[s], g_d[s].addr, s, &st[s]);
	setenv("PPRPC_P2P", "0", 1);
	assert_int_equal(pprpc_pipeline_create(st, 2, NULL, &p), 0);
	unsetenv("PPRPC_P2P");
	assert_string_equal(pprpc_pipeline_transfer(p, &why), "client");
	assert_non_null(strstr(why, "PPRPC_P2P=0"));
	pprpc_pipeline_free(p);
	/* Stage 0 named by an address stage 1's daemon cannot reach. */
	st[0].rank = "127.0.0.1:1";
	assert_int_equal(pprpc_pipeline_create(st, 2, NULL, &p), 0);
	assert_string_equal(pprpc_pipeline_transfer(p, &why), "client");
	assert_non_null(strstr(why, "cannot reach"));
	make_inputs(4, 3);
	assert_int_equal(pprpc_pipeline_run(p, 4, g_inp, g_outp), 0);
	assert_true(outputs_ok(2, 4));
	pprpc_pipeline_free(p);
	pprpc_close(c[0]);
	pprpc_close(c[1]);
}

/* Three stages: 0 and 1 share daemon A (one client: local waits), 2 on B. */
static void test_three_stages_shared_rank(void **state)
{
	pprpc_client *a = connect_ok(&g_d[0]), *b = connect_ok(&g_d[1]);
	pprpc_stage st[3];
	pprpc_pipeline *p = NULL;

	(void)state;
	make_stage(a, g_d[0].addr, 0, &st[0]);
	make_stage(a, g_d[0].addr, 1, &st[1]);
	make_stage(b, g_d[1].addr, 2, &st[2]);
	assert_int_equal(pprpc_pipeline_create(st, 3, NULL, &p), 0);
	for (int r = 0; r < 2; r++) {
		make_inputs(7, 40 + r);
		assert_int_equal(pprpc_pipeline_run(p, 7, g_inp, g_outp), 0);
		assert_true(outputs_ok(3, 7));
	}
	pprpc_pipeline_free(p);
	pprpc_close(a);
	pprpc_close(b);
}

/* The test hook really produces wrong boundaries (the negative control
 * depends on it). */
static void test_unsafe_hook_corrupts(void **state)
{
	pprpc_client *c[2] = { connect_ok(&g_d[0]), connect_ok(&g_d[1]) };
	pprpc_stage st[2];
	pprpc_pipeline *p = NULL;
	int wrong = 0;

	(void)state;
	for (int s = 0; s < 2; s++)
		make_stage(c[s], g_d[s].addr, s, &st[s]);
	assert_int_equal(pprpc_pipeline_create(st, 2, NULL, &p), 0);
	pipeline_hook_skip_war_wait(p, 1);
	make_inputs(6, 3);
	assert_int_equal(pprpc_pipeline_run(p, 6, g_inp, g_outp), 0);
	for (int m = 0; m < 6; m++)
		wrong += g_out[m][0] != expect_after(2, g_in[m][0]);
	assert_true(wrong >= 4);
	pprpc_pipeline_free(p);
	pprpc_close(c[0]);
	pprpc_close(c[1]);
}

/* A failing queued command: the run returns its code, the error names the
 * stage and the call, no queue is left blocked or failed, and the clients
 * work afterwards. */
static void test_errors(void **state)
{
	pprpc_client *c[2] = { connect_ok(&g_d[0]), connect_ok(&g_d[1]) };
	pprpc_stage st[2], bad[2];
	pprpc_pipeline *p = NULL, *ok = NULL;
	const char *e;

	(void)state;
	for (int s = 0; s < 2; s++)
		make_stage(c[s], g_d[s].addr, s, &st[s]);
	memcpy(bad, st, sizeof(st));
	/* Stage 1's slot-1 graph is gone: micro-batch 1 fails there while
	 * stage 0 keeps going and stage 0's later WAITs depend on stage 1. */
	make_stage(c[1], g_d[1].addr, 1, &bad[1]);
	assert_int_equal(pprpc_graph_free(c[1], bad[1].graph[1]), 0);
	assert_int_equal(pprpc_pipeline_create(bad, 2, NULL, &p), 0);
	for (int r = 0; r < 2; r++) {
		make_inputs(6, r);
		assert_int_equal(pprpc_pipeline_run(p, 6, g_inp, g_outp), PPRPC_EHANDLE);
		e = pprpc_pipeline_error(p);
		fprintf(stderr, "(expected) %s\n", e);
		assert_non_null(strstr(e, "stage 1"));
		assert_non_null(strstr(e, "GRAPH_RUN"));
		assert_non_null(strstr(e, "unknown graph handle"));
	}
	assert_int_equal(pprpc_synchronize(c[0], 0), 0);
	assert_int_equal(pprpc_synchronize(c[1], 0), 0);
	/* A good pipeline on the same clients runs. */
	assert_int_equal(pprpc_pipeline_create(st, 2, NULL, &ok), 0);
	make_inputs(4, 9);
	assert_int_equal(pprpc_pipeline_run(ok, 4, g_inp, g_outp), 0);
	assert_true(outputs_ok(2, 4));
	pprpc_pipeline_free(ok);
	pprpc_pipeline_free(p);

	/* Creation checks. */
	memcpy(bad, st, sizeof(st));
	bad[1].in_bytes = N * 2;
	assert_int_equal(pprpc_pipeline_create(bad, 2, NULL, &p), PPRPC_EINVAL);
	memcpy(bad, st, sizeof(st));
	bad[1].rank = NULL;
	assert_int_equal(pprpc_pipeline_create(bad, 2, NULL, &p), PPRPC_EINVAL);
	assert_int_equal(pprpc_pipeline_create(st, 0, NULL, &p), PPRPC_EINVAL);
	assert_int_equal(pprpc_pipeline_create(NULL, 2, NULL, &p), PPRPC_EINVAL);
	pprpc_pipeline_free(NULL);

	/* A lost rank: the run fails with a connection error naming stage 1,
	 * and does not hang. */
	{
		struct tdaemon d3;
		pprpc_client *c3;
		pprpc_stage s3[2];

		assert_int_equal(tdaemon_start(&d3, NULL), 0);
		c3 = connect_ok(&d3);
		s3[0] = st[0];
		make_stage(c3, d3.addr, 1, &s3[1]);
		assert_int_equal(pprpc_pipeline_create(s3, 2, NULL, &p), 0);
		make_inputs(4, 1);
		assert_int_equal(pprpc_pipeline_run(p, 4, g_inp, g_outp), 0);
		assert_true(outputs_ok(2, 4));
		assert_int_equal(tdaemon_stop(&d3), 0);
		assert_true(pprpc_pipeline_run(p, 4, g_inp, g_outp) < 0);
		e = pprpc_pipeline_error(p);
		fprintf(stderr, "(expected) %s\n", e);
		assert_non_null(strstr(e, "stage 1"));
		pprpc_pipeline_free(p);
		pprpc_close(c3);
		/* Stage 0's queue is usable again. */
		assert_int_equal(pprpc_synchronize(c[0], 0), 0);
	}
	pprpc_close(c[0]);
	pprpc_close(c[1]);
}

/* ---- pp-fence-test ----------------------------------------------------------- */

static int run_tool(const char *args, const char *json)
{
	const char *bindir = getenv("BINDIR") ? getenv("BINDIR") : "build/bin";
	char cmd[1024];
	int st;

	snprintf(cmd, sizeof(cmd), "%s/pp-fence-test %s --json %s", bindir, args, json);
	fprintf(stderr, "$ %s\n", cmd);
	st = system(cmd);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 65536);

	assert_non_null(f);
	assert_non_null(buf);
	assert_true(fread(buf, 1, 65535, f) > 0);
	fclose(f);
	return buf;
}

static void tool_ok_transfer(const char *spawn, const char *transfer)
{
	char json[] = "/tmp/pp-fence-test-XXXXXX", trace[64], args[256];
	int fd = mkstemp(json);
	char *j, *t;

	assert_true(fd >= 0);
	close(fd);
	snprintf(trace, sizeof(trace), "%s.trace", json);
	snprintf(args, sizeof(args), "%s --ubatches 4 --tokens 64,128 --width 32 --repeat 1 --trace %s --transfer %s",
		 spawn, trace, transfer);
	assert_int_equal(run_tool(args, json), 0);
	j = slurp(json);
	assert_non_null(strstr(j, "\"parity\": true"));
	assert_non_null(strstr(j, "\"rpc_errors\": 0"));
	assert_non_null(strstr(j, "\"sentinel_failures\": 0"));
	assert_non_null(strstr(j, "\"ubatches\": 4"));
	assert_non_null(strstr(j, "\"tokens\": 128"));
	assert_non_null(strstr(j, "\"ideal\":"));
	if (!strcmp(transfer, "p2p")) {
		/* Boundaries went daemon to daemon: none passed through the tool. */
		assert_non_null(strstr(j, "\"transfer\": \"p2p\""));
		assert_non_null(strstr(j, "\"client_boundary_bytes\": 0,"));
	} else {
		assert_non_null(strstr(j, "\"transfer\": \"client\""));
		assert_null(strstr(j, "\"client_boundary_bytes\": 0,"));
	}
	t = slurp(trace);
	assert_non_null(strstr(t, "\"traceEvents\""));
	assert_non_null(strstr(t, "\"ph\":\"X\""));
	assert_non_null(strstr(t, "\"name\":\"RUN\""));
	assert_non_null(strstr(t, "\"name\":\"ub 3\""));
	free(j);
	free(t);
	unlink(json);
	unlink(trace);
}

static void tool_ok(const char *spawn)
{
	tool_ok_transfer(spawn, "p2p");
	tool_ok_transfer(spawn, "client");
}

static void test_tool_two_ranks(void **state)
{
	(void)state;
	tool_ok("--spawn 2");
	{
		char j[] = "/tmp/pp-fence-test-XXXXXX", *s;
		int fd = mkstemp(j);

		close(fd);
		assert_int_equal(run_tool("--spawn 2 --ubatches 4 --tokens 64 --width 32 --repeat 1", j), 0);
		s = slurp(j);
		assert_non_null(strstr(s, "\"stages\": 2"));
		free(s);
		unlink(j);
	}
}

static void test_tool_three_ranks(void **state)
{
	char ranks[256];

	(void)state;
	tool_ok("--spawn 3");
	/* Running daemons given by address. */
	snprintf(ranks, sizeof(ranks), "--ranks %s,%s --layers-per-stage 3", g_d[0].addr, g_d[1].addr);
	tool_ok(ranks);
}

/* The negative control must be caught. */
static void test_tool_negative_control(void **state)
{
	char json[] = "/tmp/pp-fence-test-XXXXXX";
	int fd = mkstemp(json);
	char *j;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(run_tool("--spawn 2 --ubatches 4 --tokens 64 --width 32 --repeat 1 --unsafe-no-war", json), 1);
	j = slurp(json);
	assert_non_null(strstr(j, "\"parity\": false"));
	assert_null(strstr(j, "\"sentinel_failures\": 0"));
	assert_non_null(strstr(j, "\"rpc_errors\": 0"));
	free(j);
	unlink(json);
	/* Usage errors are not test failures: 9 tokens in ubatches of
	 * ceil(9/4) = 3 make 3 ubatches, not 4. */
	assert_int_equal(run_tool("--spawn 2 --tokens 9 --ubatches 4", json), 2);
	assert_int_equal(run_tool("--spawn 2 --tokens 0 --ubatches 4", json), 2);
	unlink(json);
}

/* A prompt that does not divide into its ubatches: the last one ragged
 * (1024 = 4 x 205 + 204), on 2 and 3 ranks, both boundary paths; parity
 * (bit for bit against seq, every boundary on the client path) and the
 * sentinels must hold. */
static void test_tool_ragged(void **state)
{
	static const char *const args[] = {
		"--spawn 2 --tokens 1024 --ubatches 5 --width 64 --repeat 1",
		"--spawn 3 --tokens 1024 --ubatches 5 --width 64 --repeat 1",
		"--spawn 3 --tokens 1024,50 --ubatches 5 --width 64 --repeat 1 --transfer client",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
		char json[] = "/tmp/pp-fence-test-XXXXXX";
		int fd = mkstemp(json);
		char *j;

		assert_true(fd >= 0);
		close(fd);
		assert_int_equal(run_tool(args[i], json), 0);
		j = slurp(json);
		assert_non_null(strstr(j, "\"parity\": true"));
		assert_non_null(strstr(j, "\"sentinel_failures\": 0"));
		assert_non_null(strstr(j, "\"rpc_errors\": 0"));
		assert_non_null(strstr(j, "\"tokens\": 1024, \"ubatch\": 205, \"last_ubatch\": 204"));
		if (strstr(args[i], ",50"))
			assert_non_null(strstr(j, "\"tokens\": 50, \"ubatch\": 10, \"last_ubatch\": 10"));
		free(j);
		unlink(json);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_ranks),
		cmocka_unit_test(test_ragged_plan),
		cmocka_unit_test(test_fallback),
		cmocka_unit_test(test_three_stages_shared_rank),
		cmocka_unit_test(test_unsafe_hook_corrupts),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_tool_two_ranks),
		cmocka_unit_test(test_tool_three_ranks),
		cmocka_unit_test(test_tool_negative_control),
		cmocka_unit_test(test_tool_ragged),
	};

	/* libpprpc writes with writev: a daemon that went away would kill us
	 * with SIGPIPE instead of failing the call (reported separately). */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
