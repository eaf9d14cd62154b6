/*
 * libclient/host_page.c — host pages: memory of this process that a daemon
 * on the same host writes TENSOR_GETs into straight from its device
 * (pprpc_host_alloc; proto/hostpage.h and daemon/objects/hostpage.h say
 * why and what the daemon checks).
 *
 * Each allocation is a memfd sealed against shrinking and growing (the
 * daemon's stores into its mapping can never fault), its first page a
 * header holding a random key.  A GET whose destination lies in one is
 * sent naming the page (HOST_PAGE_MAP once per connection and page, then
 * the handle and the offset) and its reply carries no bytes.  A daemon that
 * cannot map it (another user, no /proc) answers why; the connection then
 * reads that page's GETs by the link as before.  A daemon of another host
 * (HELLO's host is not our boot id) is never asked.
 *
 * The registry of allocations is process-wide (any thread may allocate or
 * free); what a connection mapped is its own (calls on one client are
 * serialized by its user, as every call of this library).  A page freed
 * while daemons hold it is unmapped there at the next GET of each client
 * that mapped it (pprpc_host_free cannot call into clients other threads
 * may be using); until then the daemon's mapping keeps the memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libclient/client.h"
#include "proto/auth.h"
#include "proto/hostpage.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

struct hregion {
	struct hregion *next;
	uint64_t id;
	uint8_t *file;         /* the mapping: header, then the caller's memory */
	uint64_t file_bytes;
	int fd;
	uint8_t key[HOSTPAGE_KEY];
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hregion *regions;
static uint64_t next_region = 1;
static atomic_uint_least64_t frees;     /* pages freed so far: clients sweep when it moved */

static pthread_once_t boot_once = PTHREAD_ONCE_INIT;
static char boot_id[40];

static void read_boot_id(void)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	if (!f)
		return;
	if (fgets(boot_id, sizeof(boot_id), f))
		boot_id[strcspn(boot_id, "\n")] = '\0';
	else
		boot_id[0] = '\0';
	fclose(f);
}

PPRPC_API void *pprpc_host_alloc(uint64_t size)
{
	uint64_t bytes = HOSTPAGE_HDR + ((size + 4095) & ~(uint64_t)4095);
	struct hregion *r = NULL;
	void *m = MAP_FAILED;
	int fd = -1, err;

	if (!size || size > HOSTPAGE_MAX_BYTES - HOSTPAGE_HDR) {
		errno = EINVAL;
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	fd = memfd_create(HOSTPAGE_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		goto fail;
	if (ftruncate(fd, (off_t)bytes) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		goto fail;
	m = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		goto fail;
	if (auth_random(r->key, sizeof(r->key)) < 0) {
		errno = EIO;
		goto fail;
	}
	hostpage_hdr_init(m, bytes, r->key);
	r->file = m;
	r->file_bytes = bytes;
	r->fd = fd;
	pthread_mutex_lock(&reg_lock);
	r->id = next_region++;
	r->next = regions;
	regions = r;
	pthread_mutex_unlock(&reg_lock);
	return r->file + HOSTPAGE_HDR;
fail:
	err = errno;
	if (m != MAP_FAILED)
		munmap(m, (size_t)bytes);
	if (fd >= 0)
		close(fd);
	free(r);
	errno = err;
	return NULL;
}

PPRPC_API void pprpc_host_free(void *ptr)
{
	struct hregion *r = NULL;

	if (!ptr)
		return;
	pthread_mutex_lock(&reg_lock);
	for (struct hregion **pp = &regions; *pp; pp = &(*pp)->next)
		if ((*pp)->file + HOSTPAGE_HDR == (uint8_t *)ptr) {
			r = *pp;
			*pp = r->next;
			break;
		}
	if (r)
		atomic_fetch_add(&frees, 1);
	pthread_mutex_unlock(&reg_lock);
	if (!r)
		return;  /* not one of ours: as free(NULL), nothing to do */
	auth_wipe(r->file, HOSTPAGE_HDR);
	munmap(r->file, (size_t)r->file_bytes);
	close(r->fd);
	auth_wipe(r->key, sizeof(r->key));
	free(r);
}

/* The allocation holding size bytes at ptr (reg_lock held), or NULL. */
static const struct hregion *region_holding(const void *ptr, uint64_t size)
{
	const uint8_t *p = ptr;

	for (const struct hregion *r = regions; r; r = r->next) {
		const uint8_t *lo = r->file + HOSTPAGE_HDR, *hi = r->file + r->file_bytes;

		if (p >= lo && p < hi && size <= (uint64_t)(hi - p))
			return r;
	}
	return NULL;
}

static bool region_live(uint64_t id)
{
	bool live = false;

	pthread_mutex_lock(&reg_lock);
	for (const struct hregion *r = regions; r && !live; r = r->next)
		live = r->id == id;
	pthread_mutex_unlock(&reg_lock);
	return live;
}

PPRPC_API int pprpc_host_is(const void *ptr, uint64_t size)
{
	int found;

	pthread_mutex_lock(&reg_lock);
	found = region_holding(ptr, size) != NULL;
	pthread_mutex_unlock(&reg_lock);
	return found;
}

/* A request of the library's own on the way to the caller's: its failure
 * is not the caller's, so c's last error is left as it was. */
static int side_call(pprpc_client *c, uint16_t type, const ProtobufCMessage *req,
		     const ProtobufCMessageDescriptor *rep_desc, ProtobufCMessage **ret_rep, char *why, size_t whylen)
{
	char saved[sizeof(c->err)];
	int rc;

	memcpy(saved, c->err, sizeof(saved));
	rc = rpc_call(c, type, req, NULL, 0, rep_desc, ret_rep, NULL, 0);
	if (rc < 0 && why)
		snprintf(why, whylen, "%.255s", c->err);
	memcpy(c->err, saved, sizeof(saved));
	return rc;
}

/* Drop c's entries of pages freed since it last looked, unmapping them
 * at its daemon (their handles would keep the memory there). */
static void sweep(pprpc_client *c)
{
	uint64_t seen = atomic_load(&frees);

	if (seen == c->hp_seen_frees)
		return;
	c->hp_seen_frees = seen;
	for (int i = 0; i < c->nhp;) {
		if (region_live(c->hp[i].region)) {
			i++;
			continue;
		}
		if (c->hp[i].handle) {
			Pprpc__HostPageUnmap req = PPRPC__HOST_PAGE_UNMAP__INIT;

			req.host_page = c->hp[i].handle;
			(void)side_call(c, MSG_HOST_PAGE_UNMAP, &req.base, NULL, NULL, NULL, 0);
		}
		c->hp[i] = c->hp[--c->nhp];
	}
}

/* Map region r (copied out of the registry) at c's daemon: the entry. */
static struct client_hp *map(pprpc_client *c, const struct hregion *r)
{
	Pprpc__HostPageMap req = PPRPC__HOST_PAGE_MAP__INIT;
	ProtobufCMessage *m = NULL;
	struct client_hp *e;
	int rc;

	if (c->nhp >= CLIENT_MAX_HOST_PAGES)
		return NULL;
	e = &c->hp[c->nhp++];
	memset(e, 0, sizeof(*e));
	e->region = r->id;
	pthread_once(&boot_once, read_boot_id);
	req.pid = (uint64_t)getpid();
	req.fd = r->fd;
	req.size = r->file_bytes;
	req.key.data = (uint8_t *)r->key;
	req.key.len = sizeof(r->key);
	req.host = boot_id;
	/* a refusal is not the caller's failure: its GET goes by the link */
	rc = side_call(c, MSG_HOST_PAGE_MAP, &req.base, &pprpc__host_page_map_reply__descriptor, &m, c->hp_why,
		       sizeof(c->hp_why));
	if (rc == 0) {
		e->handle = ((const Pprpc__HostPageMapReply *)m)->host_page;
		e->pinned = ((const Pprpc__HostPageMapReply *)m)->pinned;
		meta_free(m);
	}
	return e;
}

PPRPC_API int pprpc_same_host(const pprpc_client *c)
{
	pthread_once(&boot_once, read_boot_id);
	return c && boot_id[0] && !strcmp(c->daemon_host, boot_id);
}

int host_page_target(pprpc_client *c, const void *data, uint64_t size, uint64_t *ret_handle, uint64_t *ret_off)
{
	const struct hregion *r;
	struct hregion found;

	if (!size || !pprpc_same_host(c))
		return 0;
	sweep(c);
	pthread_mutex_lock(&reg_lock);
	r = region_holding(data, size);
	if (r) {
		found = *r;
		*ret_off = (uint64_t)((const uint8_t *)data - (r->file + HOSTPAGE_HDR));
	}
	pthread_mutex_unlock(&reg_lock);
	if (!r)
		return 0;
	for (int i = 0; i < c->nhp; i++)
		if (c->hp[i].region == found.id) {
			*ret_handle = c->hp[i].handle;
			return c->hp[i].handle != 0;
		}
	{
		struct client_hp *e = map(c, &found);

		auth_wipe(found.key, sizeof(found.key));
		if (!e || !e->handle)
			return 0;
		*ret_handle = e->handle;
		return 1;
	}
}

void host_page_forget(pprpc_client *c)
{
	/* the daemon's session (and its handles) went with the connection */
	c->nhp = 0;
}

PPRPC_API int pprpc_host_page_state(const pprpc_client *c, int *ret_mapped, int *ret_pinned, char *why,
				    size_t whylen)
{
	int mapped = 0, pinned = 0;

	if (!c)
		return PPRPC_EINVAL;
	for (int i = 0; i < c->nhp; i++) {
		mapped += c->hp[i].handle != 0;
		pinned += c->hp[i].handle != 0 && c->hp[i].pinned;
	}
	if (ret_mapped)
		*ret_mapped = mapped;
	if (ret_pinned)
		*ret_pinned = pinned;
	if (why && whylen)
		snprintf(why, whylen, "%s", c->hp_why);
	return 0;
}
