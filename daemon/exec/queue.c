/* daemon/exec/queue.c — worker thread + completion hand-off (see queue.h). */
#include "daemon/exec/queue.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/core/trace.h"
#include "daemon/exec/stream.h"
#include "proto/errtext.h"
#include "pprpc/types.h"
#include "util/clock.h"
#include "util/expect.h"
#include "util/futex.h"
#include "proto/msgtype.h"

_Static_assert(MSG_TYPE_COUNT <= QUEUE_EXEC_TYPES, "every command type has an exec-time account");

struct queue {
	uv_async_t async;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct qcmd *head, *tail;        /* waiting to execute */
	struct qcmd *done_head, *done_tail;
	int stop;
	uint64_t scan;     /* worker: pick() generation */
	uint64_t kicks;    /* bumped by every push and kick (under lock) */
	uint64_t kicks_seen;
	/* the word a command's exec sleeps on (queue_set_wake_word), or NULL */
	_Atomic(_Atomic uint32_t *) wake_word;
	/* until when (util_now_ns) an idle worker spins for work instead of
	 * sleeping (queue_spin_until) */
	_Atomic uint64_t spin_until;
	_Atomic uint64_t spin_turns; /* turns of that looking (queue_spin_turns) */
	uint64_t npending; /* commands handed to the device, not completed */
	/* a command's exec runs outside the lock: on the worker, or inline on
	 * the loop (queue_run_inline); never both at once */
	int worker_running;
	int loop_running;
	struct qcmd *running;  /* the worker's command while worker_running */
	uint64_t pushed;   /* loop thread */
	uint64_t completed; /* loop thread */
	/* time inside exec by command type (relaxed atomics: the executing
	 * thread adds, STATS reads) */
	struct queue_exec_time exec_time[QUEUE_EXEC_TYPES];
	char name[16];
};

/* Something for the worker: the count pick() and polling commands watch
 * moves, and a command sleeping on a wake word in its exec wakes. */
static void bump(struct queue *q)
{
	_Atomic uint32_t *w = atomic_load(&q->wake_word);

	__atomic_fetch_add(&q->kicks, 1, __ATOMIC_RELAXED);
	if (w) {
		atomic_fetch_add(w, 1);
		futex_wake_all(w);
	}
}

/* exec, timed into the command type's account */
static int timed_exec(struct queue *q, struct qcmd *c)
{
	struct queue_exec_time *a = &q->exec_time[c->type < QUEUE_EXEC_TYPES ? c->type : 0];
	int load = c->load;
	uint64_t t0 = util_now_ns();
	int st = c->exec(c);
	uint64_t t1 = util_now_ns(), ns = t1 - t0;

	/* kept in the command, free: the clock was read anyway */
	if (!c->t_start)
		c->t_start = t0;
	c->t_end = t1;
	trace_marks_take(c->t_mark);
	__atomic_fetch_add(&a->execs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&a->ns, ns, __ATOMIC_RELAXED);
	if (load) {
		__atomic_fetch_add(&a->load_execs, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&a->load_ns, ns, __ATOMIC_RELAXED);
	}
	return st;
}

void queue_exec_times(const struct queue *q, struct queue_exec_time *ret)
{
	for (int i = 0; i < QUEUE_EXEC_TYPES; i++) {
		ret[i].execs = __atomic_load_n(&q->exec_time[i].execs, __ATOMIC_RELAXED);
		ret[i].ns = __atomic_load_n(&q->exec_time[i].ns, __ATOMIC_RELAXED);
		ret[i].load_execs = __atomic_load_n(&q->exec_time[i].load_execs, __ATOMIC_RELAXED);
		ret[i].load_ns = __atomic_load_n(&q->exec_time[i].load_ns, __ATOMIC_RELAXED);
	}
}

enum {
	QS_WAITING,   /* in the waiting list */
	QS_RUNNING,   /* picked: exec runs without the lock */
	QS_PENDING,   /* exec returned QCMD_PENDING: the device completes it */
	QS_EARLY,     /* completed by the device before the worker saw PENDING */
};

/* Before exec, under the lock: a cancelled stream's commands are not run,
 * nor a failed stream's (FENCE excepted).  Returns 1 when it settled c. */
static int skip(struct qcmd *c)
{
	struct stream *s = c->stream;

	if (s && atomic_load(&s->canceled)) {
		c->status = PPRPC_ECANCELED;
		snprintf(c->err, sizeof(c->err), "cancelled: the connection closed");
		return 1;
	}
	if (s && s->err && !c->fence) {
		c->status = PPRPC_EQUEUE;
		snprintf(c->err, sizeof(c->err), "skipped: command #%llu (%s) failed earlier: %.150s",
			 (unsigned long long)s->err_cmd, msg_type_name(s->err_type), s->errmsg);
		return 1;
	}
	return 0;
}

/* After exec, or when the device completes a pending command, under the
 * lock: the stream's sticky-error rules. */
static void settle(struct qcmd *c, int was_pending)
{
	struct stream *s = c->stream;

	if (!s)
		return;
	if (was_pending && s->err && !c->fence && c->status == 0) {
		/* It was already on the device when an earlier command failed,
		 * and ran on what that command left: its results do not count. */
		c->status = PPRPC_EQUEUE;
		snprintf(c->err, sizeof(c->err), "ran after command #%llu (%s) failed, results invalid: %.150s",
			 (unsigned long long)s->err_cmd, msg_type_name(s->err_type), s->errmsg);
	}
	if (c->fence && s->err) {
		c->status = s->err;
		c->fail_cmd = s->err_cmd;
		c->fail_type = s->err_type;
		snprintf(c->err, sizeof(c->err), "command #%llu (%s) failed: %.200s",
			 (unsigned long long)s->err_cmd, msg_type_name(s->err_type), s->errmsg);
		s->err = 0;
	} else if (c->status < 0 && c->sticky && !s->err) {
		s->err = c->status;
		s->err_cmd = c->req_id;
		s->err_type = c->type;
		snprintf(s->errmsg, sizeof(s->errmsg), "%.199s", c->err[0] ? c->err : pprpc_err_text(c->status));
	}
}

/* Can c run now?  A command that is not pure device work waits until its
 * stream has nothing pending on the device (FENCE included: it must see
 * every earlier failure).  Otherwise commands a stream will skip or cancel
 * always can. */
/* A write of other memory may run while only RECVs held on the device
 * (qcmd.held) are pending on its stream. */
static int passes_held(const struct qcmd *c, const struct stream *s, int pending)
{
	return c->pass == QPASS_GOES && pending == s->held && (c->rgn_hi <= s->held_lo || s->held_hi <= c->rgn_lo);
}

static int runnable(struct qcmd *c)
{
	struct stream *s = c->stream;
	int pending = s ? atomic_load(&s->pending) : 0;

	if (s && !c->async_ok && pending > 0 && !passes_held(c, s, pending))
		return 0;
	if (!c->ready || (s && (atomic_load(&s->canceled) || (s->err && !c->fence))))
		return 1;
	return c->ready(c);
}

/* The next command of c's stream, when it may go before c (c lets
 * writes of other memory pass, it writes only other memory) and can run;
 * its predecessor in *ret_prev.  Only the one right behind c in its
 * stream: those behind it keep their order. */
static struct qcmd *passer(struct qcmd *c, struct qcmd **ret_prev)
{
	struct qcmd *prev = c;

	for (struct qcmd *d = c->next; d; prev = d, d = d->next) {
		if (d->stream != c->stream)
			continue;
		if (d->pass != QPASS_GOES || !(d->rgn_hi <= c->rgn_lo || c->rgn_hi <= d->rgn_lo) || !runnable(d))
			return NULL;
		*ret_prev = prev;
		return d;
	}
	return NULL;
}

/* The first command, in arrival order, that is the oldest of its stream
 * and can run — or the one right behind it that may pass it.  A stream
 * whose oldest command cannot run is passed over otherwise (its later
 * commands wait behind it).  Under q->lock. */
static struct qcmd *pick(struct queue *q, struct qcmd **ret_prev)
{
	struct qcmd *c, *prev = NULL;

	q->scan++;
	for (c = q->head; c; prev = c, c = c->next) {
		struct stream *s = c->stream;
		struct qcmd *d;

		if (s && s->blocked_scan == q->scan)
			continue;
		if (s && c->pass == QPASS_LETS && (d = passer(c, ret_prev)))
			return d;
		if (runnable(c)) {
			*ret_prev = prev;
			return c;
		}
		if (s)
			s->blocked_scan = q->scan;
		else
			break; /* no stream: device-wide order */
	}
	return NULL;
}

/* Under the lock: c was handed to the device (QCMD_PENDING). */
static void went_pending(struct queue *q, struct qcmd *c)
{
	struct stream *s = c->stream;

	c->state = QS_PENDING;
	atomic_fetch_add(&s->pending, 1);
	q->npending++;
	if (c->held) {
		int first = s->held++ == 0;

		if (first || c->rgn_lo < s->held_lo)
			s->held_lo = c->rgn_lo;
		if (first || c->rgn_hi > s->held_hi)
			s->held_hi = c->rgn_hi;
	}
}

/* Under the lock: hand a finished command to the loop. */
static void finish(struct queue *q, struct qcmd *c)
{
	c->next = NULL;
	if (q->done_tail)
		q->done_tail->next = c;
	else
		q->done_head = c;
	q->done_tail = c;
	uv_async_send(&q->async);
}

/* Under the lock: append c to the waiting list and wake the worker. */
static void enqueue(struct queue *q, struct qcmd *c)
{
	c->next = NULL;
	c->state = QS_WAITING;
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	bump(q);
	pthread_cond_signal(&q->cond);
}

/* Idle, under the lock: look for a kick without it until one comes or the
 * spin window closes (a woken thread would take longer to run than the
 * next command takes to come, util/expect.h). */
static void spin(struct queue *q)
{
	uint64_t seen = q->kicks_seen;

	pthread_mutex_unlock(&q->lock);
	for (unsigned i = 1;; i++) {
		if (__atomic_load_n(&q->kicks, __ATOMIC_RELAXED) != seen)
			break;
		if (!(i & 63)) {
			atomic_fetch_add_explicit(&q->spin_turns, 1, memory_order_relaxed);
			if (util_now_ns() >= atomic_load(&q->spin_until))
				break;
			/* any thread that wants this CPU gets it first */
			sched_yield();
		}
		cpu_relax();
	}
	pthread_mutex_lock(&q->lock);
}

static int worker_done(const struct queue *q)
{
	return q->stop && !q->head && q->npending == 0;
}

static void *worker(void *arg)
{
	struct queue *q = arg;

	pthread_setname_np(pthread_self(), q->name);
	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct qcmd *c, *prev = NULL;
		int st;

		/* Nothing is picked while the loop runs a command inline: the
		 * device's execution has one owner at a time. */
		c = q->loop_running ? NULL : pick(q, &prev);
		if (!c) {
			if (worker_done(q))
				break;
			q->kicks_seen = q->kicks;
			while (q->kicks == q->kicks_seen && !worker_done(q)) {
				if (atomic_load(&q->spin_until) > util_now_ns()) {
					spin(q);
					continue;
				}
				pthread_cond_wait(&q->cond, &q->lock);
			}
			continue;
		}
		if (skip(c)) {
			st = c->status;
		} else {
			c->state = QS_RUNNING;
			q->worker_running = 1;
			q->running = c;
			pthread_mutex_unlock(&q->lock);
			st = c->exec ? timed_exec(q, c) : 0;
			pthread_mutex_lock(&q->lock);
			q->worker_running = 0;
			q->running = NULL;
		}
		if (st == QCMD_AGAIN) {
			c->state = QS_WAITING;
			continue; /* stays in place, behind its readiness */
		}
		/* prev may have left the list meanwhile only if it was pending
		 * (it never is: pending commands are not in it), so it holds. */
		if (prev)
			prev->next = c->next;
		else
			q->head = c->next;
		if (q->tail == c)
			q->tail = prev;
		c->next = NULL;
		if (st == QCMD_PENDING && c->state != QS_EARLY) {
			went_pending(q, c);
			continue;
		}
		if (st != QCMD_PENDING)
			c->status = st;
		settle(c, st == QCMD_PENDING);
		finish(q, c);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

void queue_complete(struct queue *q, struct qcmd *c, int status, const char *why)
{
	pthread_mutex_lock(&q->lock);
	c->status = status;
	if (status < 0 && why)
		snprintf(c->err, sizeof(c->err), "%s", why);
	if (c->state == QS_RUNNING) {
		/* The worker has not seen exec's QCMD_PENDING yet: it finishes
		 * the command itself. */
		c->state = QS_EARLY;
		pthread_mutex_unlock(&q->lock);
		return;
	}
	atomic_fetch_sub(&c->stream->pending, 1);
	q->npending--;
	if (c->held && --c->stream->held == 0)
		c->stream->held_lo = c->stream->held_hi = 0;
	settle(c, 1);
	finish(q, c);
	/* The stream's host-side commands may run now. */
	bump(q);
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

int queue_stream_pending(const struct stream *s)
{
	return atomic_load(&s->pending);
}

static void drain(uv_async_t *a)
{
	struct queue *q = a->data;
	struct qcmd *c;

	pthread_mutex_lock(&q->lock);
	c = q->done_head;
	q->done_head = q->done_tail = NULL;
	pthread_mutex_unlock(&q->lock);
	while (c) {
		struct qcmd *next = c->next;

		q->completed++;
		c->done(c);
		c = next;
	}
}

int queue_create(uv_loop_t *loop, const char *name, struct queue **ret_q)
{
	struct queue *q = calloc(1, sizeof(*q));

	if (!q)
		return PPRPC_ENOMEM;
	snprintf(q->name, sizeof(q->name), "%s", name);
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	if (uv_async_init(loop, &q->async, drain) < 0)
		goto fail;
	q->async.data = q;
	if (pthread_create(&q->thread, NULL, worker, q) != 0) {
		uv_close((uv_handle_t *)&q->async, (uv_close_cb)free);
		return PPRPC_ENOMEM;
	}
	*ret_q = q;
	return 0;
fail:
	free(q);
	return PPRPC_ENOMEM;
}

void queue_push(struct queue *q, struct qcmd *c)
{
	c->status = 0;
	c->err[0] = '\0';
	q->pushed++;
	pthread_mutex_lock(&q->lock);
	enqueue(q, c);
	pthread_mutex_unlock(&q->lock);
}

int queue_run_inline(struct queue *q, struct qcmd *c)
{
	int st;

	pthread_mutex_lock(&q->lock);
	/* A marker (no exec) does not use the device: only its stream must be
	 * quiet, which the caller ensures. */
	if (c->exec && (q->head || q->npending || q->worker_running || q->stop)) {
		pthread_mutex_unlock(&q->lock);
		return 0;
	}
	c->next = NULL;
	c->status = 0;
	c->err[0] = '\0';
	q->pushed++;
	/* The same steps as the worker's, with the worker kept out (it picks
	 * nothing while loop_running) so the device has one owner. */
	if (skip(c)) {
		st = c->status;
	} else if (!c->exec) {
		st = 0; /* a marker: settled below, the lock never dropped */
	} else {
		c->state = QS_RUNNING;
		q->loop_running = 1;
		pthread_mutex_unlock(&q->lock);
		st = timed_exec(q, c);
		pthread_mutex_lock(&q->lock);
		q->loop_running = 0;
	}
	if (st == QCMD_AGAIN) {
		/* It must wait after all: the worker takes it from here. */
		enqueue(q, c);
		pthread_mutex_unlock(&q->lock);
		return 1;
	}
	if (st == QCMD_PENDING && c->state != QS_EARLY) {
		/* Left on the device: it completes as any pending command. */
		went_pending(q, c);
		pthread_mutex_unlock(&q->lock);
		return 1;
	}
	if (st != QCMD_PENDING)
		c->status = st;
	settle(c, st == QCMD_PENDING);
	if (q->head) {
		/* A kick that came meanwhile found the worker kept out. */
		bump(q);
		pthread_cond_signal(&q->cond);
	}
	pthread_mutex_unlock(&q->lock);
	q->completed++;
	c->done(c);
	return 1;
}

int queue_stream_quiet(struct queue *q, const struct stream *s)
{
	int quiet = 1;

	pthread_mutex_lock(&q->lock);
	if (q->running && q->running->stream == s)
		quiet = 0;
	for (const struct qcmd *c = q->head; c && quiet; c = c->next)
		if (c->stream == s)
			quiet = 0;
	pthread_mutex_unlock(&q->lock);
	return quiet;
}

void queue_kick(struct queue *q)
{
	pthread_mutex_lock(&q->lock);
	bump(q);
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

void queue_spin_until(struct queue *q, uint64_t until_ns)
{
	uint64_t was = atomic_exchange(&q->spin_until, until_ns);

	if (was > util_now_ns())
		return; /* the worker is looking already, or busy */
	/* an asleep worker must start looking now: a wake without work */
	pthread_mutex_lock(&q->lock);
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

void queue_set_wake_word(struct queue *q, _Atomic uint32_t *word)
{
	atomic_store(&q->wake_word, word);
}

uint64_t queue_activity(const struct queue *q)
{
	return __atomic_load_n(&q->kicks, __ATOMIC_RELAXED);
}

uint64_t queue_depth(const struct queue *q)
{
	return q->pushed - q->completed;
}

pthread_t queue_thread(const struct queue *q)
{
	return q->thread;
}

uint64_t queue_spin_turns(const struct queue *q)
{
	return atomic_load_explicit(&q->spin_turns, memory_order_relaxed);
}

void queue_destroy(struct queue *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = 1;
	bump(q);
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	drain(&q->async);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	/* async is the first member: freeing the handle frees the queue. */
	uv_close((uv_handle_t *)&q->async, (uv_close_cb)free);
}
