/*
 * kernels/cpu/cpu_parallel.c — split a range of rows across short-lived
 * pthreads.  Deliberately simple (no pool): only large elementwise ops use
 * it, where creating a few threads is noise next to the memory traffic.
 */
#include "kernels/cpu/cpu_impl.h"

#include <pthread.h>
#include <stdlib.h>

/* Far above any useful core count; bounds the job array a hostile or
 * mistaken configuration could ask for. */
#define MAX_THREADS 256

struct job {
	kern_cpu_range_fn fn;
	void *arg;
	int64_t begin, end;
	int rc;
	pthread_t th;
	bool started;
};

static void *job_main(void *opaque)
{
	struct job *j = opaque;

	j->rc = j->fn(j->arg, j->begin, j->end);
	return NULL;
}

int kern_cpu_parallel(const struct kern_cpu_ctx *ctx, int64_t n, int64_t work,
		      kern_cpu_range_fn fn, void *arg)
{
	struct job *jobs;
	int64_t nt = ctx->nthreads, chunk, rem, begin = 0;
	int rc = 0;

	if (nt > MAX_THREADS)
		nt = MAX_THREADS;
	if (nt > n)
		nt = n;
	if (nt <= 1 || work <= KERN_CPU_PAR_MIN_WORK)
		return n > 0 ? fn(arg, 0, n) : 0;
	jobs = calloc((size_t)nt, sizeof(*jobs));
	if (!jobs)
		return fn(arg, 0, n);

	/* Split as chunk/rem rather than n * t / nt, which can overflow. */
	chunk = n / nt;
	rem = n % nt;

	for (int64_t t = 0; t < nt; t++) {
		int64_t len = chunk + (t < rem);

		jobs[t] = (struct job){ .fn = fn, .arg = arg, .begin = begin, .end = begin + len };
		begin += len;
		/* Range 0 runs here, after the others are started. */
		if (t > 0)
			jobs[t].started = pthread_create(&jobs[t].th, NULL, job_main,
							 &jobs[t]) == 0;
	}
	for (int64_t t = 0; t < nt; t++)
		if (!jobs[t].started)
			job_main(&jobs[t]);
	for (int64_t t = 0; t < nt; t++) {
		if (jobs[t].started)
			pthread_join(jobs[t].th, NULL);
		if (rc == 0)
			rc = jobs[t].rc;
	}
	free(jobs);
	return rc;
}
