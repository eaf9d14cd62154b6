/*
 * ggml-pprpc/buffer.c — the buffer type of a PPRPC device and its buffers.
 *
 * A buffer is one daemon buffer (BUFFER_ALLOC on the device).  ggml places
 * tensors by address (data = base + offset), so each buffer gets a base: a
 * reserved, inaccessible range of this process's address space of the
 * buffer's size.  Addresses are then unique across buffers and never those
 * of real memory, and code that wrongly dereferences one faults at once
 * instead of reading something else.
 *
 * Writes (set_tensor, memset_tensor, a copy into the buffer) are queued on
 * the device's queue: the bytes leave this process before the call returns,
 * so the caller may reuse its memory, and every later command on the device
 * — reads included — runs after them.  A failure there becomes the queue's
 * sticky error: the next read or synchronize reports it, with the command.
 * Reads (get_tensor) wait for their bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pg.h"
#include "pprpc_weights.h"

static void buffer_free(ggml_backend_buffer_t buffer);

struct pg_buffer *pg_buffer_of(ggml_backend_buffer_t buf)
{
	return buf && buf->iface.free_buffer == buffer_free ? buf->context : NULL;
}

int pg_tensor_loc(const struct ggml_tensor *t, struct pg_buffer **ret_buf, uint64_t *ret_off)
{
	struct pg_buffer *b = pg_buffer_of(t->buffer);
	uintptr_t p = (uintptr_t)t->data, base;

	if (!b || !t->data)
		return -1;
	base = (uintptr_t)b->base;
	if (p < base || p - base > b->size)
		return -1;
	*ret_buf = b;
	*ret_off = p - base;
	return 0;
}

/* Bytes per frame: the daemon's limit, and never so large that one frame
 * holds the socket for long. */
uint64_t pg_chunk_bytes(const struct pg_rank *r)
{
	uint64_t lim = (uint64_t)1 << 30, max = pprpc_daemon_max_bulk(r->c);

	return max && max < lim ? max : lim;
}

static void check_range(const struct pg_buffer *b, const struct ggml_tensor *t, uint64_t off, size_t offset,
			size_t size, const char *command)
{
	/* ggml asserts offset + size <= ggml_nbytes before calling; the buffer
	 * bound is ours to check before the daemon refuses it less clearly. */
	if (off + offset < off || off + offset + size < off + offset || off + offset + size > b->size)
		pg_fatal(b->dev->rank, b->dev->name, command,
			 "'%s': %zu bytes at offset %llu + %zu outside its buffer of %zu bytes", t->name, size,
			 (unsigned long long)off, offset, b->size);
}

static struct pg_buffer *locate(const struct ggml_tensor *t, uint64_t *off, const char *command)
{
	struct pg_buffer *b;

	if (pg_tensor_loc(t, &b, off) < 0)
		pg_fatal(NULL, NULL, command, "tensor '%s' is not in a pprpc buffer", t->name);
	return b;
}

/* Queue TENSOR_SETs of size bytes from data at buffer offset off. */
static void queue_set(struct pg_buffer *b, uint64_t off, const void *data, size_t size, const char *command)
{
	struct pg_rank *r = b->dev->rank;
	uint64_t step = pg_chunk_bytes(r);

	pg_check_alive(r, b->dev->name, command);
	for (size_t done = 0; done < size;) {
		uint64_t n = size - done < step ? size - done : step;
		int rc = pprpc_tensor_set_async(r->c, b->handle, off + done, (const char *)data + done, n);

		b->dev->submitted++;
		b->dev->writes++;
		if (rc < 0)
			pg_fatal_rc(r, b->dev->name, command, pg_rank_failed(r, rc));
		done += n;
	}
}

void pg_buffer_set_keyed(struct pg_buffer *b, uint64_t off, const void *data, size_t size, const uint8_t *key,
			 const char *command)
{
	struct pg_rank *r = b->dev->rank;
	int rc;

	if (!key) {
		queue_set(b, off, data, size, command);
		return;
	}
	pg_check_alive(r, b->dev->name, command);
	rc = pprpc_tensor_set_cached_async(r->c, b->handle, off, data, size, key);
	b->dev->submitted++;
	b->dev->writes++;
	if (rc < 0)
		pg_fatal_rc(r, b->dev->name, command, pg_rank_failed(r, rc));
}

void pg_buffer_set(struct pg_buffer *b, const struct ggml_tensor *t, uint64_t off, const void *data, size_t offset,
		   size_t size, const char *command)
{
	check_range(b, t, off, offset, size, command);
	queue_set(b, off + offset, data, size, command);
}

void pg_buffer_get(struct pg_buffer *b, const struct ggml_tensor *t, uint64_t off, void *data, size_t offset,
		   size_t size, int async, const char *command)
{
	struct pg_rank *r = b->dev->rank;
	uint64_t step = pg_chunk_bytes(r);

	check_range(b, t, off, offset, size, command);
	pg_check_alive(r, b->dev->name, command);
	if (!async)
		b->dev->st.reads++;
	for (size_t done = 0; done < size;) {
		uint64_t n = size - done < step ? size - done : step;
		int rc = async ? pprpc_tensor_get_async(r->c, b->handle, off + offset + done, (char *)data + done, n)
			       : pprpc_tensor_get(r->c, b->handle, off + offset + done, (char *)data + done, n);

		b->dev->submitted += async != 0;
		if (rc < 0)
			pg_fatal_rc(r, b->dev->name, command, pg_rank_failed(r, rc));
		done += n;
	}
}

/* ---- buffer ------------------------------------------------------------------ */

static void buffer_free(ggml_backend_buffer_t buffer)
{
	struct pg_buffer *b = buffer->context;
	struct pg_rank *r = b->dev->rank;
	int rc = 0;

	/* Never throws: ggml frees buffers from destructors.  After a fault the
	 * connections are cancelled, and a rank already gone freed the buffer
	 * with the session. */
	pg_lock(r);
	pg_graphs_drop_buffer(b->dev, b->handle);
	if (!r->dead && !pg_fault_failed(r->fault)) {
		/* The daemon keeps the memory until queued commands using it ran. */
		rc = pprpc_buffer_free(r->c, b->handle);
		if (rc < 0)
			pg_rank_failed(r, rc);
	}
	pg_unlock(r);
	/* a live rank refusing the handle means this side's state is wrong */
	if (rc < 0 && !r->dead) {
		char line[700];

		snprintf(line, sizeof(line), "rank %d %s (%s) device %s: BUFFER_FREE: %s", r->index, r->name, r->addr,
			 b->dev->name, pprpc_last_error(r->c));
		pg_fault_raise(r->fault, "%s", line);
	}
	if (!b->host_backed)
		munmap(b->base, b->reserved);
	free(b);
}

static void *buffer_get_base(ggml_backend_buffer_t buffer)
{
	return ((struct pg_buffer *)buffer->context)->base;
}

static enum ggml_status buffer_init_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor *t)
{
	struct pg_buffer *b = buffer->context;
	size_t nbytes, asize;
	uint64_t off;

	if (t->view_src)
		return GGML_STATUS_SUCCESS;
	/* over llama.cpp's mapping: the tensor is at its file offset, no
	 * padding of ours between tensors; its bytes are the rank's mapping,
	 * or go now (llama.cpp sets nothing in such a buffer) */
	if (b->host_backed) {
		if (!b->mapped && pg_tensor_loc(t, &b, &off) == 0) {
			nbytes = ggml_nbytes(t);
			if (pg_weights_set(b, t, off, t->data, nbytes) != 0) {
				pg_lock(b->dev->rank);
				pg_buffer_set(b, t, off, t->data, 0, nbytes, "TENSOR_SET (weights)");
				pg_unlock(b->dev->rank);
			}
		}
		return GGML_STATUS_SUCCESS;
	}
	pg_lock(b->dev->rank);
	asize = pg_alloc_size(b->dev, t);
	nbytes = ggml_nbytes(t);
	/* Padding a rank's kernels may read (ggml-cuda's quantized rows) must
	 * not hold NaNs from an earlier use of the memory: zero it, as ggml-cuda
	 * does in its own init_tensor. */
	if (asize > nbytes && pg_tensor_loc(t, &b, &off) == 0 && off + asize <= b->size) {
		void *z = calloc(1, asize - nbytes);

		if (!z)
			pg_fatal(b->dev->rank, b->dev->name, "TENSOR_SET", "out of memory zeroing padding of '%s'",
				 t->name);
		queue_set(b, off + nbytes, z, asize - nbytes, "TENSOR_SET (padding)");
		free(z);
	}
	pg_unlock(b->dev->rank);
	return GGML_STATUS_SUCCESS;
}

static void buffer_memset_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor *t, uint8_t value, size_t offset,
				 size_t size)
{
	struct pg_buffer *b = buffer->context;
	size_t step = size < ((size_t)64 << 20) ? size : ((size_t)64 << 20);
	uint64_t off;
	uint8_t *v;

	(void)locate(t, &off, "TENSOR_SET (memset)");
	if (!size)
		return;
	v = malloc(step);
	if (!v)
		pg_fatal(b->dev->rank, b->dev->name, "TENSOR_SET (memset)", "out of memory");
	memset(v, value, step);
	pg_lock(b->dev->rank);
	check_range(b, t, off, offset, size, "TENSOR_SET (memset)");
	/* there is no partial fill on the wire: the bytes travel */
	for (size_t done = 0; done < size; done += step) {
		size_t n = size - done < step ? size - done : step;

		queue_set(b, off + offset + done, v, n, "TENSOR_SET (memset)");
	}
	pg_unlock(b->dev->rank);
	free(v);
}

static void buffer_set_tensor(ggml_backend_buffer_t buffer, struct ggml_tensor *t, const void *data, size_t offset,
			      size_t size)
{
	struct pg_buffer *b = buffer->context;
	uint64_t off;

	(void)locate(t, &off, "TENSOR_SET");
	pg_lock(b->dev->rank);
	check_range(b, t, off, offset, size, "TENSOR_SET");
	pg_unlock(b->dev->rank);
	/* a weight the rank may have already (weights.c) */
	if (pg_weights_set(b, t, off + offset, data, size) == 0)
		return;
	pg_lock(b->dev->rank);
	pg_buffer_set(b, t, off, data, offset, size, "TENSOR_SET");
	pg_unlock(b->dev->rank);
}

static void buffer_get_tensor(ggml_backend_buffer_t buffer, const struct ggml_tensor *t, void *data, size_t offset,
			      size_t size)
{
	struct pg_buffer *b = buffer->context;
	uint64_t off;

	(void)locate(t, &off, "TENSOR_GET");
	pg_lock(b->dev->rank);
	pg_buffer_get(b, t, off, data, offset, size, 0, "TENSOR_GET");
	pg_unlock(b->dev->rank);
}

static bool buffer_cpy_tensor(ggml_backend_buffer_t buffer, const struct ggml_tensor *src, struct ggml_tensor *dst)
{
	struct pg_buffer *db = buffer->context, *sb;
	uint64_t doff, soff;
	size_t n = ggml_nbytes(src);

	(void)locate(dst, &doff, "TENSOR_COPY");
	if (pg_tensor_loc(src, &sb, &soff) == 0)
		return pg_copy_between(sb, soff, db, doff, n) == 0;
	if (src->buffer && ggml_backend_buffer_is_host(src->buffer)) {
		pg_lock(db->dev->rank);
		pg_buffer_set(db, dst, doff, src->data, 0, n, "TENSOR_SET (copy from host)");
		pg_unlock(db->dev->rank);
		return true;
	}
	return false;
}

static void buffer_clear(ggml_backend_buffer_t buffer, uint8_t value)
{
	struct pg_buffer *b = buffer->context;
	struct pg_rank *r = b->dev->rank;
	int rc;

	pg_lock(r);
	pg_check_alive(r, b->dev->name, "BUFFER_CLEAR");
	rc = pprpc_buffer_clear(r->c, b->handle, value);
	if (rc < 0)
		pg_fatal_rc(r, b->dev->name, "BUFFER_CLEAR", pg_rank_failed(r, rc));
	pg_unlock(r);
}

static const struct ggml_backend_buffer_i buffer_iface = {
	.free_buffer = buffer_free,
	.get_base = buffer_get_base,
	.init_tensor = buffer_init_tensor,
	.memset_tensor = buffer_memset_tensor,
	.set_tensor = buffer_set_tensor,
	.get_tensor = buffer_get_tensor,
	.set_tensor_2d = NULL,   /* optional: ggml loops over set_tensor */
	.get_tensor_2d = NULL,
	.cpy_tensor = buffer_cpy_tensor,
	.clear = buffer_clear,
	.reset = NULL,
};

/* ---- buffer type ------------------------------------------------------------------ */

static const char *buft_get_name(ggml_backend_buffer_type_t buft)
{
	return ((struct pg_device *)buft->context)->name;
}

/* A rank that may take no new buffer (with its lock): said, and -1. */
static int refused(struct pg_device *d, size_t size)
{
	struct pg_rank *r = d->rank;

	if (!pg_fault_failed(r->fault) && !r->dead)
		return 0;
	PG_LOG_ERROR("pprpc: rank %d %s (%s) device %s: BUFFER_ALLOC of %zu bytes refused: %s\n", r->index, r->name,
		     r->addr, d->name, size, r->dead ? "the connection to the rank was lost" : "after the rank fault");
	return -1;
}

/* After a failed BUFFER_ALLOC (rank's lock held, released here): a lost
 * rank is the process's fault, a refusal an error line. */
static void alloc_failed(struct pg_device *d, size_t size, int rc)
{
	struct pg_rank *r = d->rank;
	char line[1200];

	pg_rank_failed(r, rc);
	snprintf(line, sizeof(line), "rank %d %s (%s) device %s: BUFFER_ALLOC of %zu bytes: %s%s", r->index, r->name,
		 r->addr, d->name, size, r->dead ? "connection to the rank lost: " : "",
		 r->dead ? r->dead_why : pprpc_last_error(r->c));
	pg_unlock(r);
	if (r->dead)
		pg_fault_raise(r->fault, "%s", line);
	else
		PG_LOG_ERROR("pprpc: %s\n", line);
}

/* b (with its handle) as ggml's buffer, or everything undone. */
static ggml_backend_buffer_t wrap(struct pg_device *d, struct pg_buffer *b)
{
	ggml_backend_buffer_t gb = ggml_backend_buffer_init(&d->buft, buffer_iface, b, b->size);

	if (!gb)
		buffer_free(&(struct ggml_backend_buffer){ .iface = buffer_iface, .context = b });
	return gb;
}

static ggml_backend_buffer_t buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size)
{
	struct pg_device *d = buft->context;
	struct pg_rank *r = d->rank;
	size_t align = d->alignment > 4096 ? d->alignment : 0, reserve = size + align;
	struct pg_buffer *b = calloc(1, sizeof(*b));
	void *p;
	int rc;

	if (!b)
		return NULL;
	p = mmap(NULL, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		PG_LOG_ERROR("pprpc: %s: cannot reserve %zu bytes of address space for a buffer\n", d->name, size);
		free(b);
		return NULL;
	}
	b->dev = d;
	b->reserved = reserve;
	b->size = size;
	b->base = align ? (void *)(((uintptr_t)p + align - 1) / align * align) : p;
	/* ggml has a NULL for a failed allocation (llama.cpp says it failed to
	 * allocate): no exception here */
	pg_lock(r);
	if (refused(d, size) < 0) {
		pg_unlock(r);
		goto fail;
	}
	rc = pprpc_buffer_alloc(r->c, d->index, size, &b->handle);
	if (rc < 0) {
		alloc_failed(d, size, rc);
		goto fail;
	}
	pg_unlock(r);
	return wrap(d, b);
fail:
	munmap(p, reserve);
	free(b);
	return NULL;
}

ggml_backend_buffer_t pg_buffer_from_host_ptr(ggml_backend_dev_t dev, void *ptr, size_t size, size_t max_tensor_size)
{
	struct pg_device *d = dev->context;
	struct pg_rank *r = d->rank;
	struct pg_registry *pr = d->gdev.reg->context;
	struct pg_buffer *b = calloc(1, sizeof(*b));
	pprpc_file_id id;
	pprpc_fill src = { 0 };
	char hint[256], why[600] = "", mapped[256] = "";
	int rc;

	(void)max_tensor_size;
	if (!b)
		return NULL;
	b->dev = d;
	b->size = size;
	b->base = ptr;
	b->host_backed = 1;
	rc = pg_weights_locate(r->weights, ptr, size, &id, &src.file_offset, hint, sizeof(hint), why, sizeof(why));
	pg_lock(r);
	if (refused(d, size) < 0) {
		pg_unlock(r);
		free(b);
		return NULL;
	}
	if (rc == 0) {
		src.file = &id;
		src.hint = hint;
		rc = pprpc_buffer_map_file(r->c, d->index, size, &src, &b->handle, mapped, sizeof(mapped));
		if (rc < 0 && (pg_rank_failed(r, rc), r->dead)) {
			alloc_failed(d, size, rc);
			free(b);
			return NULL;
		}
		if (rc < 0)
			snprintf(why, sizeof(why), "%s", pprpc_last_error(r->c));
	}
	if (rc == 0) {
		b->mapped = 1;
		pg_unlock(r);
		pg_weights_mapped(pr, r, size, mapped);
		PG_LOG_INFO("pprpc: rank %d %s device %s: %.1f MiB of weights are the rank's own mapping of %s\n", r->index,
			    r->name, d->name, size / 1048576.0, mapped);
		return wrap(d, b);
	}
	/* said whatever llama.cpp's verbosity: the load will cost the link */
	pg_say(5, "weights: rank %d %s device %s: %.1f MiB of weights not mapped by the rank (%s): each is filled "
		  "or sent", r->index, r->name, d->name, size / 1048576.0, why);
	rc = pprpc_buffer_alloc(r->c, d->index, size, &b->handle);
	if (rc < 0) {
		alloc_failed(d, size, rc);
		free(b);
		return NULL;
	}
	pg_unlock(r);
	return wrap(d, b);
}

static size_t buft_get_alignment(ggml_backend_buffer_type_t buft)
{
	return ((struct pg_device *)buft->context)->alignment;
}

static size_t buft_get_max_size(ggml_backend_buffer_type_t buft)
{
	struct pg_device *d = buft->context;

	return d->max_size ? (size_t)d->max_size : SIZE_MAX;
}

static size_t buft_get_alloc_size(ggml_backend_buffer_type_t buft, const struct ggml_tensor *t)
{
	struct pg_device *d = buft->context;
	size_t n;

	pg_lock(d->rank);
	n = pg_alloc_size(d, t);
	pg_unlock(d->rank);
	return n;
}

const struct ggml_backend_buffer_type_i pg_buft_iface = {
	.get_name = buft_get_name,
	.alloc_buffer = buft_alloc_buffer,
	.get_alignment = buft_get_alignment,
	.get_max_size = buft_get_max_size,
	.get_alloc_size = buft_get_alloc_size,
	.is_host = NULL,   /* device memory: ggml never touches it directly */
};
