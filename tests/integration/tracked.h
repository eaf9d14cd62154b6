/*
 * tests/integration/tracked.h — what a test opened on a daemon shared by a
 * group of tests (raw sockets, clients, host pages), closed by the per-test
 * teardown (tracked_cleanup): a failed assertion leaves the test function
 * at once, and what it left open would keep its buffers, graphs and pages
 * on the daemon and skew the next tests' baselines and limits.
 * Header-only: each test is a program of its own.
 */
#ifndef PPRPC_TESTS_TRACKED_H
#define PPRPC_TESTS_TRACKED_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "pprpc.h"
#include "tests/integration/harness.h"

#define MAX_TRACKED 128

struct tracked {
	void *p[MAX_TRACKED];
	int n;
};

static struct tracked tracked_fds, tracked_clients, tracked_pages;

static inline void track(struct tracked *t, void *p)
{
	if (t->n < MAX_TRACKED)
		t->p[t->n++] = p;
}

static inline void untrack(struct tracked *t, void *p)
{
	for (int i = 0; i < t->n; i++)
		if (t->p[i] == p) {
			t->p[i] = t->p[--t->n];
			break;
		}
}

/* fds go in as fd + 1 (0 is a valid fd, NULL is not a valid entry) */
static inline void track_fd(int fd)
{
	track(&tracked_fds, (void *)(intptr_t)(fd + 1));
}

static inline void raw_close(int fd)
{
	untrack(&tracked_fds, (void *)(intptr_t)(fd + 1));
	close(fd);
}

/* A client of d named name, tracked; the test fails when it cannot connect. */
static inline pprpc_client *tclient_open(const struct tdaemon *d, const char *name, int io_timeout_ms)
{
	char err[512] = "";
	pprpc_connect_opts o = {
		.client_name = name,
		.connect_timeout_ms = 5000,
		.io_timeout_ms = io_timeout_ms,
		.err_buf = err,
		.err_len = sizeof(err),
	};
	pprpc_client *c = NULL;
	int rc = pprpc_connect(d->addr, &o, &c);

	if (rc != 0)
		fprintf(stderr, "pprpc_connect(%s): %s (%s)\n", d->addr, pprpc_strerror(rc), err);
	assert_int_equal(rc, 0);
	track(&tracked_clients, c);
	return c;
}

static inline void client_close(pprpc_client *c)
{
	untrack(&tracked_clients, c);
	pprpc_close(c);
}

/* The daemon is alive and a fresh client (named name) can allocate,
 * write, read back (into plain memory: by the link) and free. */
static inline void assert_serves(struct tdaemon *d, const char *name)
{
	uint8_t out[4096], in[4096];
	pprpc_buffer b = { 0 };
	pprpc_client *c;

	assert_true(tdaemon_alive(d));
	c = tclient_open(d, name, 10000);
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i * 7 + 3);
	assert_int_equal(pprpc_buffer_alloc(c, 0, sizeof(out), &b), 0);
	assert_int_equal(pprpc_tensor_set(c, b, 0, out, sizeof(out)), 0);
	memset(in, 0, sizeof(in));
	assert_int_equal(pprpc_tensor_get(c, b, 0, in, sizeof(in)), 0);
	assert_memory_equal(in, out, sizeof(out));
	assert_int_equal(pprpc_buffer_free(c, b), 0);
	client_close(c);
	assert_true(tdaemon_alive(d));
}

static inline int tracked_cleanup(void **state)
{
	(void)state;
	while (tracked_fds.n > 0)
		close((int)(intptr_t)tracked_fds.p[--tracked_fds.n] - 1);
	while (tracked_clients.n > 0)
		pprpc_close(tracked_clients.p[--tracked_clients.n]);
	while (tracked_pages.n > 0)
		pprpc_host_free(tracked_pages.p[--tracked_pages.n]);
	return 0;
}

#endif
