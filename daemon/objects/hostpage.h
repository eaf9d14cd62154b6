/*
 * daemon/objects/hostpage.h — host pages: memory of a client on this host
 * (a sealed memfd it made, proto/hostpage.h) mapped here so its TENSOR_GETs
 * land there straight from the device (HostPageMap, proto/pprpc.proto).
 *
 * Why: a decoded token's logits are 608 KB (qwen3's vocabulary); by the link
 * they cost, on an H100 with two ranks, 107 us of loopback TCP after the
 * download into pinned staging (doc/llama-vs-rpc.md).  A GPU's download into
 * a page it page-locked goes by DMA straight into the client's memory.
 *
 * What is checked before the first byte is written (hostpage_map): the
 * client names its own host (boot id); /proc/PID/fd/FD is a regular file,
 * a memfd named HOSTPAGE_NAME, sealed against shrinking (so no store of
 * ours ever faults on a page gone from under it) and of the size named;
 * its header holds the key the request names.  A page is its owner's: a
 * handle of another connection is refused as unknown.  At most
 * HOSTPAGE_MAX_PER_OWNER pages per owner, each at most HOSTPAGE_MAX_BYTES,
 * HOSTPAGE_PIN_MAX of them page-locked.
 * The mapping outlives its handle while queued GETs hold it.  Loop thread,
 * but for the bytes themselves (workers write into a held page).
 */
#ifndef PPRPC_DAEMON_HOSTPAGE_H
#define PPRPC_DAEMON_HOSTPAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pprpcd;
struct owner;
struct device;

#define HOSTPAGE_MAX_PER_OWNER 64u
/* Page-locked memory is the host's, outside every limit of ours: at most
 * this much of the clients' pages is, daemon-wide (a page beyond it is
 * mapped unlocked: a GPU's copy into it goes through the driver's staging). */
#define HOSTPAGE_PIN_MAX (2ull << 30)

struct hostpage {
	uint64_t handle;             /* 0 once retired */
	struct owner *owner;
	uint8_t *base;               /* the whole file: the header, then the client's memory */
	uint64_t size;               /* file bytes */
	struct pprpcd *d;
	struct device *pinned_by;    /* page-locked for this device's copies, or NULL */
	int refs;                    /* the handle + queued commands */
	struct hostpage *next, *prev;  /* owner's list */
};

/* Does /proc/PID/fd/FD name a memfd of a host page (the link's text)? */
bool hostpage_link_ok(const char *link);
/* Map the client's page and page-lock it for the copies of the first of
 * d's devices that can (a GPU's registration serves every GPU of the
 * process).  0, or < 0 with the reason in err. */
int hostpage_map(struct pprpcd *d, struct owner *o, uint64_t pid, int32_t fd, uint64_t size, const uint8_t *key,
		 size_t keylen, struct hostpage **ret, char *err, size_t errlen);
/* The live page of owner o behind handle: NULL when unknown, stale or
 * another's (indistinguishable on purpose). */
struct hostpage *hostpage_get(struct pprpcd *d, const struct owner *o, uint64_t handle);
/* Where [off, off + n) of the client's memory is (off from the end of the
 * header): 0, or PPRPC_ERANGE with the reason. */
int hostpage_region(const struct hostpage *p, uint64_t off, uint64_t n, uint8_t **ret, char *err, size_t errlen);
void hostpage_ref(struct hostpage *p);
void hostpage_unref(struct hostpage *p);
/* Retire the handle (drops its reference). */
void hostpage_retire(struct pprpcd *d, struct hostpage *p);

void hostpage_sys_init(struct pprpcd *d);
void hostpage_sys_fini(struct pprpcd *d);

#endif
