/* daemon/objects/hostpage.c — host pages (see hostpage.h). */
#include "daemon/objects/hostpage.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/core/handles.h"
#include "daemon/device/device.h"
#include "daemon/objects/owner.h"
#include "daemon/pprpcd.h"
#include "pprpc/types.h"
#include "proto/hostpage.h"

#ifndef F_GET_SEALS
#define F_GET_SEALS 1034
#endif
#ifndef F_SEAL_SHRINK
#define F_SEAL_SHRINK 0x0002
#endif

bool hostpage_link_ok(const char *link)
{
	static const char want[] = "/memfd:" HOSTPAGE_NAME " (deleted)";

	return link && !strcmp(link, want);
}

void hostpage_sys_init(struct pprpcd *d)
{
	htab_init(&d->hostpages, HK_HOST_PAGE, 1u << 16);
}

void hostpage_sys_fini(struct pprpcd *d)
{
	htab_fini(&d->hostpages);
}

/* Open the client's memfd through /proc, checked (hostpage.h): an fd, or
 * < 0 with the reason.  The client may change what its fd number names at
 * any time, so nothing is opened by that name for reading or writing: an
 * O_PATH descriptor (which opens nothing: no device's or FIFO's open runs)
 * is taken first, and every check and the real open go through it. */
static int open_checked(uint64_t pid, int32_t fd, uint64_t size, char *err, size_t errlen)
{
	char path[64], self[64], link[128];
	struct stat st;
	ssize_t n;
	int pf, f = -1, seals;

	if (pid == 0 || pid > INT32_MAX || fd < 0) {
		snprintf(err, errlen, "HOST_PAGE_MAP: no process %" PRIu64 " fd %d", pid, (int)fd);
		return PPRPC_EINVAL;
	}
	snprintf(path, sizeof(path), "/proc/%" PRIu64 "/fd/%d", pid, (int)fd);
	pf = open(path, O_PATH | O_CLOEXEC);
	if (pf < 0) {
		snprintf(err, errlen, "HOST_PAGE_MAP: %s: %s", path, strerror(errno));
		return PPRPC_EUNSUPP;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pf);
	n = readlink(self, link, sizeof(link) - 1);
	if (n >= 0)
		link[n] = '\0';
	if (n < 0 || !hostpage_link_ok(link) || fstat(pf, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "HOST_PAGE_MAP: %s is not a host page's memfd", path);
		goto fail;
	}
	if ((uint64_t)st.st_size != size) {
		snprintf(err, errlen, "HOST_PAGE_MAP: %s is not a host page of %" PRIu64 " bytes", path, size);
		goto fail;
	}
	/* the same file, now opened for mapping (a regular file's open has no
	 * effect of its own) */
	f = open(self, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (f < 0) {
		snprintf(err, errlen, "HOST_PAGE_MAP: cannot open %s: %s", path, strerror(errno));
		close(pf);
		return PPRPC_EUNSUPP;
	}
	seals = fcntl(f, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		snprintf(err, errlen, "HOST_PAGE_MAP: %s is not sealed against shrinking", path);
		goto fail;
	}
	close(pf);
	return f;
fail:
	if (f >= 0)
		close(f);
	close(pf);
	return PPRPC_EINVAL;
}

int hostpage_map(struct pprpcd *d, struct owner *o, uint64_t pid, int32_t fd, uint64_t size, const uint8_t *key,
		 size_t keylen, struct hostpage **ret, char *err, size_t errlen)
{
	struct hostpage *p = NULL;
	void *m = MAP_FAILED;
	int f = -1, rc;

	if (o->nhostpages >= HOSTPAGE_MAX_PER_OWNER) {
		snprintf(err, errlen, "HOST_PAGE_MAP: this connection has %u host pages mapped already",
			 HOSTPAGE_MAX_PER_OWNER);
		return PPRPC_ELIMIT;
	}
	if (size <= HOSTPAGE_HDR || size > HOSTPAGE_MAX_BYTES || size % 4096) {
		snprintf(err, errlen, "HOST_PAGE_MAP: a page of %" PRIu64 " bytes (whole 4 KiB pages, %u < size <= %llu)",
			 size, HOSTPAGE_HDR, HOSTPAGE_MAX_BYTES);
		return PPRPC_EINVAL;
	}
	if ((f = open_checked(pid, fd, size, err, errlen)) < 0)
		return f;
	m = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
	if (m == MAP_FAILED) {
		int e = errno;

		close(f);
		snprintf(err, errlen, "HOST_PAGE_MAP: cannot map %" PRIu64 " bytes: %s", size, strerror(e));
		/* EPERM: the client sealed it against writes; only a lack of
		 * memory is the daemon's */
		return e == ENOMEM || e == EAGAIN ? PPRPC_ENOMEM : PPRPC_EINVAL;
	}
	close(f);
	if ((rc = hostpage_hdr_check(m, size, key, keylen, err, errlen)) < 0)
		goto fail;
	p = calloc(1, sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "out of memory");
		rc = PPRPC_ENOMEM;
		goto fail;
	}
	p->base = m;
	p->size = size;
	p->d = d;
	p->owner = o;
	p->refs = 1;
	rc = htab_insert(&d->hostpages, p, &p->handle);
	if (rc < 0) {
		snprintf(err, errlen, "HOST_PAGE_MAP: no handle for it");
		goto fail;
	}
	/* Page-locked, a GPU's download is DMA straight into it; without, the
	 * copy still lands (through the driver's own staging), slower. */
	for (uint32_t i = 0; i < d->ndev && !p->pinned_by && d->hostpage_pinned + size <= HOSTPAGE_PIN_MAX; i++)
		if (d->dev[i] && device_pin_host(d->dev[i], p->base + HOSTPAGE_HDR, size - HOSTPAGE_HDR, 1) == 0)
			p->pinned_by = d->dev[i];
	if (p->pinned_by)
		d->hostpage_pinned += size;
	owner_add_hostpage(o, p);
	*ret = p;
	return 0;
fail:
	free(p);
	munmap(m, (size_t)size);
	return rc;
}

struct hostpage *hostpage_get(struct pprpcd *d, const struct owner *o, uint64_t handle)
{
	struct hostpage *p = htab_get(&d->hostpages, handle);

	return p && p->owner == o ? p : NULL;
}

int hostpage_region(const struct hostpage *p, uint64_t off, uint64_t n, uint8_t **ret, char *err, size_t errlen)
{
	uint64_t room = p->size - HOSTPAGE_HDR;

	if (off > room || n > room - off) {
		snprintf(err, errlen, "host page region [%" PRIu64 ", +%" PRIu64 ") outside its %" PRIu64 " bytes",
			 off, n, room);
		return PPRPC_ERANGE;
	}
	*ret = p->base + HOSTPAGE_HDR + off;
	return 0;
}

void hostpage_ref(struct hostpage *p)
{
	p->refs++;
}

void hostpage_unref(struct hostpage *p)
{
	if (--p->refs > 0)
		return;
	if (p->pinned_by) {
		device_pin_host(p->pinned_by, p->base + HOSTPAGE_HDR, p->size - HOSTPAGE_HDR, 0);
		p->d->hostpage_pinned -= p->size;
	}
	munmap(p->base, (size_t)p->size);
	free(p);
}

void hostpage_retire(struct pprpcd *d, struct hostpage *p)
{
	if (!p->handle)
		return;
	htab_remove(&d->hostpages, p->handle);
	p->handle = 0;
	owner_remove_hostpage(p->owner, p);
	p->owner = NULL;
	hostpage_unref(p);
}
