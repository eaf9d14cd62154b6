/*
 * daemon/weights/wmap.c — model-file ranges mapped as buffers (wfile_map).
 *
 * A mapping spares the rank reading its share of the model into memory it
 * allocated (issue 30: on a CPU rank the copy, with every page committed
 * and zeroed first, cost more than the link it replaces; llama.cpp run
 * locally maps the file and reads nothing).  It is private and writable:
 * whatever a client writes into the buffer (nothing, for weights) is
 * copied on write and never reaches the file or another mapping.
 *
 * What a mapping cannot do is outlive its file's bytes: pages of a file
 * truncated under it raise SIGBUS when read, as they do in llama.cpp.  The
 * rank cannot carry on from there (a kernel stopped mid-graph), but it can
 * say why it stops: the handler looks the address up in a table of the
 * live mappings (written under a lock, read without one: entries are
 * published by their end address last) and writes the file's name before
 * the signal takes its default course.
 */
#include "daemon/weights/wsrc_impl.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pprpc/types.h"

#define MAX_LIVE 256

struct live {
	_Atomic uintptr_t start, end;  /* end 0: free */
	char name[200];
};

static struct live live[MAX_LIVE];
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction prev;  /* SIGBUS's disposition before ours */

static void put_str(const char *s)
{
	ssize_t n = (ssize_t)strlen(s);

	while (n > 0) {
		ssize_t k = write(2, s, (size_t)n);

		if (k <= 0)
			return;
		s += k;
		n -= k;
	}
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;

	(void)uc;
	for (int i = 0; i < MAX_LIVE; i++) {
		uintptr_t e = atomic_load(&live[i].end), s = atomic_load(&live[i].start);

		if (e && a >= s && a < e) {
			put_str("pprpcd: SIGBUS reading the model file ");
			put_str(live[i].name);
			put_str(" mapped as a weights buffer: the file was truncated under the rank while a model used "
				"it (replace model files by rename, never in place; doc/weights.md)\n");
			break;
		}
	}
	/* the disposition before ours (the default: the fault repeats and
	 * ends the process with its core, as it would have without this) */
	sigaction(sig, &prev, NULL);
}

static void remember(const char *name, void *map, uint64_t len)
{
	struct sigaction now;

	pthread_mutex_lock(&live_lock);
	/* ours unless something replaced it since: then ours again, before it */
	if (sigaction(SIGBUS, NULL, &now) == 0 && now.sa_sigaction != on_sigbus) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigbus;
		sa.sa_flags = SA_SIGINFO;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, &prev) != 0)
			prev = now;
	}
	for (int i = 0; i < MAX_LIVE; i++) {
		if (atomic_load(&live[i].end))
			continue;
		snprintf(live[i].name, sizeof(live[i].name), "%s", name);
		atomic_store(&live[i].start, (uintptr_t)map);
		atomic_store(&live[i].end, (uintptr_t)map + len);
		break;
	}
	pthread_mutex_unlock(&live_lock);
}

static void forget(void *map)
{
	pthread_mutex_lock(&live_lock);
	for (int i = 0; i < MAX_LIVE; i++)
		if (atomic_load(&live[i].start) == (uintptr_t)map && atomic_load(&live[i].end))
			atomic_store(&live[i].end, 0);
	pthread_mutex_unlock(&live_lock);
}

int wfile_map(struct wsrc *w, struct wfile *f, uint64_t offset, uint64_t size, uint64_t align, void **ret_ptr,
	      void **ret_map, uint64_t *ret_maplen, struct wahead **ret_ahead, char *err, size_t errlen)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), lead = offset % page, len;
	void *m;
	int rc;

	*ret_ahead = NULL;
	if (size == 0 || offset > f->size || size > f->size - offset) {
		snprintf(err, errlen, "%s: range %llu+%llu outside the file (%llu bytes)", f->name,
			 (unsigned long long)offset, (unsigned long long)size, (unsigned long long)f->size);
		rc = PPRPC_ERANGE;
		goto refused;
	}
	/* the mapping starts on a page: the bytes keep the offset's phase */
	if (align && (align & (align - 1)) == 0 && lead % align) {
		snprintf(err, errlen, "%s: offset %llu is not aligned to the device's %llu bytes", f->name,
			 (unsigned long long)offset, (unsigned long long)align);
		rc = PPRPC_EINVAL;
		goto refused;
	}
	if ((rc = wfile_check(f, "before mapping", err, errlen)) < 0)
		goto refused;
	len = lead + size;
	m = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, f->fd, (off_t)(offset - lead));
	if (m == MAP_FAILED) {
		snprintf(err, errlen, "%s: mmap of %llu bytes: %s", f->name, (unsigned long long)len, strerror(errno));
		rc = errno == ENOMEM ? PPRPC_ENOMEM : PPRPC_EIO;
		goto refused;
	}
	/* No MADV_WILLNEED: its forced readahead fills the page cache in
	 * single pages, which the first graph then faults in one by one and
	 * computes over at half the speed (a copy mapped that way: warm loads
	 * 1.56x local's against 1.23x without it, doc/llama-vs-rpc.md).  What
	 * graphs will read is read ahead by threads instead (wahead.c). */
	remember(f->name, m, len);
	*ret_ahead = wahead_new(w, f->fd, offset, size);
	wahead_identify(*ret_ahead, f);
	*ret_ptr = (uint8_t *)m + lead;
	*ret_map = m;
	*ret_maplen = len;
	pthread_mutex_lock(&w->lock);
	w->st.maps++;
	w->st.map_bytes += size;
	w->st.mapped_bytes += size;
	pthread_mutex_unlock(&w->lock);
	return 0;
refused:
	return wfile_refused(w, rc);
}

void wsrc_unmapped(struct wsrc *w, void *map, uint64_t size)
{
	forget(map);
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->st.mapped_bytes -= w->st.mapped_bytes < size ? w->st.mapped_bytes : size;
	pthread_mutex_unlock(&w->lock);
}
