/*
 * ggml-pprpc/fault.c — the process's rank fault: the first failure that
 * leaves this process with rank state it cannot trust, and what follows.
 *
 * After a rank died, hung, or refused or skipped queued work, the ranks no
 * longer hold what llama.cpp believes they hold (its KV cells, a graph's
 * outputs), and llama.cpp has no way to hear "drop your KV state": its
 * server releases the failed slots but keeps idle slots' cached prompts and
 * their KV cells.  Serving on in this process would reuse KV bytes a
 * restarted rank does not have.  So a fault is final for the process:
 *
 *   1. every call after it fails (graph_compute with GGML_STATUS_FAILED,
 *      void calls by pg_throw), and the eventfd ends any wait in progress on
 *      any rank, so a request in flight is answered with an error at once;
 *   2. PPRPC_FAULT_EXIT_MS later (default 1000: time for those errors to
 *      reach their clients) the process exits with PG_EXIT_FAULT (75), and
 *      its supervisor's restart waits for the ranks (registry.c) and loads
 *      everything again.  "off" never exits (a program that handles the
 *      failed state itself); every later compute then fails.
 *
 * The fault's lines go straight to stderr (with a syslog priority under
 * journald), not through ggml's logger: the tool's logger may print from a
 * thread of its own, after _exit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "pg.h"
#include "throw.h"

void pg_say(int prio, const char *fmt, ...)
{
	/* journald reads "<N>" as the line's priority (SyslogLevelPrefix) */
	static const char *const tag[] = { [3] = "<3>", [4] = "<4>", [5] = "<5>", [6] = "<6>" };
	const char *js = getenv("JOURNAL_STREAM");
	char line[1400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%spprpc: %s\n", js && *js && prio >= 3 && prio <= 6 ? tag[prio] : "", line);
	fflush(stderr);
}

int pg_fault_init(struct pg_fault *f, char *err, size_t errlen)
{
	const char *s = getenv("PPRPC_FAULT_EXIT_MS");
	long ms;

	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->lock, NULL);
	f->efd = -1;
	if (s && strcmp(s, "off") == 0) {
		f->exit_ms = -1;
	} else if (pg_env_int("PPRPC_FAULT_EXIT_MS", 1000, 0, 3600000, &ms, err, errlen) < 0) {
		snprintf(err + strlen(err), errlen - strlen(err), " or off");
		return PPRPC_EINVAL;
	} else {
		f->exit_ms = ms;
	}
	f->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (f->efd < 0) {
		snprintf(err, errlen, "eventfd: %s", strerror(errno));
		return PPRPC_EIO;
	}
	return 0;
}

static void *exit_later(void *arg)
{
	struct pg_fault *f = arg;
	struct timespec ts = { .tv_sec = f->exit_ms / 1000, .tv_nsec = (f->exit_ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&f->lock);
	pg_say(3, "exiting with status %d, %ld ms after the rank fault (PPRPC_FAULT_EXIT_MS): %s; requests in "
		  "flight were answered with the error, and a restart waits for the ranks (PPRPC_WAIT_RANKS_MS)",
	       PG_EXIT_FAULT, f->exit_ms, f->why);
	pthread_mutex_unlock(&f->lock);
	/* _exit, not exit: the tool's threads are still running, and its
	 * static destructors would free what they use. */
	_exit(PG_EXIT_FAULT);
	return NULL;
}

void pg_fault_raise(struct pg_fault *f, const char *fmt, ...)
{
	char msg[1024];
	uint64_t one = 1;
	va_list ap;
	int first;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&f->lock);
	first = !atomic_load(&f->failed);
	if (first) {
		snprintf(f->why, sizeof(f->why), "%s", msg);
		atomic_store(&f->failed, 1);
	}
	pthread_mutex_unlock(&f->lock);
	if (!first) {
		pg_say(6, "after the rank fault: %s", msg);
		return;
	}
	pg_say(3, "%s", msg);
	/* end every wait on every rank now (libpprpc polls it: pprpc_set_cancel_fd) */
	if (f->efd >= 0 && write(f->efd, &one, sizeof(one)) < 0)
		pg_say(4, "cannot wake the waits: %s", strerror(errno));
	if (f->exit_ms >= 0) {
		pthread_t t;
		pthread_attr_t a;

		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &a, exit_later, f) != 0) {
			pg_say(3, "cannot start the exit timer: exiting with status %d now", PG_EXIT_FAULT);
			_exit(PG_EXIT_FAULT);
		}
		pthread_attr_destroy(&a);
	} else {
		pg_say(4, "PPRPC_FAULT_EXIT_MS=off: this process stays up, and every later compute on its PPRPC "
			  "devices fails");
	}
}

int pg_fault_failed(struct pg_fault *f)
{
	return atomic_load(&f->failed);
}

void pg_fault_why(struct pg_fault *f, char *buf, size_t len)
{
	pthread_mutex_lock(&f->lock);
	snprintf(buf, len, "%s", f->why);
	pthread_mutex_unlock(&f->lock);
}
