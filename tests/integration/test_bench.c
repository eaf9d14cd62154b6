/*
 * Integration: pprpc-bench end to end on a tiny hybrid model (KDA +
 * attention layers, q8_0 and f16 weights) over spawned daemons.  Checks the
 * exit status, that seq and pp produced the same greedy tokens (equal
 * hashes in the JSON), that the split does not change the tokens (1 rank vs
 * 3 ranks), the ragged last ubatch, the ideal ratio and the warm-up in the
 * JSON, the trace (valid JSON, every stage of every ubatch in both modes)
 * and SVG outputs, a --ubatch-sweep candidate skipped for the memory floor,
 * logical batches (--batch), and bad usage (exit 2).
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

#define TINY "--d-model 64 --heads 2 --head-dim 32 --layers 4 --kda-ratio 1 --vocab 128 " \
	     "--prompt-tokens 40 --ubatch 16 --gen 4 --pairs 2"

static int run_bench(const char *args, const char *json)
{
	const char *bindir = getenv("BINDIR") ? getenv("BINDIR") : "build/bin";
	char cmd[1024];
	int st;

	snprintf(cmd, sizeof(cmd), "%s/pprpc-bench %s%s%s >/dev/null", bindir, args, json ? " --json " : "",
		 json ? json : "");
	fprintf(stderr, "$ %s\n", cmd);
	st = system(cmd);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 20);

	assert_non_null(f);
	assert_non_null(buf);
	assert_true(fread(buf, 1, (1 << 20) - 1, f) > 0);
	fclose(f);
	return buf;
}

/* The value of the n-th "token_hash" in the JSON (16 hex digits). */
static void nth_hash(const char *j, int n, char out[17])
{
	const char *p = j;

	for (int i = 0; i <= n; i++) {
		p = strstr(p, "\"token_hash\":\"");
		assert_non_null(p);
		p += strlen("\"token_hash\":\"");
	}
	memcpy(out, p, 16);
	out[16] = 0;
	assert_int_equal(strlen(out), 16);
}

static void tmpname(char *buf)
{
	int fd = mkstemp(buf);

	assert_true(fd >= 0);
	close(fd);
}

/* Run args, check the JSON, return the (common) token hash. */
static void bench_ok(const char *args, char hash[17])
{
	char json[] = "/tmp/pprpc-bench-XXXXXX", h2[17];
	char *j;

	tmpname(json);
	assert_int_equal(run_bench(args, json), 0);
	j = slurp(json);
	assert_non_null(strstr(j, "\"ok\":true"));
	assert_non_null(strstr(j, "\"hash_match\":true"));
	assert_null(strstr(j, "\"hash_mismatch\":1"));
	assert_null(strstr(j, "\"ok\":false"));
	assert_non_null(strstr(j, "\"rpc_errors\":0"));
	assert_non_null(strstr(j, "\"ci95_lo\":"));
	nth_hash(j, 0, hash);   /* seq */
	nth_hash(j, 1, h2);     /* pp */
	assert_string_equal(hash, h2);
	free(j);
	unlink(json);
}

static void test_two_ranks(void **state)
{
	char json[] = "/tmp/pprpc-bench-XXXXXX", trace[64], svg[64], args[512], hash[17];
	char *j, *t;

	(void)state;
	tmpname(json);
	snprintf(trace, sizeof(trace), "%s.trace", json);
	snprintf(svg, sizeof(svg), "%s.svg", json);
	snprintf(args, sizeof(args), "--spawn 2 " TINY " --wtype q8_0 --trace %s --svg %s --ubatch-sweep 16,1000000000",
		 trace, svg);
	assert_int_equal(run_bench(args, json), 0);
	j = slurp(json);
	assert_non_null(strstr(j, "\"ok\":true"));
	assert_non_null(strstr(j, "\"hash_match\":true"));
	assert_non_null(strstr(j, "\"ubatch\":16,\"ubatches\":3,\"warmup_pairs\":1"));
	/* 40 tokens in ubatches of 16 (16 + 16 + 8) on 2 ranks: the ideal is
	 * 2 * 40 / (40 + 16) */
	assert_non_null(strstr(j, "\"pairs\":2,\"ideal\":1.42857"));
	/* The absurd candidate was refused before anything was allocated. */
	assert_non_null(strstr(j, "\"skipped\":[{\"ubatch\":1000000000,\"reason\":\"rank 0 needs"));
	assert_non_null(strstr(j, "\"boundaries\":[{\"from\":0,\"to\":1,"));
	{
		char a[17], b[17];

		nth_hash(j, 0, a);
		nth_hash(j, 1, b);
		assert_string_equal(a, b);
	}
	t = slurp(trace);
	assert_non_null(strstr(t, "\"traceEvents\""));
	{
		char cmd[256];

		/* valid JSON, with a slice for every stage of every ubatch in both
		 * modes (on p2p too: the traced pair polls the stages) */
		snprintf(cmd, sizeof(cmd),
			 "python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))[\"traceEvents\"]; "
			 "n = [x for x in e if x[\"ph\"] == \"X\" and x[\"name\"].startswith(\"ubatch\")]; "
			 "sys.exit(len(n) != 2 * 2 * 3)' %s", trace);
		assert_int_equal(system(cmd), 0);
	}
	assert_non_null(strstr(t, "\"name\":\"ubatch 2\",\"ph\":\"X\",\"pid\":2,\"tid\":2"));  /* pp, rank 1 */
	assert_non_null(strstr(t, "\"name\":\"ubatch 0\",\"ph\":\"X\",\"pid\":1,\"tid\":1"));  /* seq, rank 0 */
	free(t);
	t = slurp(svg);
	assert_non_null(strstr(t, "<svg"));
	assert_non_null(strstr(t, "</svg>"));
	assert_non_null(strstr(t, "<rect"));
	assert_non_null(strstr(t, "<line x1"));
	free(t);
	free(j);
	unlink(json);
	unlink(trace);
	unlink(svg);

	/* f16 weights, default even split, no warm-up. */
	bench_ok("--spawn 2 " TINY " --wtype f16 --warmup 0", hash);
}

/* The split changes where layers run, not what they compute. */
static void test_split_invariant(void **state)
{
	char h1[17], h3[17];

	(void)state;
	bench_ok("--spawn 1 " TINY " --wtype q8_0", h1);
	bench_ok("--spawn 3 --split 1,2,1 " TINY " --wtype q8_0", h3);
	assert_string_equal(h1, h3);
	/* Logical batches of 2 ubatches (32 tokens: 2 batches) with tracing:
	 * synchronizing between batches changes nothing computed. */
	bench_ok("--spawn 2 " TINY " --wtype q8_0 --batch 32 --trace /dev/null", h3);
	assert_string_equal(h1, h3);
}

static void test_usage(void **state)
{
	(void)state;
	assert_int_equal(run_bench("--spawn 3 --split 1,1 " TINY, NULL), 2);
	assert_int_equal(run_bench("--spawn 2 " TINY " --wtype q4", NULL), 2);
	assert_int_equal(run_bench(TINY, NULL), 2);
	assert_int_equal(run_bench("--spawn 2 " TINY " --batch -1", NULL), 2);
	assert_int_equal(run_bench("--spawn 2 " TINY " --batch 32x", NULL), 2);
	assert_int_equal(run_bench("--spawn two " TINY, NULL), 2);
	assert_int_equal(run_bench("--spawn 2 " TINY " --warmup -1", NULL), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_ranks),
		cmocka_unit_test(test_split_invariant),
		cmocka_unit_test(test_usage),
	};

	return cmocka_run_group_tests_name("integration_bench", tests, NULL, NULL);
}
