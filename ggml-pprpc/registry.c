/*
 * ggml-pprpc/registry.c — the plugin's entry point and ggml registry.
 *
 * ggml loads the plugin with ggml_backend_load(GGML_BACKEND_PATH) and calls
 * its one exported function, ggml_backend_init, with no argument: the ranks
 * come from the environment, and the registry is the one process-wide
 * object (ggml keeps the pointer for the life of the process).
 *
 *   PPRPC_CLUSTER=FILE        the ranks, in order (conf/cluster.conf format)
 *   PPRPC_RANKS=H:P,H:P,...   or the ranks directly (named rank0, rank1, ...)
 *   PPRPC_AUTH_KEY_FILE=FILE  shared key, when the ranks have one
 *   PPRPC_TIMEOUT_MS, PPRPC_CONNECT_TIMEOUT_MS, PPRPC_GRAPH_CACHE (rank.c,
 *   graphs.c), PPRPC_FAULT_EXIT_MS (fault.c), PPRPC_LIVENESS_MS and
 *   PPRPC_LIVENESS_TIMEOUT_MS (monitor.c)
 *   PPRPC_WAIT_RANKS_MS=N     how long to wait for ranks not reachable yet
 *                             (default 30000)
 *
 * Every served ggml device of every rank becomes a ggml device PPRPC<i>, in
 * rank order.  Running on fewer devices than configured would silently put
 * the model somewhere else (and name the devices differently), so the
 * registry waits for every rank: a restart after a rank fault, or a host
 * booting, meets ranks that are not up yet.  The wait is bounded
 * (PPRPC_WAIT_RANKS_MS) and says every few seconds what it waits for; a
 * rank that refuses us (key, version) fails at once.  A rank still missing
 * at the end exits the process with status 75 and the rank's name (its
 * supervisor retries), or with PPRPC_FAULT_EXIT_MS=off loads no PPRPC
 * device, with the reason.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pg.h"
#include "throw.h"
#include "util/ggml_release.h"

/* ggml keeps the registry for the life of the process: the one object of
 * the plugin that is the process's. */
static struct pg_registry *g_reg;

struct pg_fault *pg_process_fault(void)
{
	/* Only code that runs with PPRPC devices asks, and they exist only with
	 * a registry; the stand-in never exits and wakes nothing. */
	static struct pg_fault none = { .lock = PTHREAD_MUTEX_INITIALIZER, .efd = -1, .exit_ms = -1 };

	return g_reg ? &g_reg->fault : &none;
}

static const char *reg_get_name(ggml_backend_reg_t reg)
{
	(void)reg;
	return "PPRPC";
}

static size_t reg_get_device_count(ggml_backend_reg_t reg)
{
	return (size_t)((struct pg_registry *)reg->context)->ndev;
}

static ggml_backend_dev_t reg_get_device(ggml_backend_reg_t reg, size_t index)
{
	struct pg_registry *pr = reg->context;

	return index < (size_t)pr->ndev ? &pr->dev[index]->gdev : NULL;
}

static void *reg_get_proc_address(ggml_backend_reg_t reg, const char *name)
{
	(void)reg;
	(void)name;
	/* No extension: without ggml_backend_comm_* the meta backend (tensor
	 * split) reduces with its generic path, copies plus ADDs, which ride
	 * on cpy_tensor_async. */
	return NULL;
}

static const struct ggml_backend_reg_i reg_iface = {
	.get_name = reg_get_name,
	.get_device_count = reg_get_device_count,
	.get_device = reg_get_device,
	.get_proc_address = reg_get_proc_address,
};

static int add_rank(struct pg_registry *pr, const char *name, const char *addr, char *err, size_t errlen)
{
	struct pg_rank *r;

	if (pr->nrank >= PG_MAX_RANKS) {
		snprintf(err, errlen, "more than %d ranks", PG_MAX_RANKS);
		return PPRPC_ELIMIT;
	}
	r = &pr->rank[pr->nrank];
	r->index = pr->nrank;
	if (snprintf(r->addr, sizeof(r->addr), "%s", addr) >= (int)sizeof(r->addr)) {
		snprintf(err, errlen, "rank address too long: %.60s...", addr);
		return PPRPC_EINVAL;
	}
	if (name)
		snprintf(r->name, sizeof(r->name), "%s", name);
	else
		snprintf(r->name, sizeof(r->name), "rank%d", r->index);
	pr->nrank++;
	return 0;
}

/* The rank list from PPRPC_CLUSTER or PPRPC_RANKS.  Returns 0 with no ranks
 * when neither is set. */
static int load_ranks(struct pg_registry *pr, char *err, size_t errlen)
{
	const char *cluster = getenv("PPRPC_CLUSTER"), *ranks = getenv("PPRPC_RANKS");
	int rc = 0;

	if (cluster && *cluster) {
		pprpc_cluster *cl = NULL;

		rc = pprpc_cluster_load(cluster, &cl, err, errlen);
		if (rc < 0)
			return rc;
		for (int i = 0; i < pprpc_cluster_size(cl) && rc == 0; i++)
			rc = add_rank(pr, pprpc_cluster_name(cl, i), pprpc_cluster_addr(cl, i), err, errlen);
		pprpc_cluster_free(cl);
		return rc;
	}
	if (ranks && *ranks) {
		char *copy = strdup(ranks), *save = NULL, *tok;

		if (!copy)
			return PPRPC_ENOMEM;
		for (tok = strtok_r(copy, ",", &save); tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
			while (*tok == ' ')
				tok++;
			if (*tok)
				rc = add_rank(pr, NULL, tok, err, errlen);
		}
		free(copy);
	}
	return rc;
}

/* The ggml devices of rank r, from its STATS (DeviceInfo with ggml_*). */
static int add_devices(struct pg_registry *pr, struct pg_rank *r, char *err, size_t errlen)
{
	pprpc_stats *s = NULL;
	int rc, n, found = 0;

	rc = pg_rank_stats(r, &s);
	if (rc < 0) {
		snprintf(err, errlen, "STATS: %s", pprpc_last_error(r->c));
		return rc;
	}
	n = pprpc_stats_count(s, "devices");
	for (int i = 0; i < n && rc == 0; i++) {
		struct pg_dev_info info, *di = &info;
		struct pg_device *d;

		pg_dev_info_get(s, i, di);
		if (strcmp(di->kind, "ggml") != 0)
			continue; /* native devices run pprpc graphs, not ggml's */
		/* the rank validates and runs graphs with its own ggml: one of
		 * another release would misread ours (util/ggml_release.h) */
		if (strcmp(di->ggml_version, ggml_version()) != 0) {
			snprintf(err, errlen, "device %s runs ggml %s, this process ggml %s (llama.cpp %s): "
				 "run ranks and client of one llama.cpp release",
				 di->name, *di->ggml_version ? di->ggml_version : "(not said: an older pprpcd)",
				 ggml_version(), PPRPC_LLAMA_RELEASE);
			rc = PPRPC_EVERSION;
			break;
		}
		if (pr->ndev >= PG_MAX_DEVICES) {
			snprintf(err, errlen, "more than %d devices", PG_MAX_DEVICES);
			rc = PPRPC_ELIMIT;
			break;
		}
		rc = pg_device_create(pr, r, di, pr->ndev, &d, err, errlen);
		if (rc == 0) {
			pr->dev[pr->ndev++] = d;
			found++;
		}
	}
	pprpc_stats_free(s);
	if (rc == 0 && !found)
		PG_LOG_WARN("pprpc: rank %d %s (%s) serves no ggml device (pprpcd --devices ggml:CPU, ggml:CUDA0, ...)\n",
			      r->index, r->name, r->addr);
	return rc;
}

/* Only before the registry is handed to ggml (no monitor thread yet). */
static void registry_free(struct pg_registry *pr)
{
	for (int i = 0; i < pr->ndev; i++)
		pg_device_destroy(pr->dev[i]);
	for (int i = 0; i < pr->nrank; i++)
		pg_rank_close(&pr->rank[i]);
	if (pr->fault.efd >= 0)
		close(pr->fault.efd);
	pg_weights_free(pr->weights);
	free(pr);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connect rank r, waiting up to the deadline while it cannot be reached
 * (refused, unreachable, timed out: a rank still starting).  0, or a
 * negative code with the reason in err. */
static int open_waiting(struct pg_rank *r, int64_t t0, long wait_ms, char *err, size_t errlen)
{
	int64_t next_say = 0;
	int waited = 0;

	for (;;) {
		int64_t t;
		int rc = pg_rank_open(r, err, errlen);

		if (rc == 0) {
			if (waited)
				pg_say(5, "rank %d %s (%s) is up, %.1f s after the start", r->index, r->name, r->addr,
				       (double)(now_ms() - t0) / 1000.0);
			return 0;
		}
		if (rc != PPRPC_ECONN && rc != PPRPC_ETIMEDOUT)
			return rc; /* refused us (key, version): waiting changes nothing */
		t = now_ms();
		if (t - t0 >= wait_ms)
			return rc;
		if (t >= next_say) {
			pg_say(4, "waiting for rank %d %s (%s): %s (%.0f s of %.0f s, PPRPC_WAIT_RANKS_MS)", r->index,
			       r->name, r->addr, err, (double)(t - t0) / 1000.0, (double)wait_ms / 1000.0);
			next_say = t + 5000;
		}
		waited = 1;
		usleep(200000);
	}
}

static struct pg_registry *registry_new(void)
{
	struct pg_registry *pr = calloc(1, sizeof(*pr));
	char err[768] = "";
	long wait_ms = 0;
	int64_t t0 = now_ms();
	int rc;

	if (!pr) {
		PG_LOG_ERROR("pprpc: out of memory\n");
		return NULL;
	}
	pr->reg.api_version = GGML_BACKEND_API_VERSION;
	pr->reg.iface = reg_iface;
	pr->reg.context = pr;
	rc = pg_fault_init(&pr->fault, err, sizeof(err));
	if (rc == 0)
		rc = pg_env_int("PPRPC_WAIT_RANKS_MS", 30000, 0, 86400000, &wait_ms, err, sizeof(err));
	if (rc == 0)
		rc = pg_env_trace(&pr->trace, err, sizeof(err));
	if (rc == 0)
		rc = load_ranks(pr, err, sizeof(err));
	if (rc < 0) {
		PG_LOG_ERROR("pprpc: %s\n", err[0] ? err : pprpc_strerror(rc));
		goto fail;
	}
	if (pr->nrank == 0)
		PG_LOG_WARN("pprpc: no ranks configured (set PPRPC_RANKS=host:port,... or PPRPC_CLUSTER=file): "
			      "no PPRPC devices\n");
	else
		pg_throw_install();
	for (int i = 0; i < pr->nrank; i++) {
		struct pg_rank *r = &pr->rank[i];
		int first = pr->ndev;

		r->fault = &pr->fault;
		r->trace = pr->trace;
		rc = open_waiting(r, t0, wait_ms, err, sizeof(err));
		if (rc < 0 && (rc == PPRPC_ECONN || rc == PPRPC_ETIMEDOUT) && pr->fault.exit_ms >= 0) {
			/* Registering the other ranks' devices would name them
			 * differently and place the model elsewhere: the supervisor
			 * starts us again instead. */
			pg_say(3, "rank %d %s (%s) not reachable within %.0f s (PPRPC_WAIT_RANKS_MS): %s; exiting with "
				  "status %d", r->index, r->name, r->addr, (double)wait_ms / 1000.0, err, PG_EXIT_FAULT);
			_exit(PG_EXIT_FAULT);
		}
		if (rc == 0)
			rc = add_devices(pr, r, err, sizeof(err));
		if (rc < 0) {
			PG_LOG_ERROR("pprpc: rank %d %s (%s): %s\n", r->index, r->name, r->addr, err);
			goto fail;
		}
		for (int k = first; k < pr->ndev; k++)
			snprintf(r->devs + strlen(r->devs), sizeof(r->devs) - strlen(r->devs), "%s%s",
				 k > first ? "," : "", pr->dev[k]->name);
	}
	rc = pg_weights_init(pr, err, sizeof(err));
	if (rc < 0) {
		PG_LOG_ERROR("pprpc: %s\n", err);
		goto fail;
	}
	rc = pg_monitor_start(pr, err, sizeof(err));
	if (rc < 0) {
		PG_LOG_ERROR("pprpc: %s\n", err);
		goto fail;
	}
	for (int i = 0; i < pr->ndev; i++)
		PG_LOG_INFO("pprpc: %s = %s%s\n", pr->dev[i]->name, pr->dev[i]->desc,
			      pr->dev[i]->async ? "" : " (no async/events: no pipeline parallelism)");
	return pr;
fail:
	registry_free(pr);
	return NULL;
}

/* ggml_backend_load calls this once per dlopen; the registry stays for the
 * life of the process (ggml never gives it back). */
__attribute__((visibility("default"))) ggml_backend_reg_t ggml_backend_init(void);

ggml_backend_reg_t ggml_backend_init(void)
{
	char err[400];

	/* before anything else of ggml's is touched: another release may number
	 * ops and lay out op_params otherwise (util/ggml_release.h) */
	if (pprpc_ggml_release_check(ggml_version(), ggml_commit(), err, sizeof(err)) < 0) {
		PG_LOG_ERROR("pprpc: not loading the PPRPC backend: %s\n", err);
		return NULL;
	}
	if (!g_reg)
		g_reg = registry_new();
	return g_reg ? &g_reg->reg : NULL;
}
