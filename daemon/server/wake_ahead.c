/*
 * daemon/server/wake_ahead.c — awake when a client's next requests are due
 * (see wake_ahead.h).
 *
 * A burst is the frames of clients (peers' excluded: their requests follow
 * the clients') that come less than BURST_GAP apart; the pace is the
 * moving average of the time between the starts of bursts that came 20 ms
 * or less apart (util/expect.h).  A timerfd (libuv's timers count whole
 * milliseconds, a token is a few) opens the window a margin before the
 * next start is due; in it an idle handle keeps libuv polling without
 * sleeping and the workers spin (queue_spin_until) until the window's end
 * or, once frames come, until TAIL after the last one.
 */
#include "daemon/server/wake_ahead.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <uv.h>

#include "daemon/device/device.h"
#include "daemon/exec/queue.h"
#include "daemon/pprpcd.h"
#include "util/clock.h"
#include "util/expect.h"

#define BURST_GAP_NS 200000ull   /* a frame after this long without one starts a burst */
#define TAIL_NS 100000ull        /* awake this long after a burst's frame: its next comes within */
#define MAX_PERIOD_US 20000ull   /* at a slower pace a wake-up is noise */
#define MAX_MARGIN_US 500ull
#define PACE_BURSTS 3            /* bursts in a row at a pace before it counts */

struct wake_ahead {
	struct pprpcd *d;
	int tfd;
	uv_poll_t poll;
	uv_idle_t idle;
	int open_handles;          /* freed when the last one closed */
	struct expect pace;        /* us between burst starts */
	uint32_t paced;            /* bursts in a row that came at most MAX_PERIOD apart */
	uint64_t last_frame_ns;
	uint64_t burst_ns;         /* the last burst's start, 0 = none */
	uint64_t close_ns;         /* the armed window's end */
	uint64_t spin_until_ns;    /* the loop's */
	bool spinning;
	bool in_window;            /* the window opened, no burst came yet */
	struct wake_ahead_stats st;
};

static void workers_spin(struct wake_ahead *w, uint64_t until)
{
	for (uint32_t i = 0; i < w->d->ndev; i++)
		if (w->d->dev[i])
			queue_spin_until(w->d->dev[i]->q, until);
}

static void on_idle(uv_idle_t *h)
{
	struct wake_ahead *w = h->data;

	/* spinning, not hogging: any thread that wants this CPU gets it (on
	 * a host with fewer cores than busy threads the client is one) */
	if (util_now_ns() < w->spin_until_ns) {
		sched_yield();
		return;
	}
	uv_idle_stop(h);
	w->spinning = false;
	w->in_window = false;
}

/* The loop and the workers awake until until. */
static void awake_until(struct wake_ahead *w, uint64_t until)
{
	w->spin_until_ns = until;
	if (!w->spinning) {
		w->spinning = true;
		uv_idle_start(&w->idle, on_idle);
	}
	workers_spin(w, until);
}

/* Arm the window of the burst after the one that started at burst_ns. */
static void arm(struct wake_ahead *w)
{
	struct itimerspec its;
	uint64_t est = expect_us(&w->pace), m, open;

	memset(&its, 0, sizeof(its));
	if (w->paced >= PACE_BURSTS && est) {
		m = expect_margin_us(est);
		if (m > MAX_MARGIN_US)
			m = MAX_MARGIN_US;
		open = w->burst_ns + (est > m ? est - m : 0) * 1000;
		w->close_ns = w->burst_ns + (est + m) * 1000;
		its.it_value.tv_sec = (time_t)(open / 1000000000ull);
		its.it_value.tv_nsec = (long)(open % 1000000000ull);
		/* 0 disarms: a window due at once opens a nanosecond later */
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void on_timer(uv_poll_t *h, int status, int events)
{
	struct wake_ahead *w = h->data;
	uint64_t n;

	(void)events;
	if (read(w->tfd, &n, sizeof(n)) != (ssize_t)sizeof(n) || status < 0)
		return;
	if (util_now_ns() >= w->close_ns)
		return; /* the loop was busy through the window */
	w->st.windows++;
	w->in_window = true;
	awake_until(w, w->close_ns);
}

void wake_ahead_frame(struct pprpcd *d)
{
	struct wake_ahead *w = d->wake;
	uint64_t now;

	if (!w)
		return;
	now = util_now_ns();
	if (now - w->last_frame_ns >= BURST_GAP_NS) {
		if (w->in_window)
			w->st.hits++;
		w->in_window = false;
		/* a pause (a prompt, the next request of a user) is no pace:
		 * it is learnt again from PACE_BURSTS bursts in a row */
		if (w->burst_ns && now - w->burst_ns <= MAX_PERIOD_US * 1000) {
			expect_note(&w->pace, (now - w->burst_ns) / 1000);
			w->paced++;
		} else {
			expect_reset(&w->pace);
			w->paced = 0;
		}
		w->burst_ns = now;
		arm(w);
	}
	w->last_frame_ns = now;
	if (w->paced >= PACE_BURSTS)
		awake_until(w, now + TAIL_NS);
}

void wake_ahead_start(struct pprpcd *d)
{
	struct wake_ahead *w;

	if (!d->opts.wake_ahead)
		return;
	w = calloc(1, sizeof(*w));
	if (!w) {
		LOG(d, LOG_WARN_, "wake-ahead: out of memory; the loop sleeps between requests");
		return;
	}
	w->d = d;
	w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (w->tfd < 0 || uv_poll_init(d->loop, &w->poll, w->tfd) < 0) {
		LOG(d, LOG_WARN_, "wake-ahead: no timer (%s); the loop sleeps between requests", strerror(errno));
		if (w->tfd >= 0)
			close(w->tfd);
		free(w);
		return;
	}
	uv_idle_init(d->loop, &w->idle);
	w->poll.data = w->idle.data = w;
	w->open_handles = 2;
	/* neither keeps the loop alive: the daemon's life is its listener's */
	uv_unref((uv_handle_t *)&w->poll);
	uv_unref((uv_handle_t *)&w->idle);
	uv_poll_start(&w->poll, UV_READABLE, on_timer);
	d->wake = w;
}

void wake_ahead_stats_get(const struct pprpcd *d, struct wake_ahead_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (d->wake)
		*ret = d->wake->st;
}

static void closed(uv_handle_t *h)
{
	struct wake_ahead *w = h->data;

	if (--w->open_handles == 0) {
		close(w->tfd);
		free(w);
	}
}

void wake_ahead_stop(struct pprpcd *d)
{
	struct wake_ahead *w = d->wake;

	if (!w)
		return;
	d->wake = NULL;
	LOG(d, LOG_NOTICE_, "wake-ahead: %llu windows opened, %llu bursts came inside one",
	    (unsigned long long)w->st.windows, (unsigned long long)w->st.hits);
	uv_poll_stop(&w->poll);
	uv_idle_stop(&w->idle);
	uv_close((uv_handle_t *)&w->poll, closed);
	uv_close((uv_handle_t *)&w->idle, closed);
}
