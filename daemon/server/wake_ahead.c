/*
 * daemon/server/wake_ahead.c — awake when a client's next requests are due
 * (see wake_ahead.h).
 *
 * A burst is the frames of clients (peers' excluded: their requests follow
 * the clients') that come less than BURST_GAP apart.  A period may hold
 * more than one burst (a token's requests, then the FENCE behind them), so
 * the next burst is foretold from the one n bursts back (n = 1..PHASES) plus
 * the moving average of the time between bursts n apart, the n whose last
 * foretellings missed least (util/expect.h); 20 ms or less, learnt again
 * after a pause.  A timerfd (libuv's timers count whole milliseconds, a
 * token is a few) opens the window 100 us plus twice that miss (at most
 * 500 us) before the burst is due; in it an idle handle keeps libuv
 * polling without sleeping.  Once a burst's frames come, the workers look
 * for their commands without sleeping too (queue_spin_until), until TAIL
 * after the last frame: the loop pushes them faster than a sleeping worker
 * wakes.
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

#define BURST_GAP_NS 500000ull   /* a frame after this long without one starts a burst */
#define TAIL_NS 100000ull        /* awake this long after a burst's frame: its next comes within */
#define MAX_PERIOD_US 20000ull   /* at a slower pace a wake-up is noise */
#define MIN_MARGIN_US 100ull     /* a wake-up's worth (bench/wake-probe.c) */
#define MAX_MARGIN_US 500ull
#define PACE_BURSTS 3            /* foretellings before they are trusted */
#define PHASES 3                 /* bursts a period may hold */

struct wake_ahead {
	struct pprpcd *d;
	int tfd;
	uv_poll_t poll;
	uv_idle_t idle;
	int open_handles;          /* freed when the last one closed */
	uint64_t hist[PHASES];     /* the last bursts' starts, [0] the newest */
	uint32_t nhist;            /* of them known (0 after a pause) */
	struct expect gap[PHASES]; /* us from a burst to the one n + 1 after it */
	struct expect miss[PHASES];/* us the foretelling from n + 1 back missed by (+1: 0 is unknown) */
	uint32_t told[PHASES];     /* foretellings made from n + 1 back */
	uint64_t last_frame_ns;
	uint64_t close_ns;         /* the armed window's end */
	uint64_t spin_until_ns;    /* the loop's (it spins while idle is active) */
	bool in_window;            /* the window opened, no burst came yet */
	bool paced;                /* a window is armed */
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
	w->in_window = false;
}

/* The loop awake until until; the workers too when workers. */
static void awake_until(struct wake_ahead *w, uint64_t until, bool workers)
{
	w->spin_until_ns = until;
	if (!uv_is_active((uv_handle_t *)&w->idle))
		uv_idle_start(&w->idle, on_idle);
	if (workers)
		workers_spin(w, until);
}

/* A burst started at now: how the foretellings from 1..PHASES back did,
 * then the history moves on. */
static void learn(struct wake_ahead *w, uint64_t now)
{
	if (w->nhist && now - w->hist[0] > MAX_PERIOD_US * 1000) {
		/* a pause (a prompt, the next request of a user) is no pace */
		w->nhist = 0;
		for (int n = 0; n < PHASES; n++) {
			expect_reset(&w->gap[n]);
			expect_reset(&w->miss[n]);
			w->told[n] = 0;
		}
	}
	for (uint32_t n = 0; n < PHASES && n < w->nhist; n++) {
		uint64_t g = expect_us(&w->gap[n]), iv = (now - w->hist[n]) / 1000;

		if (g) {
			uint64_t due = w->hist[n] + g * 1000, off = now > due ? now - due : due - now;

			expect_note(&w->miss[n], off / 1000 + 1);
			w->told[n]++;
		}
		expect_note(&w->gap[n], iv);
	}
	memmove(&w->hist[1], &w->hist[0], sizeof(w->hist) - sizeof(w->hist[0]));
	w->hist[0] = now;
	if (w->nhist < PHASES)
		w->nhist++;
}

/* Arm the window of the next burst: foretold from the burst n + 1 back
 * that missed least, when it has been foretelling long enough and its
 * misses are small against the gap. */
static void arm(struct wake_ahead *w)
{
	struct itimerspec its;
	int best = -1;
	uint64_t m = 0, open, due;

	memset(&its, 0, sizeof(its));
	for (int n = 0; n < PHASES && (uint32_t)n < w->nhist; n++) {
		uint64_t mi = expect_us(&w->miss[n]);

		if (w->told[n] >= PACE_BURSTS && mi && mi < expect_us(&w->gap[n]) / 4 &&
		    (best < 0 || mi < expect_us(&w->miss[best])))
			best = n;
	}
	w->paced = best >= 0;
	if (w->paced) {
		m = MIN_MARGIN_US + 2 * expect_us(&w->miss[best]);
		if (m > MAX_MARGIN_US)
			m = MAX_MARGIN_US;
		due = w->hist[best] + expect_us(&w->gap[best]) * 1000;
		open = due > m * 1000 ? due - m * 1000 : 1;
		w->close_ns = due + m * 1000;
		its.it_value.tv_sec = (time_t)(open / 1000000000ull);
		its.it_value.tv_nsec = (long)(open % 1000000000ull);
	}
	/* (a zero value disarms: nothing foretold) */
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
	awake_until(w, w->close_ns, false);
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
		learn(w, now);
		arm(w);
	}
	w->last_frame_ns = now;
	if (w->paced)
		awake_until(w, now + TAIL_NS, true);
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
