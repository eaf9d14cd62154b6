/* Unit tests: the settings table, configuration file parsing, CPU placement specs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/device/device.h"
#include "daemon/server/options.h"
#include "daemon/pprpcd.h"
#include "pprpc/types.h"

#define MIB (1024ull * 1024ull)

static int parse(struct pprpcd_opts *o, const char *text, char *err, size_t errlen)
{
	pprpcd_opts_default(o);
	return pprpcd_config_parse(o, "test.conf", text, strlen(text), err, errlen);
}

static void test_good_file(void **state)
{
	struct pprpcd_opts o;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse(&o,
			       "# comment\n; also a comment\n\n[pprpcd]\n"
			       "listen = [::1]:7000\n"
			       "  threads=3  \n"
			       "memory-floor-mib = 100\n"
			       "staging_mib = \"64\"\n"
			       "cpu_affinity = loop=0,device=1-3\n"
			       "log_level = debug\n"
			       "drain_ms=0\n",
			       err, sizeof(err)),
			 0);
	assert_string_equal(o.listen, "[::1]:7000");
	assert_int_equal(o.threads, 3);
	assert_int_equal(o.memory_floor, 100 * MIB);
	assert_int_equal(o.staging_bytes, 64 * MIB);
	assert_int_equal(o.log_level, 7);
	assert_int_equal(o.drain_ms, 0);
	assert_true(o.affinity.has_loop && o.affinity.has_device);
	assert_true(o.affinity.loop[0] == 1);
	assert_true(o.affinity.device[0] == 0xE);
	/* Without a trailing newline too. */
	assert_int_equal(parse(&o, "threads = 5", err, sizeof(err)), 0);
	assert_int_equal(o.threads, 5);
}

static void expect_error(const char *text, const char *needle)
{
	struct pprpcd_opts o;
	char err[256] = "";

	assert_true(parse(&o, text, err, sizeof(err)) < 0);
	if (!strstr(err, needle))
		fprintf(stderr, "error '%s' lacks '%s'\n", err, needle);
	assert_non_null(strstr(err, needle));
}

static void test_errors_name_line(void **state)
{
	(void)state;
	expect_error("threads = 2\nbogus = 1\n", "test.conf:2: unknown key 'bogus'");
	expect_error("\n\nthreads = many\n", "test.conf:3: threads:");
	expect_error("threads = -1\n", "test.conf:1:");
	expect_error("threads = 5000\n", "0..1024");
	expect_error("listen\n", "test.conf:1: expected 'name = value'");
	expect_error("[other]\n", "unknown section");
	expect_error("log_level = loud\n", "unknown level");
	expect_error("memory_floor_mib = 99999999999999999999999\n", "memory-floor-mib");
	expect_error("cpu_affinity = loop=a\n", "bad CPU list");
	expect_error("cpu_affinity = cores=1\n", "unknown part");
	expect_error("cpu_affinity = device=3-1\n", "bad CPU list");
	expect_error("max_bulk_mib = 0\n", "max-bulk-mib");
	expect_error("listen = \n", "empty");
}

static void test_hostile(void **state)
{
	struct pprpcd_opts o;
	char err[256], big[4096];
	static const char nul[] = "threads = 1\0junk\n";

	(void)state;
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_true(parse(&o, big, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "longer than"));
	pprpcd_opts_default(&o);
	assert_true(pprpcd_config_parse(&o, "x", nul, sizeof(nul) - 1, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "NUL"));
	/* A value too long for its field is refused, not truncated. */
	memset(big, 'h', 600);
	memcpy(big, "listen = ", 9);
	big[600] = '\0';
	assert_true(parse(&o, big, err, sizeof(err)) < 0);
}

static void test_affinity_roundtrip(void **state)
{
	struct cpu_affinity a;
	char err[200], buf[256];

	(void)state;
	assert_int_equal(affinity_parse("loop=0,device=1:3-5:7", &a, err, sizeof(err)), 0);
	affinity_format(&a, buf, sizeof(buf));
	assert_string_equal(buf, "loop=0,device=1:3-5:7");
	assert_int_equal(affinity_parse("none", &a, err, sizeof(err)), 0);
	affinity_format(&a, buf, sizeof(buf));
	assert_string_equal(buf, "none");
	assert_int_equal(affinity_parse("device=2", &a, err, sizeof(err)), 0);
	assert_false(a.has_loop);
	assert_true(affinity_parse("loop=1024", &a, err, sizeof(err)) < 0);
	assert_true(affinity_parse("loop=", &a, err, sizeof(err)) < 0);
	assert_true(affinity_parse("loop=1,", &a, err, sizeof(err)) == 0);
}

static void test_validate(void **state)
{
	struct pprpcd_opts o;
	char err[200];

	(void)state;
	pprpcd_opts_default(&o);
	assert_int_equal(pprpcd_opts_validate(&o, err, sizeof(err)), 0);
	snprintf(o.devices, sizeof(o.devices), "cpu,tpu");
	assert_true(pprpcd_opts_validate(&o, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "tpu"));
	pprpcd_opts_default(&o);
	snprintf(o.listen, sizeof(o.listen), "host:99999");
	assert_true(pprpcd_opts_validate(&o, err, sizeof(err)) < 0);
}

static void test_print_roundtrip(void **state)
{
	struct pprpcd_opts o, p;
	char err[256], *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	assert_int_equal(parse(&o, "threads = 7\ncpu_affinity = loop=1\nlog_level = info\n", err, sizeof(err)), 0);
	f = open_memstream(&text, &len);
	pprpcd_config_print(&o, f);
	fclose(f);
	/* What --check-config prints parses back to the same settings (empty
	 * values aside, which mean "unset"). */
	pprpcd_opts_default(&p);
	{
		char *line, *save = NULL, *copy = strdup(text);
		for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			size_t l = strlen(line);

			if (line[l - 1] == ' ' || strstr(line, "(all cores)"))
				continue;
			assert_int_equal(pprpcd_config_parse(&p, "printed", line, l, err, sizeof(err)), 0);
		}
		free(copy);
	}
	assert_int_equal(p.threads, 7);
	assert_int_equal(p.log_level, 6);
	assert_true(p.affinity.has_loop);
	free(text);
}

/* ggml-native-gdn: off by default, the three words, nothing else. */
static void test_ggml_native_gdn(void **state)
{
	struct pprpcd_opts o;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse(&o, "", err, sizeof(err)), 0);
	assert_int_equal(o.ggml_native_gdn, DEVICE_GDN_NATIVE_OFF);
	assert_int_equal(parse(&o, "ggml_native_gdn = auto\n", err, sizeof(err)), 0);
	assert_int_equal(o.ggml_native_gdn, DEVICE_GDN_NATIVE_AUTO);
	assert_int_equal(parse(&o, "ggml-native-gdn = on\n", err, sizeof(err)), 0);
	assert_int_equal(o.ggml_native_gdn, DEVICE_GDN_NATIVE_ON);
	assert_int_equal(parse(&o, "ggml_native_gdn = off\n", err, sizeof(err)), 0);
	assert_int_equal(o.ggml_native_gdn, DEVICE_GDN_NATIVE_OFF);
	assert_int_equal(parse(&o, "ggml_native_gdn = 1\n", err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "off, auto, on"));
}

/* Transport and RDMA ring settings: file, environment (over the file), ranges. */
static void test_rdma_settings(void **state)
{
	struct pprpcd_opts o;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse(&o, "", err, sizeof(err)), 0);
	assert_int_equal(o.transport, PPRPCD_TRANSPORT_AUTO);
	assert_int_equal(o.rdma_chunk, 512u << 10);
	assert_int_equal(o.rdma_tx_depth, 8);
	assert_int_equal(o.rdma_rx_depth, 32);
	assert_int_equal(parse(&o, "transport = rdma\nrdma_chunk = 1M\nrdma-tx-depth = 16\nrdma_rx_depth = 64\n", err,
			       sizeof(err)), 0);
	assert_int_equal(o.transport, PPRPCD_TRANSPORT_RDMA);
	assert_int_equal(o.rdma_chunk, 1u << 20);
	assert_int_equal(o.rdma_tx_depth, 16);
	assert_int_equal(o.rdma_rx_depth, 64);
	assert_int_equal(parse(&o, "rdma_chunk = 262144\n", err, sizeof(err)), 0);
	assert_int_equal(o.rdma_chunk, 256u << 10);
	assert_int_equal(parse(&o, "transport = infiniband\n", err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "auto, tcp, rdma"));
	assert_int_equal(parse(&o, "rdma_chunk = 1000\n", err, sizeof(err)), PPRPC_EINVAL);
	assert_int_equal(parse(&o, "rdma_chunk = 128M\n", err, sizeof(err)), PPRPC_EINVAL);
	assert_int_equal(parse(&o, "rdma_rx_depth = 23\n", err, sizeof(err)), PPRPC_EINVAL);
	assert_int_equal(parse(&o, "rdma_tx_depth = 0\n", err, sizeof(err)), PPRPC_EINVAL);
	/* The environment overrides the file. */
	assert_int_equal(parse(&o, "rdma_tx_depth = 4\n", err, sizeof(err)), 0);
	setenv("PPRPC_RDMA_TX_DEPTH", "2", 1);
	setenv("PPRPC_RDMA_CHUNK", "64K", 1);
	assert_int_equal(pprpcd_opts_env(&o, err, sizeof(err)), 0);
	assert_int_equal(o.rdma_tx_depth, 2);
	assert_int_equal(o.rdma_chunk, 64u << 10);
	setenv("PPRPC_RDMA_RX_DEPTH", "8", 1);
	assert_int_equal(pprpcd_opts_env(&o, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "PPRPC_RDMA_RX_DEPTH"));
	unsetenv("PPRPC_RDMA_TX_DEPTH");
	unsetenv("PPRPC_RDMA_CHUNK");
	unsetenv("PPRPC_RDMA_RX_DEPTH");
}

/* The RDMA bulk path: off by default (chosen by measurement), read|off and
 * a threshold from file and environment, both validated; the threshold is
 * kept while the path is off. */
static void test_rdma_bulk_settings(void **state)
{
	struct pprpcd_opts o;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse(&o, "", err, sizeof(err)), 0);
	assert_int_equal(o.rdma_bulk_threshold, 0);
	assert_int_equal(o.rdma_bulk_threshold_set, 256u << 10);
	assert_int_equal(parse(&o, "rdma_bulk_threshold = 1M\nrdma_bulk = read\n", err, sizeof(err)), 0);
	assert_int_equal(o.rdma_bulk_threshold, 1u << 20);
	assert_int_equal(parse(&o, "rdma_bulk = read\nrdma_bulk_threshold = 64K\n", err, sizeof(err)), 0);
	assert_int_equal(o.rdma_bulk_threshold, 64u << 10);
	assert_int_equal(parse(&o, "rdma_bulk = write\n", err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "read, off"));
	assert_int_equal(parse(&o, "rdma_bulk_threshold = 1K\n", err, sizeof(err)), PPRPC_EINVAL);
	assert_int_equal(parse(&o, "rdma_bulk_threshold = 2048M\n", err, sizeof(err)), PPRPC_EINVAL);
	assert_int_equal(parse(&o, "rdma_bulk = read\n", err, sizeof(err)), 0);
	setenv("PPRPC_RDMA_BULK", "off", 1);
	assert_int_equal(pprpcd_opts_env(&o, err, sizeof(err)), 0);
	assert_int_equal(o.rdma_bulk_threshold, 0);
	setenv("PPRPC_RDMA_BULK", "read", 1);
	setenv("PPRPC_RDMA_BULK_THRESHOLD", "32k", 1);
	assert_int_equal(pprpcd_opts_env(&o, err, sizeof(err)), 0);
	assert_int_equal(o.rdma_bulk_threshold, 32u << 10);
	setenv("PPRPC_RDMA_BULK", "sometimes", 1);
	assert_int_equal(pprpcd_opts_env(&o, err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "PPRPC_RDMA_BULK"));
	unsetenv("PPRPC_RDMA_BULK");
	unsetenv("PPRPC_RDMA_BULK_THRESHOLD");
}

/* direct-min: 256K by default (XS_DIRECT_MIN), 0 allowed, k/m sizes; a bad
 * value is refused naming what is accepted. */
static void test_direct_min(void **state)
{
	struct pprpcd_opts o;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse(&o, "", err, sizeof(err)), 0);
	assert_int_equal(o.direct_min, 256u << 10);
	assert_int_equal(parse(&o, "direct-min = 0\n", err, sizeof(err)), 0);
	assert_int_equal(o.direct_min, 0);
	assert_int_equal(parse(&o, "direct_min = 512k\n", err, sizeof(err)), 0);
	assert_int_equal(o.direct_min, 512u << 10);
	assert_int_equal(parse(&o, "direct-min = 2G\n", err, sizeof(err)), PPRPC_EINVAL);
	assert_non_null(strstr(err, "not 0 or a size up to 1024M"));
	assert_int_equal(parse(&o, "direct-min = -1\n", err, sizeof(err)), PPRPC_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_file),
		cmocka_unit_test(test_errors_name_line),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_affinity_roundtrip),
		cmocka_unit_test(test_validate),
		cmocka_unit_test(test_print_roundtrip),
		cmocka_unit_test(test_ggml_native_gdn),
		cmocka_unit_test(test_rdma_settings),
		cmocka_unit_test(test_rdma_bulk_settings),
		cmocka_unit_test(test_direct_min),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
