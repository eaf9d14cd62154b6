/*
 * daemon/xfer/land.h — landing pages: small stage-boundary transfers
 * between two daemons of one host through a page of shared memory, with no
 * byte on the peer link and no hop through either loop.
 *
 * Why: a decoded token's boundary is a few KiB (one row of hidden state).
 * By the link it cost, on an H100 with two ggml:CUDA0 ranks, the SEND's
 * copy, the hand-over to the source's loop, TCP, the destination's loop
 * and worker wake-ups: 110-125 us from the SEND to the RECV's end, of
 * which the copies are ~20 (doc/llama-vs-rpc.md).  Here the source's
 * worker copies the bytes straight into the destination's page and rings
 * the slot's bell (a 64-bit store); the destination's worker, already
 * waiting in the RECV, sees the bell and copies them into the region.
 *
 * The destination makes one page per source rank (a file under /dev/shm,
 * LAND_PAGE_BYTES, mode 0600, named pprpc-land-PID-RANDOM) and offers a
 * free slot in each PULL of LAND_SLOT_BYTES or less (Pull.land_*), with a
 * generation the slot never had before.  A source on the same host (boot
 * id) opens the page by name, checks it (a regular file of this user and
 * this size, the header's layout), writes the bytes, the size and then the
 * bell = generation (release), and answers the PULL with one chunk flagged
 * landed.  The destination takes the bytes only when the bell is exactly
 * its generation and the size its RECV's: a late or stray write of another
 * generation is never taken.  A slot whose transfer did not end with the
 * source's final answer (a lost link, an error) is never offered again:
 * the source may still write it.  The name is unlinked once the source
 * answered from the page (it has it open) and at exit; a page of a daemon
 * that died is removed by the next daemon's sweep at start.
 *
 * What the destination's worker does while it waits (dest.c): for up to
 * land-wait-us from the RECV's first run it waits in place, asleep on the
 * page's wake word (a futex: the source adds to it and wakes it after the
 * bell; the worker's queue does when other work comes, and the worker goes
 * back to it); on a device whose memory is not host memory (a GPU) it
 * polls the bell instead from shortly before the bytes are expected (how
 * long the last RECVs waited), so it sees them within a microsecond
 * without keeping a core busy all the while.  After that time the
 * source's answer on the link wakes it.
 *
 * Threads: pages, offers and settlements on the loop; land_landed and
 * land_put on workers (the mapping is held by a reference the transfer
 * keeps until its command ended).
 */
#ifndef PPRPC_DAEMON_XFER_LAND_H
#define PPRPC_DAEMON_XFER_LAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct conn;
struct device;
struct xfer;

#define LAND_SLOTS 16u
/* Larger transfers go by the link, IPC or in place (XS_DIRECT_MIN). */
#define LAND_SLOT_BYTES (256u << 10)
#define LAND_HDR_BYTES 4096u
#define LAND_PAGE_BYTES ((uint64_t)LAND_HDR_BYTES + (uint64_t)LAND_SLOTS * LAND_SLOT_BYTES)
#define LAND_NAME_MAX 64
#define LAND_DIR "/dev/shm"
#define LAND_PREFIX "pprpc-land-"

struct land_page;

/* One slot of one page, for one transfer. */
struct land_ref {
	struct land_page *pg;       /* NULL: none */
	uint32_t slot;
	uint64_t gen;
};

/* ---- checks of what another process wrote (fuzzed: tests/fuzz/fuzz_land.c) ---- */

/* Is name one this code makes: pprpc-land-, 1 to 10 digits, '-', 32
 * lowercase hex digits, nothing else (so it stays a file in LAND_DIR)? */
bool land_name_ok(const char *name);
/* Does the page at base (len bytes) have this code's header?  0, or
 * PPRPC_EPROTO with the reason. */
int land_hdr_check(const void *base, uint64_t len, char *why, size_t whylen);
/* Slot slot's bell and size as the destination reads them: 1 when the
 * bell is gen and the size is size; 0 not (yet) this generation; < 0 the
 * bell is gen with another size (PPRPC_EPROTO). */
int land_desc_check(const void *base, uint32_t slot, uint64_t gen, uint64_t size);

/* ---- destination ---------------------------------------------------------------- */

/* At start: remove pages of this user whose daemon is gone. */
void land_sweep(void);
/* A slot for a transfer of size bytes from rank peer (made with its page
 * when needed): 0, or < 0 (none free, no page to be had: the transfer goes
 * another way).  Loop. */
int land_offer(struct xfer *xf, const char *peer, uint64_t size, struct land_ref *ret);
const char *land_page_name(const struct land_ref *r);
/* Has the slot this transfer's bytes (any thread)?  As land_desc_check. */
int land_landed(const struct land_ref *r, uint64_t size);
const void *land_data(const struct land_ref *r);
/* Worker, waiting in place: the page's wake word (the source adds to it
 * after each bell; the worker's own queue does when work comes, once the
 * word is named to it), its value now, and a sleep on it of at most
 * timeout_us unless it moved from seq.  land_sleep returns as
 * land_landed after it. */
_Atomic uint32_t *land_wake_word(const struct land_ref *r);
uint32_t land_wake_seq(const struct land_ref *r);
int land_sleep(const struct land_ref *r, uint64_t size, uint32_t seq, uint64_t timeout_us);
/* How long RECVs from this page waited for their bytes, lately (0: not
 * known yet), and this one's wait. */
uint64_t land_expected_us(const struct land_ref *r);
void land_note_wait(const struct land_ref *r, uint64_t waited_us);
/* When the source rang this slot's bell (xfer_now_us; 0: not stamped: the
 * bell rung by this daemon, or the stamp not written yet).  What a RECV
 * held on the GPU learns its wait from: no thread here saw the bell. */
uint64_t land_rung_us(const struct land_ref *r);
/* The source answered from the page (it has it open: the name may go). */
void land_answered(struct xfer *xf, const struct land_ref *r);
/* A transfer offered the slot came another way: refused (the source's
 * answers said it cannot use the page: another host, landing off, the
 * page not to be opened) or not (it had decided its path before the PULL
 * came).  Until the source answers from a page, the worker does not wait
 * in place for it; a page the source had open once and now refuses is replaced
 * (the source was restarted: the name is gone). */
void land_unused(struct xfer *xf, const struct land_ref *r, bool refused);
/* Should the worker wait in place for this slot's bytes? */
bool land_wait_ok(const struct land_ref *r);
/* A RECV held on the GPU (dest.c): the page page-locked and mapped for
 * dev (once per page; 0, or < 0: not to be held), its slot's bell, and
 * the destination ringing it itself when the bytes will not come from the
 * source: bytes (NULL: none) copied into the slot with their size first,
 * else the size set to one no transfer has.  Loop. */
int land_pin_for(const struct land_ref *r, struct device *dev);
const volatile uint64_t *land_bell(const struct land_ref *r);
void land_ring(const struct land_ref *r, const void *bytes, uint64_t size);
/* The transfer ended: clean (its PULL ended with the source's final
 * answer: the source will not write the slot again) frees the slot; else
 * the slot is never offered again.  Loop. */
void land_settle(struct xfer *xf, struct land_ref *r, bool clean);

/* ---- source ------------------------------------------------------------------------- */

/* Open (or find, per link c) the page a PULL offered and take a reference
 * to its slot: 0, or < 0 with the reason (the transfer goes another way).
 * The page is page-locked for dev's copies where dev can (a GPU: the
 * SEND's device-to-host copy then runs by DMA straight into it).  Loop. */
int land_open(struct xfer *xf, struct conn *c, const char *name, uint32_t slot, uint64_t gen, struct device *dev,
	      struct land_ref *ret, char *why, size_t whylen);
/* Worker: copy n bytes of the region at src (on dev) into the slot, then
 * ring its bell.  0 or < 0. */
int land_put(const struct land_ref *r, struct device *dev, const void *src, uint64_t n);
/* Worker: the same from stream s of dev, behind the work it holds (the run
 * that computes src): the size now, the bytes and the bell by the device,
 * then done (any thread), which calls land_put_woke when the bell rang.
 * PPRPC_EUNSUPP: nothing enqueued (the page is not page-locked for dev, or
 * its streams cannot): land_put after that work. */
struct stream;
int land_put_on(const struct land_ref *r, struct device *dev, struct stream *s, const void *src, uint64_t n,
		void (*done)(void *arg, int status, const char *why), void *arg, char *why, size_t whylen);
/* The bell rang (from this thread or a device): stamp when, and wake the
 * destination's worker if it sleeps. */
void land_put_woke(const struct land_ref *r);
/* Drop a source's reference.  Loop. */
void land_unref(struct xfer *xf, struct land_ref *r);
/* c closed: its pages go once no transfer holds them.  Loop. */
void land_conn_closed(struct xfer *xf, struct conn *c);

/* Shutdown, before the devices close: undo the pages' page locks. */
void land_unpin(struct xfer *xf);
void land_fini(struct xfer *xf);

#endif
