/*
 * tests/integration/harness.h — start and stop real pprpcd processes.
 *
 * Daemons listen on 127.0.0.1 with an ephemeral port (--listen
 * 127.0.0.1:0 --port-file), never any other address, and are stopped by
 * PID.  The binary is $PPRPCD (set by `make integration`), else
 * build/bin/pprpcd.
 */
#ifndef PPRPC_TESTS_HARNESS_H
#define PPRPC_TESTS_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

struct tdaemon {
	pid_t pid;
	uint16_t port;
	char addr[64];       /* "127.0.0.1:PORT" */
	char dir[256];       /* temp dir: port file, log */
	char log[300];
};

/* Start a daemon with extra flags (NULL-terminated list, may be NULL).
 * Returns 0 once it listens, -1 (after printing its log) otherwise. */
int tdaemon_start(struct tdaemon *d, const char *const *extra);
/* SIGTERM, wait up to 10 s, then SIGKILL.  Returns the exit status as
 * waitpid reports it, or -1. */
int tdaemon_stop(struct tdaemon *d);
/* 1 while the process runs. */
int tdaemon_alive(struct tdaemon *d);
/* Print the daemon's log to stderr (for failures). */
void tdaemon_dump_log(const struct tdaemon *d);

/* A raw TCP connection to the daemon (for malformed-input tests). */
int traw_connect(const struct tdaemon *d);

#endif
