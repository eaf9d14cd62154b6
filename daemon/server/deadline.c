/* daemon/server/deadline.c — the exit deadline (see deadline.h). */
#include "daemon/server/deadline.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "daemon/pprpcd.h"
#include "pprpc/types.h"

struct deadline {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct timespec when;   /* CLOCK_MONOTONIC */
	struct pprpcd *d;
	uint32_t drain_ms;
};

static int before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void *guard(void *arg)
{
	struct deadline *dl = arg;
	struct timespec now;

	pthread_mutex_lock(&dl->lock);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!before(&now, &dl->when))
			break;
		/* Woken early when the deadline is brought closer. */
		pthread_cond_timedwait(&dl->cond, &dl->lock, &dl->when);
	}
	pthread_mutex_unlock(&dl->lock);
	/* The loop may be blocked (joining a worker in a kernel): log from
	 * here, stdio is thread-safe, and leave without running atexit
	 * handlers or destructors that could wait on the same worker. */
	LOG(dl->d, LOG_WARN_, "shutdown not finished %u ms after it began (drain-ms %u + %d ms for the teardown): "
	    "exiting now; work still running (a kernel on a device) is abandoned with the process",
	    dl->drain_ms + DEADLINE_GRACE_MS, dl->drain_ms, DEADLINE_GRACE_MS);
	fflush(stderr);
	_exit(0);
	return NULL;
}

static struct timespec from_now(uint64_t ms)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += (time_t)(ms / 1000);
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

int deadline_arm(struct pprpcd *d, uint64_t ms)
{
	struct timespec when = from_now(ms + DEADLINE_GRACE_MS);
	struct deadline *dl = d->deadline;
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t th;
	int rc;

	if (dl) {
		pthread_mutex_lock(&dl->lock);
		if (before(&when, &dl->when)) {
			dl->when = when;
			pthread_cond_signal(&dl->cond);
		}
		pthread_mutex_unlock(&dl->lock);
		return 0;
	}
	dl = calloc(1, sizeof(*dl));
	if (!dl)
		return PPRPC_ENOMEM;
	dl->d = d;
	dl->when = when;
	dl->drain_ms = d->opts.drain_ms;
	pthread_mutex_init(&dl->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&dl->cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&th, &ta, guard, dl);
	pthread_attr_destroy(&ta);
	if (rc != 0) {
		pthread_cond_destroy(&dl->cond);
		pthread_mutex_destroy(&dl->lock);
		free(dl);
		return PPRPC_ENOMEM;
	}
	/* Never freed: the thread reads it until the process ends. */
	d->deadline = dl;
	return 0;
}
