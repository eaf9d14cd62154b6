/*
 * tests/integration/harness.h — start and stop real pprpcd processes.
 *
 * Daemons listen on 127.0.0.1 with an ephemeral port (--listen
 * 127.0.0.1:0 --port-file), never any other address, and are stopped by
 * PID (tools/common/spawn.c does the work).  The binary is $PPRPCD (set by
 * `make integration`), else build/bin/pprpcd.
 */
#ifndef PPRPC_TESTS_HARNESS_H
#define PPRPC_TESTS_HARNESS_H

#include <stdint.h>

#include "tools/common/spawn.h"

#define tdaemon spawned

/* Start a daemon (log level info) with extra flags (NULL-terminated, may be
 * NULL); $PPRPC_TEST_DEVICES, when set, is its --devices.  Returns 0 once it listens, -1 (after printing its log) otherwise. */
int tdaemon_start(struct tdaemon *d, const char *const *extra);
/* Stop by PID; prints the log when the exit status is not 0 (or
 * PPRPC_KEEP_LOGS is set).  Returns the waitpid status. */
int tdaemon_stop(struct tdaemon *d);
int tdaemon_alive(struct tdaemon *d);
void tdaemon_dump_log(const struct tdaemon *d);
/* The daemon's log so far (malloc'd, NUL-terminated; exits the test when
 * unreadable). */
char *tdaemon_log(const struct tdaemon *d);
/* tdaemon_stop, handing back the whole log (what it wrote as it stopped
 * included) in *ret_log (malloc'd). */
int tdaemon_stop_log(struct tdaemon *d, char **ret_log);

/* A raw TCP connection to the daemon (for malformed-input tests). */
int traw_connect(const struct tdaemon *d);

/* The host's MemAvailable in MiB (/proc/meminfo; the test exits if unreadable): the
 * floor tests set --memory-floor-mib from it. */
uint64_t tmem_available_mib(void);

#endif
