/*
 * daemon/xfer/path_cma.c — CPU daemons of one host (cpu-ipc): the source's
 * pool is its own memory, the destination reads it with one
 * process_vm_readv (cross-memory attach, as MPI libraries do within a
 * node): one copy instead of two through a socket.
 *
 * The announcement names a process, an address and a size, and the copy
 * reads whatever that names with the daemon's own rights — its own memory
 * included (a PULL answer naming the destination's pid and the address of
 * another client's buffer copied that buffer into the attacker's RECV).
 * So before the first copy of a transfer the destination checks the
 * announcement against what the kernel says, never the peer's word
 * (xpath_cma_check): the pid must be the process at the other end of the
 * link the PULL went over — the one owning the TCP listener at the address
 * the link is connected to (/proc/net/tcp{,6}, then /proc/PID/fd) — and on
 * one link the pool never changes.  Every chunk of the transfer then names
 * the same pool (recv_sm), and the copy stays inside it (the CPU backend's
 * ipc_copy bounds it by the pool's size).
 */
#include "daemon/xfer/path.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/peer/peer.h"
#include "daemon/xfer/xdev.h"
#include "daemon/xfer/xfer_impl.h"
#include "pprpc/types.h"
#include "util/addr.h"

/* The pool handle of the CPU backend's cross-memory attach, as it goes on
 * the wire (daemon/backend/cpu/dev_cpu.c, struct cma_handle; the magic
 * catches a change of that layout, which then fails safe: no copy). */
struct cma_wire {
	char magic[8];
	uint64_t pid;
	uint64_t addr;
	uint64_t bytes;
};

static const char CMA_MAGIC[8] = "pprpcCMA";

_Static_assert(sizeof(struct cma_wire) <= XDEV_IPC_HANDLE, "a CMA handle fits an IPC handle");

static int cma_copy_in(const struct xpath *p, void *dst, const uint8_t *handle, uint64_t off, uint64_t n,
		       char *err, size_t errlen)
{
	return xdev_ipc_copy(p->dev, dst, handle, off, n, err, errlen);
}

static int cma_copy_wait(const struct xpath *p, char *err, size_t errlen)
{
	return xdev_ipc_wait(p->dev, err, errlen);
}

const struct xpath_ops xpath_cma_ops = {
	.name = "cma",
	.where = XS_POOL,
	.capture = xpath_pool_capture,
	.describe = xpath_pool_describe,
	.copy_in = cma_copy_in,
	.copy_wait = cma_copy_wait,
};

/* ---- who owns the listener at the link's address ------------------------------------ */

struct ep {
	int v6;
	uint8_t ip[16];           /* v4 in the first 4 bytes */
	uint16_t port;
};

static int ep_parse(const char *s, struct ep *ep)
{
	char host[128];

	memset(ep, 0, sizeof(*ep));
	if (addr_split(s, host, sizeof(host), &ep->port, 0) < 0 || !ep->port)
		return -1;
	if (inet_pton(AF_INET, host, ep->ip) == 1)
		return 0;
	ep->v6 = 1;
	return inet_pton(AF_INET6, host, ep->ip) == 1 ? 0 : -1;
}

/* /proc/net/tcp prints each 32-bit word of the address as the integer the
 * kernel holds (network byte order in memory): reading it back as an
 * integer and storing it gives the address bytes. */
static int hex_ip(const char *hex, size_t words, uint8_t *out)
{
	for (size_t i = 0; i < words; i++) {
		char w[9];
		uint32_t v;

		memcpy(w, hex + 8 * i, 8);
		w[8] = '\0';
		v = (uint32_t)strtoul(w, NULL, 16);
		memcpy(out + 4 * i, &v, 4);
	}
	return 0;
}

enum { MATCH_NONE, MATCH_ANY, MATCH_EXACT };

static int match(const struct ep *ep, int v6, const uint8_t *ip)
{
	static const uint8_t zero[16], mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (!v6) {
		if (ep->v6)
			return MATCH_NONE;
		return !memcmp(ip, ep->ip, 4) ? MATCH_EXACT : !memcmp(ip, zero, 4) ? MATCH_ANY : MATCH_NONE;
	}
	if (!memcmp(ip, zero, 16))
		return MATCH_ANY;
	if (ep->v6)
		return !memcmp(ip, ep->ip, 16) ? MATCH_EXACT : MATCH_NONE;
	return !memcmp(ip, mapped, 12) && !memcmp(ip + 12, ep->ip, 4) ? MATCH_EXACT : MATCH_NONE;
}

#define MAX_INO 8

/* The inodes of the TCP sockets listening at ep: those bound to its very
 * address if any, else the wildcard ones.  Returns how many. */
static int listen_inodes(const struct ep *ep, unsigned long *ino)
{
	static const char *const files[2] = { "/proc/net/tcp", "/proc/net/tcp6" };
	unsigned long exact[MAX_INO], any[MAX_INO];
	int nexact = 0, nany = 0;

	for (int f = 0; f < 2; f++) {
		FILE *fp = fopen(files[f], "r");
		char line[512];

		if (!fp)
			continue;
		while (fgets(line, sizeof(line), fp)) {
			char local[64], *colon;
			unsigned st, port;
			unsigned long inode;
			uint8_t ip[16];
			int m;

			/* sl local rem st tx:rx tr:tm retrnsmt uid timeout inode */
			if (sscanf(line, " %*s %63s %*s %x %*s %*s %*s %*s %*s %lu", local, &st, &inode) != 3 ||
			    st != 0x0A || !(colon = strchr(local, ':')))
				continue;
			port = (unsigned)strtoul(colon + 1, NULL, 16);
			if (port != ep->port || (size_t)(colon - local) != (f ? 32u : 8u))
				continue;
			hex_ip(local, f ? 4 : 1, ip);
			m = match(ep, f, ip);
			if (m == MATCH_EXACT && nexact < MAX_INO)
				exact[nexact++] = inode;
			else if (m == MATCH_ANY && nany < MAX_INO)
				any[nany++] = inode;
		}
		fclose(fp);
	}
	if (nexact) {
		memcpy(ino, exact, nexact * sizeof(*ino));
		return nexact;
	}
	memcpy(ino, any, nany * sizeof(*ino));
	return nany;
}

/* Does pid hold one of the sockets? */
static int pid_holds(uint64_t pid, const unsigned long *ino, int n)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%" PRIu64 "/fd", pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	while (!found && (e = readdir(dir))) {
		char target[64];
		unsigned long inode;
		ssize_t k = readlinkat(dirfd(dir), e->d_name, target, sizeof(target) - 1);

		if (k <= 0)
			continue;
		target[k] = '\0';
		if (sscanf(target, "socket:[%lu]", &inode) != 1)
			continue;
		for (int i = 0; i < n; i++)
			if (ino[i] == inode)
				found = 1;
	}
	closedir(dir);
	return found;
}

/* Links whose pool was checked (loop thread): one per link serial. */
struct cma_link {
	char rank[64];
	uint64_t serial;
	struct cma_wire pool;
};

#define CMA_LINKS 16

struct cma_links {
	struct cma_link l[CMA_LINKS];
	unsigned next;
};

int xpath_cma_check(struct xfer *xf, const char *rank, const uint8_t *handle, char *err, size_t errlen)
{
	struct cma_links *cl = xf->cma;
	struct cma_link *slot = NULL;
	struct cma_wire h;
	unsigned long ino[MAX_INO];
	char addr[80];
	uint64_t serial;
	struct ep ep;
	int n;

	memcpy(&h, handle, sizeof(h));
	if (memcmp(h.magic, CMA_MAGIC, sizeof(h.magic)) || !h.pid || h.pid > INT32_MAX) {
		snprintf(err, errlen, "not a cross-memory-attach pool announcement");
		return PPRPC_EAUTH;
	}
	if (peer_link_info(xf->d, rank, addr, sizeof(addr), &serial) < 0) {
		snprintf(err, errlen, "the link to %.63s is not up", rank);
		return PPRPC_EAUTH;
	}
	if (!cl && !(cl = xf->cma = calloc(1, sizeof(*cl)))) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	for (unsigned i = 0; i < CMA_LINKS; i++)
		if (cl->l[i].serial == serial && !strcmp(cl->l[i].rank, rank))
			slot = &cl->l[i];
	if (slot) {
		/* One link, one pool: the source announced it once. */
		if (memcmp(&slot->pool, &h, sizeof(h))) {
			snprintf(err, errlen, "%.63s announced another pool (pid %" PRIu64 ", %" PRIu64
				 " bytes) than before on this link", rank, h.pid, h.bytes);
			return PPRPC_EAUTH;
		}
		return 0;
	}
	if (ep_parse(addr, &ep) < 0) {
		snprintf(err, errlen, "the link to %.63s has no TCP address (%.40s) to check its process by", rank, addr);
		return PPRPC_EAUTH;
	}
	n = listen_inodes(&ep, ino);
	if (!n || !pid_holds(h.pid, ino, n)) {
		snprintf(err, errlen, "%.63s named pid %" PRIu64 " for its pool, which is not the process listening at %.40s",
			 rank, h.pid, addr);
		return PPRPC_EAUTH;
	}
	slot = &cl->l[cl->next++ % CMA_LINKS];
	snprintf(slot->rank, sizeof(slot->rank), "%s", rank);
	slot->serial = serial;
	slot->pool = h;
	return 0;
}

void xpath_cma_fini(struct xfer *xf)
{
	free(xf->cma);
	xf->cma = NULL;
}
