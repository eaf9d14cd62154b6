/*
 * daemon/server/server.c — daemon start-up, the loop, and shutdown.
 *
 * Start order matters for whoever waits on us (tests, systemd): the devices
 * are initialised first, then the socket listens, then the port file is
 * written and READY=1 sent — so either means "ready to serve".
 *
 * SIGTERM drains: no new connections, queued work may finish for up to
 * drain_ms, then everything is closed.  A periodic tick also closes
 * connections (and metrics requests) that did not finish HELLO in time.  SIGHUP re-reads the configuration
 * file and applies its log level.  A periodic tick sends watchdog pings and
 * STATUS lines when systemd asked for them.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/server/affinity.h"
#include "daemon/server/authn.h"
#include "daemon/server/conn.h"
#include "daemon/server/conn_impl.h"
#include "daemon/server/deadline.h"
#include "daemon/server/dispatch.h"
#include "daemon/server/options.h"
#include "daemon/server/server.h"
#include "daemon/server/wake_ahead.h"
#include "daemon/core/core_impl.h"
#include "daemon/core/hostmem.h"
#include "daemon/core/trace.h"
#include "daemon/device/device.h"
#include "daemon/pprpcd.h"
#include "daemon/weights/weights.h"
#include "daemon/server/metrics.h"
#include "daemon/server/notify.h"
#include "daemon/peer/peer.h"
#include "daemon/exec/queue.h"
#include "daemon/objects/timeline.h"
#include "daemon/objects/hostpage.h"
#include "daemon/xfer/xfer.h"
#include "pprpc/types.h"
#include "util/addr.h"
#include "transport/rdma.h"
#include "transport/tcp_uv.h"

static void kick_queues(struct pprpcd *d)
{
	for (uint32_t i = 0; i < d->ndev; i++)
		if (d->dev[i] && d->dev[i]->q)
			queue_kick(d->dev[i]->q);
}

/* What the parts below the server call through (core/core_impl.h). */
static const struct core_ops server_ops = {
	.kick_queues = kick_queues,
	.conn_ref = conn_ref_impl,
	.conn_unref = conn_unref_impl,
	.conn_abort = conn_abort_impl,
	.conn_enqueue = conn_enqueue_impl,
	.conn_unqueue = conn_unqueue_impl,
	.conn_wait_begin = conn_wait_begin_impl,
	.conn_wait_end = conn_wait_end_impl,
	.conn_stream = conn_stream_impl,
	.conn_count_error = conn_count_error_impl,
	.conn_frames_in = conn_frames_in_impl,
	.conn_link_name = conn_link_name_impl,
	.conn_trace_who = conn_trace_who_impl,
	.reply_send_part = reply_send_part_impl,
	.reply_error = reply_error_impl,
	.reply_error_msg = reply_error_msg_impl,
	.reply_ok = reply_ok_impl,
};

void pprpcd_bind(struct pprpcd *d)
{
	d->ops = &server_ops;
}

static void on_accept(void *ctx, struct transport_conn *t)
{
	conn_accept(ctx, t);
}

/* RDMA next to TCP: peer links prefer it; the listener takes rdmacm
 * connections on the same port number.  auto degrades to TCP with the
 * reason; rdma makes failure fatal. */
static int start_rdma(struct pprpcd *d, const char *host)
{
	struct rdma_geom g = { d->opts.rdma_chunk, d->opts.rdma_tx_depth, d->opts.rdma_rx_depth,
			       d->opts.rdma_bulk_threshold };
	char err[256], budget[80];
	int required = d->opts.transport == PPRPCD_TRANSPORT_RDMA;
	int rc;

	if (d->opts.transport == PPRPCD_TRANSPORT_TCP) {
		snprintf(d->rdma_status, sizeof(d->rdma_status), "transport = tcp");
		return 0;
	}
	rc = rdma_ctx_new(d->loop, &g, &d->rdma, err, sizeof(err));
	/* The staging ring lives as long as the daemon: SEND payloads in it
	 * can be READ in place by the destination (bulk path). */
	if (rc == 0 && d->staging.mem)
		rdma_ctx_add_region(d->rdma, d->staging.mem, d->staging.bytes);
	if (rc == 0)
		rc = rdma_transport_listen(d->rdma, host, d->port, on_accept, d, &d->rdma_listener, err, sizeof(err));
	if (rc < 0) {
		snprintf(d->rdma_status, sizeof(d->rdma_status), "%s", err);
		if (required) {
			LOG(d, LOG_ERR_, "--transport rdma: RDMA unavailable: %s", err);
			return rc;
		}
		/* Without a listener, outbound links may still use RDMA (the
		 * device is chosen per destination), so the context stays. */
		LOG(d, LOG_NOTICE_, "RDMA listener not started (%s); peers reach this daemon over TCP", err);
		return 0;
	}
	rdma_memlock_budget(budget, sizeof(budget));
	snprintf(d->rdma_status, sizeof(d->rdma_status), "listening on device %.200s", err);
	LOG(d, LOG_NOTICE_, "RDMA: rdmacm listening on %s:%u, device %s; ring %ux%u KiB, %u receives; bulk %s; memlock %s",
	    host, d->port, err, g.tx_depth, g.chunk >> 10, g.rx_depth,
	    g.bulk_threshold ? "by RDMA READ from the threshold" : "off (message slots only)", budget);
	return 0;
}

static int open_devices(struct pprpcd *d)
{
	const struct device_conf conf = {
		.floor = d->opts.memory_floor,
		.threads = d->opts.threads,
		.cuda_graphs = d->opts.cuda_graphs,
		.cpu_ipc = d->opts.cpu_ipc,
		.ggml_native_gdn = d->opts.ggml_native_gdn,
		.ggml_graph_reuse = d->opts.ggml_graph_reuse,
		.hostmem = &d->hostmem,
	};
	char list[sizeof(d->opts.devices)], *save = NULL, *tok;
	char err[256];
	int rc;

	memcpy(list, d->opts.devices, sizeof(list));
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (d->ndev == PPRPCD_MAX_DEVICES) {
			LOG(d, LOG_ERR_, "too many devices (max %d)", PPRPCD_MAX_DEVICES);
			return PPRPC_ELIMIT;
		}
		rc = device_open(d->loop, tok, d->ndev, &conf, &d->dev[d->ndev], err, sizeof(err));
		/* A GPU that cannot run here (no device, no driver, a build
		 * without CUDA) is reported and skipped; the other devices
		 * are still served.  So is a ggml device this build or the ggml
		 * it loaded does not have (a ggml:CUDA0 on a host whose ggml has
		 * no CUDA; registry.c marks the kinds). */
		if (rc < 0 && device_spec_may_be_absent(tok) && d->nunavail < PPRPCD_MAX_DEVICES) {
			LOG(d, LOG_WARN_, "%s; not serving it", err);
			snprintf(d->unavail[d->nunavail++], sizeof(d->unavail[0]), "%s", err);
			continue;
		}
		if (rc < 0) {
			LOG(d, LOG_ERR_, "device '%s': %s", tok, err);
			return rc;
		}
		LOG(d, LOG_INFO_, "device %u: %s (%s)", d->ndev, d->dev[d->ndev]->name, d->dev[d->ndev]->desc);
		d->ndev++;
	}
	if (d->ndev == 0) {
		LOG(d, LOG_ERR_, "no usable device (of: %s)", d->opts.devices);
		return PPRPC_EINVAL;
	}
	return 0;
}

/* Written to a temporary name and renamed, so a reader never sees a
 * partial number. */
static int write_port_file(struct pprpcd *d)
{
	char tmp[sizeof(d->opts.port_file) + 8];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", d->opts.port_file);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%u\n", d->port) < 0 || fclose(f) != 0 || rename(tmp, d->opts.port_file) != 0) {
		LOG(d, LOG_ERR_, "cannot write port file %s", d->opts.port_file);
		return PPRPC_EIO;
	}
	return 0;
}

static uint64_t queued_total(struct pprpcd *d)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < d->ndev; i++)
		if (d->dev[i])
			n += queue_depth(d->dev[i]->q);
	return n;
}

static void send_status(struct pprpcd *d)
{
	char msg[600];
	uint64_t nconn = 0;

	for (struct conn *c = d->conns; c; c = c->next)
		nconn++;
	snprintf(msg, sizeof(msg), "STATUS=%s: %u device(s) (%s), %" PRIu64 " client(s), queue depth %" PRIu64,
		 d->drain_deadline ? "draining" : "serving", d->ndev, d->opts.devices, nconn, queued_total(d));
	notify_send(msg);
}

static void on_tick(uv_timer_t *t)
{
	struct pprpcd *d = t->data;
	uint64_t now = uv_now(d->loop);

	if (d->watchdog_usec)
		notify_send("WATCHDOG=1");
	xfer_expire(d, now);
	peer_keepalive(d, now);
	conn_expire_hello(d, now);
	metrics_expire(d, now);
	if (d->trace)
		trace_flush(d->trace);
	if (now - d->last_status_ms >= 2000) {
		d->last_status_ms = now;
		send_status(d);
	}
	if (d->drain_deadline && !d->stopping) {
		uint64_t q = queued_total(d);

		if (q == 0) {
			LOG(d, LOG_NOTICE_, "drained: all queued work finished");
			pprpcd_stop(d);
		} else if (now >= d->drain_deadline) {
			LOG(d, LOG_WARN_, "drain bound of %u ms reached with %" PRIu64 " command(s) queued; cancelling them",
			    d->opts.drain_ms, q);
			pprpcd_stop(d);
		}
	}
}

/* Stop taking work, let what is queued finish (bounded), then stop. */
static void begin_drain(struct pprpcd *d)
{
	if (d->drain_deadline || d->stopping)
		return;
	notify_send("STOPPING=1");
	tcp_listener_close(d->listener);
	d->listener = NULL;
	rdma_listener_close(d->rdma_listener);
	d->rdma_listener = NULL;
	d->drain_deadline = uv_now(d->loop) + d->opts.drain_ms;
	/* drain-ms is a promise: the process is gone shortly after it, even
	 * if a kernel still runs then (deadline.h). */
	if (deadline_arm(d, d->opts.drain_ms) < 0)
		LOG(d, LOG_WARN_, "no exit-deadline thread: shutdown will wait for running kernels");
	/* Check often while draining. */
	uv_timer_start(&d->tick, on_tick, 0, 20);
}

static void on_signal(uv_signal_t *s, int signum)
{
	struct pprpcd *d = s->data;

	if (signum == SIGHUP) {
		struct pprpcd_opts fresh;
		char err[512];

		pprpcd_opts_default(&fresh);
		if (pprpcd_config_load(&fresh, d->opts.config_path, 0, err, sizeof(err)) < 0) {
			LOG(d, LOG_ERR_, "SIGHUP: %s; keeping the current settings", err);
			return;
		}
		d->opts.log_level = fresh.log_level;
		d->log.level = fresh.log_level;
		LOG(d, LOG_NOTICE_, "SIGHUP: log level now %d (from %s)", fresh.log_level, d->opts.config_path);
		return;
	}
	if (d->drain_deadline) {
		LOG(d, LOG_NOTICE_, "signal %d while draining: stopping now", signum);
		deadline_arm(d, 0);
		pprpcd_stop(d);
		return;
	}
	LOG(d, LOG_NOTICE_, "signal %d: draining (up to %u ms), then shutting down", signum, d->opts.drain_ms);
	begin_drain(d);
}

/* Pin the loop and the device workers, and record what they really got. */
static int place_threads(struct pprpcd *d)
{
	const char *names[PPRPCD_MAX_DEVICES];
	pthread_t workers[PPRPCD_MAX_DEVICES];
	char err[200];

	if (affinity_apply_loop(&d->opts.affinity, err, sizeof(err)) < 0) {
		LOG(d, LOG_ERR_, "%s", err);
		return PPRPC_EINVAL;
	}
	for (uint32_t i = 0; i < d->ndev; i++) {
		workers[i] = queue_thread(d->dev[i]->q);
		names[i] = d->dev[i]->name;
		if (affinity_apply_worker(&d->opts.affinity, workers[i], err, sizeof(err)) < 0) {
			LOG(d, LOG_ERR_, "%s", err);
			return PPRPC_EINVAL;
		}
	}
	affinity_describe(pthread_self(), workers, names, (int)d->ndev, d->placement, sizeof(d->placement));
	LOG(d, LOG_INFO_, "CPU placement: %s", d->placement);
	return 0;
}

/* What bounds a mapping's read-ahead (daemon/weights/wahead.c). */
static uint64_t weights_mem_available(void)
{
	uint64_t avail = 0, total = 0;

	return hostmem_meminfo(&avail, &total) < 0 ? UINT64_MAX : avail;
}

/* model-dir and weights-cache (daemon/weights): a folder that cannot be
 * used stops the daemon with the reason, rather than every load of a model
 * silently pushing its weights over the link. */
static int open_weights(struct pprpcd *d)
{
	struct wsrc_conf wc = {
		.model_dir = d->opts.model_dir,
		.cache_dir = d->opts.weights_cache,
		.cache_max_bytes = d->opts.weights_cache_bytes,
		.threads = 4,
		.map_ahead = d->opts.map_read_ahead,
		.map_recall = d->opts.map_recall,
		.mem_available = weights_mem_available,
	};
	struct wsrc_stats st;
	char err[512];
	int rc;

	if (!d->opts.model_dir[0] && !d->opts.weights_cache[0])
		return 0;
	rc = wsrc_open(&wc, &d->weights, err, sizeof(err));
	if (rc < 0) {
		LOG(d, LOG_ERR_, "weights: %s", err);
		return rc;
	}
	wsrc_stats_get(d->weights, &st);
	LOG(d, LOG_NOTICE_, "weights: model files from %s; cache %s (%" PRIu64 " entries, %" PRIu64 " of %" PRIu64 " MiB)",
	    d->opts.model_dir[0] ? d->opts.model_dir : "(none)", d->opts.weights_cache[0] ? d->opts.weights_cache : "(none)",
	    st.cache_entries, st.cache_bytes >> 20, d->opts.weights_cache_bytes >> 20);
	return 0;
}

int pprpcd_start(struct pprpcd *d)
{
	char host[256], err[512];
	uint16_t port;
	int rc;

	pprpcd_bind(d);
	log_setup(&d->log, d->opts.log_level);
	uv_signal_init(d->loop, &d->sig_term);
	uv_signal_init(d->loop, &d->sig_int);
	uv_signal_init(d->loop, &d->sig_hup);
	d->sig_term.data = d->sig_int.data = d->sig_hup.data = d;
	uv_signal_start(&d->sig_term, on_signal, SIGTERM);
	uv_signal_start(&d->sig_int, on_signal, SIGINT);
	uv_signal_start(&d->sig_hup, on_signal, SIGHUP);
	uv_timer_init(d->loop, &d->tick);
	d->tick.data = d;
	d->start_ms = uv_now(d->loop);
	htab_init(&d->buffers, HK_BUFFER, d->opts.max_buffers);
	htab_init(&d->graphs, HK_GRAPH, d->opts.max_graphs);
	hostpage_sys_init(d);
	timeline_sys_init(d);
	hostmem_init(&d->hostmem, d->opts.memory_floor);
	if (addr_split(d->opts.listen, host, sizeof(host), &port, 50052) < 0) {
		LOG(d, LOG_ERR_, "--listen: cannot parse '%s' (expected HOST:PORT)", d->opts.listen);
		return PPRPC_EINVAL;
	}
	/* Before the devices: a daemon that may not listen stops at once. */
	rc = authn_start(d, host, port);
	if (rc < 0)
		return rc;
	rc = metrics_check(d, err, sizeof(err));
	if (rc < 0) {
		LOG(d, LOG_ERR_, "%s", err);
		return rc;
	}
	rc = open_weights(d);
	if (rc < 0)
		return rc;
	rc = open_devices(d);
	if (rc < 0)
		return rc;
	rc = xfer_init(d);
	if (rc < 0) {
		LOG(d, LOG_ERR_, "cannot set up a %" PRIu64 " MiB staging ring", d->opts.staging_bytes >> 20);
		return rc;
	}
	/* After the parts' close hooks (timelines, transfers): the handlers'
	 * loop-side waits go last, as they always have. */
	rc = dispatch_start(d);
	if (rc < 0) {
		LOG(d, LOG_ERR_, "more than %d close hooks: a build defect", PPRPCD_MAX_CONN_HOOKS);
		return rc;
	}
	rc = place_threads(d);
	if (rc < 0)
		return rc;
	wake_ahead_start(d);
	rc = metrics_start(d, err, sizeof(err));
	if (rc < 0) {
		LOG(d, LOG_ERR_, "%s", err);
		return rc;
	}
	rc = tcp_listen(d->loop, host, port, on_accept, d, &d->listener, &d->port, err, sizeof(err));
	if (rc < 0) {
		LOG(d, LOG_ERR_, "%s", err);
		return rc;
	}
	/* Once the port is known: the file names the address its clients
	 * dialled (token-trace.py matches them by it). */
	if (d->opts.trace_file[0]) {
		char where[300];

		snprintf(where, sizeof(where), "%s:%u", host, d->port);
		rc = trace_open(d->opts.trace_file, where, &d->trace, err, sizeof(err));
		if (rc < 0) {
			LOG(d, LOG_ERR_, "%s", err);
			return rc;
		}
		LOG(d, LOG_NOTICE_, "tracing every request to %s (trace-file)", d->opts.trace_file);
	}
	rc = start_rdma(d, host);
	if (rc < 0)
		return rc;
	if (d->opts.port_file[0] && (rc = write_port_file(d)) < 0)
		return rc;
	LOG(d, LOG_NOTICE_, "pprpcd %s listening on %s:%u with %u device(s)", PPRPC_VERSION, host,
	    d->port, d->ndev);
	notify_send("READY=1");
	send_status(d);
	d->watchdog_usec = notify_watchdog_usec();
	/* Tick at a third of the shortest deadline it serves: watchdog pings,
	 * peer keepalives, transfer expiry; 2 s otherwise (STATUS lines). */
	{
		uint64_t tick = 2000;

		if (d->watchdog_usec && d->watchdog_usec / 3000 < tick)
			tick = d->watchdog_usec / 3000;
		if (d->opts.peer_timeout_ms && d->opts.peer_timeout_ms / 3 < tick)
			tick = d->opts.peer_timeout_ms / 3;
		if (d->opts.peer_connect_timeout_ms && d->opts.peer_connect_timeout_ms / 3 < tick)
			tick = d->opts.peer_connect_timeout_ms / 3;
		if (d->opts.xfer_timeout_ms && d->opts.xfer_timeout_ms / 3 < tick)
			tick = d->opts.xfer_timeout_ms / 3;
		if (d->opts.hello_timeout_ms && d->opts.hello_timeout_ms / 3 < tick)
			tick = d->opts.hello_timeout_ms / 3;
		uv_timer_start(&d->tick, on_tick, 0, tick ? tick : 1);
	}
	return 0;
}

int pprpcd_run(struct pprpcd *d)
{
	return uv_run(d->loop, UV_RUN_DEFAULT) < 0 ? PPRPC_EINTERNAL : 0;
}

/* Devices go last: connections' buffers and graphs hold device memory, and
 * a device's queue handle keeps the loop alive until it is closed. */
static void release_devices(struct pprpcd *d)
{
	/* Workers blocked in WAIT must see the stop before being joined. */
	atomic_store(&d->stopping_workers, 1);
	timeline_wake_all(d);
	xfer_wake(d);
	/* Streams held on a landing slot's bell go on (dest.c). */
	xfer_release_held(d);
	/* No copy may be running from the staging ring when it is unpinned. */
	for (uint32_t i = 0; i < d->ndev; i++)
		device_stop(d->dev[i]);
	xfer_unpin(d);
	for (uint32_t i = 0; i < d->ndev; i++) {
		device_close(d->dev[i]);
		d->dev[i] = NULL;
	}
	xfer_stop(d);
}

void pprpcd_conn_gone(struct pprpcd *d)
{
	if (d->stopping && !d->conns && !d->async_creates)
		release_devices(d);
}

/* Stop accepting, close every connection (their queued commands complete
 * and drop their replies), then let the loop run dry. */
void pprpcd_stop(struct pprpcd *d)
{
	struct conn *c, *next;

	if (d->stopping)
		return;
	d->stopping = 1;
	tcp_listener_close(d->listener);
	d->listener = NULL;
	rdma_listener_close(d->rdma_listener);
	d->rdma_listener = NULL;
	for (c = d->conns; c; c = next) {
		next = c->next;
		conn_close(c);
	}
	peer_close_all(d);
	/* Signal handlers stay installed to the end (closing one restores the
	 * default action, and a second SIGTERM would then kill us mid-exit);
	 * unref'd, they no longer keep the loop alive. */
	uv_unref((uv_handle_t *)&d->sig_term);
	uv_unref((uv_handle_t *)&d->sig_int);
	uv_unref((uv_handle_t *)&d->sig_hup);
	uv_timer_stop(&d->tick);
	uv_close((uv_handle_t *)&d->tick, NULL);
	wake_ahead_stop(d);
	metrics_stop(d);
	pprpcd_conn_gone(d);
}

void pprpcd_fini(struct pprpcd *d)
{
	release_devices(d);
	htab_fini(&d->buffers);
	htab_fini(&d->graphs);
	hostpage_sys_fini(d);
	peer_mirrors_fini(d);
	timeline_sys_fini(d);
	xfer_fini(d);
	authn_fini(d);
	rdma_ctx_free(d->rdma);
	d->rdma = NULL;
	wsrc_close(d->weights);
	d->weights = NULL;
	/* last: the devices' final completions are traced too */
	trace_close(d->trace);
	d->trace = NULL;
}
