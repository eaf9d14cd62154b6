/*
 * daemon/weights/wfile.c — reading a verified model file.  The file was
 * hashed (or its sidecar trusted) for one (size, mtime, inode); every read
 * checks it is still that file before and after, so bytes of a file
 * rewritten, truncated or replaced under the rank are never passed on as
 * the verified ones.
 */
#include "daemon/weights/wsrc_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprpc/types.h"

void wfile_put(struct wfile *f)
{
	if (!f)
		return;
	if (f->fd >= 0)
		close(f->fd);
	free(f->name);
	free(f);
}

const char *wfile_name(const struct wfile *f)
{
	return f->name;
}

int wfile_check(const struct wfile *f, const char *when, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(f->fd, &st)) {
		snprintf(err, errlen, "%s: fstat: %s", f->name, strerror(errno));
		return PPRPC_EIO;
	}
	if ((uint64_t)st.st_size < f->size) {
		snprintf(err, errlen, "%s: truncated under the rank (%s: %llu bytes, verified %llu)", f->name,
			 when, (unsigned long long)st.st_size, (unsigned long long)f->size);
		return PPRPC_EIO;
	}
	if ((uint64_t)st.st_size != f->size || wio_mtime_ns(&st) != f->mtime_ns || wio_ctime_ns(&st) != f->ctime_ns ||
	    st.st_ino != f->ino || st.st_dev != f->dev) {
		snprintf(err, errlen, "%s: changed under the rank (%s: size, mtime, ctime or inode differ from the "
			 "verified file)",
			 f->name, when);
		return PPRPC_EIO;
	}
	return 0;
}

int wfile_read(struct wsrc *w, struct wfile *f, uint64_t offset, uint64_t size, void *dst, char *err,
	       size_t errlen)
{
	uint64_t t0 = wio_now_ns();
	char msg[200];
	int rc;

	if (offset > f->size || size > f->size - offset) {
		snprintf(err, errlen, "%s: range %llu+%llu outside the file (%llu bytes)", f->name,
			 (unsigned long long)offset, (unsigned long long)size, (unsigned long long)f->size);
		rc = PPRPC_ERANGE;
		goto refused;
	}
	if ((rc = wfile_check(f, "before the read", err, errlen)) < 0)
		goto refused;
	if ((rc = wio_pread(f->fd, dst, offset, size, w->threads, msg, sizeof(msg))) < 0) {
		snprintf(err, errlen, "%s: %s", f->name, msg);
		goto refused;
	}
	if ((rc = wfile_check(f, "after the read", err, errlen)) < 0)
		goto refused;
	pthread_mutex_lock(&w->lock);
	w->st.file_reads++;
	w->st.file_bytes += size;
	w->st.file_ns += wio_now_ns() - t0;
	pthread_mutex_unlock(&w->lock);
	return 0;
refused:
	return wfile_refused(w, rc);
}

int wfile_refused(struct wsrc *w, int rc)
{
	pthread_mutex_lock(&w->lock);
	w->st.file_refused++;
	pthread_mutex_unlock(&w->lock);
	return rc;
}
