/*
 * tools/common/spawn.h — start local pprpcd processes for tools, benchmarks
 * and tests (`--spawn N`).
 *
 * A spawned daemon listens on 127.0.0.1 with an ephemeral port, announced
 * through --port-file; it is stopped by PID.  Its log goes to a file in a
 * private temporary directory, removed on stop.
 */
#ifndef PPRPC_TOOLS_SPAWN_H
#define PPRPC_TOOLS_SPAWN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct spawned {
	pid_t pid;            /* > 0 running, 0 none, < 0 exited (-(status)-1) */
	uint16_t port;
	char addr[64];        /* "127.0.0.1:PORT" */
	char dir[256];
	char log[300];
};

/* The pprpcd next to this program (argv0's directory), else $PPRPCD, else
 * "pprpcd" from PATH.  Returns a static or environment string. */
const char *spawn_default_bin(const char *argv0, char *buf, size_t len);

/* Start bin with --listen 127.0.0.1:0 --port-file ... plus extra
 * (NULL-terminated, may be NULL); wait up to timeout_ms for the port.
 * Returns 0, or -1 with a reason in err (the daemon is stopped). */
int spawn_daemon(const char *bin, const char *const *extra, int timeout_ms, struct spawned *out,
		 char *err, size_t errlen);
/* 1 while the process runs. */
int spawn_alive(struct spawned *s);
/* SIGTERM, wait up to 10 s, then SIGKILL; removes the temp dir unless
 * keep_dir.  Returns the waitpid status, or -1. */
int spawn_stop(struct spawned *s, int keep_dir);
/* Copy the daemon's log to stderr. */
void spawn_dump_log(const struct spawned *s);

#endif
