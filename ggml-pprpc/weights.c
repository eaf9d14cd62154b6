/*
 * ggml-pprpc/weights.c — weight tensors from the ranks' own storage.
 *
 * llama.cpp loads a model by mapping its GGUF and handing each weight's
 * bytes to set_tensor of a buffer it marked GGML_BACKEND_BUFFER_USAGE_WEIGHTS.
 * The bytes' address says what they are: the mapping that holds them
 * (/proc/self/maps) names the file and the offset, without reading them.
 * So before sending a weight, the plugin asks its rank to fill it from the
 * rank's copy of that file (named by identity: size, head hash, content
 * hash — pprpc_weights.h) or from the rank's weights cache (keyed by the
 * file's content hash, the offset and the size), and sends the bytes only
 * when the rank cannot, asking it to keep them in its cache then.  Bytes
 * that come from no file (llama.cpp's --no-mmap reads) are keyed by their
 * own hash, for the cache alone.  Activations never go this way: only
 * buffers marked as weights.
 *
 * The client's identity of a file is computed once and kept beside it
 * (PATH.pprpc-sum) or in PPRPC_SUMS_DIR; a file whose path no longer leads to
 * the mapped inode (replaced since llama.cpp mapped it) is not named.
 *
 * Where a rank computes on host memory and has a model-dir (DeviceInfo
 * maps_files), the device takes host pointers (caps.buffer_from_host_ptr):
 * llama.cpp then makes the device's weights one buffer over the mapped
 * file's range that holds them, and the rank maps its own copy of that
 * range instead of receiving or reading anything (BUFFER_ALLOC with a
 * file; buffer.c pg_buffer_from_host_ptr).  When it cannot, the buffer is
 * allocated and each weight goes the way above as llama.cpp places it.
 *
 *   PPRPC_WEIGHTS=auto|off    off: always send the bytes (default auto)
 *   PPRPC_WEIGHTS_MAP=auto|off off: never ask a rank to map (default auto)
 *   PPRPC_WEIGHTS_MIN=BYTES   smaller tensors are just sent (default 65536)
 *   PPRPC_SUMS_DIR=DIR        where file identities go when the model's
 *                             folder is not writable (default
 *                             $XDG_CACHE_HOME/pprpc or ~/.cache/pprpc)
 *
 * Progress of a load goes to stderr (pg_say: a notice the operator sees
 * whatever llama.cpp's verbosity; ggml's info lines need -lv 4) every 2 s
 * and once at its end (the first graph_compute): per rank, bytes filled
 * from its file and its cache and their rate, bytes sent.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "pg.h"
#include "pprpc_weights.h"

#define MAX_FILES 32
#define SAY_EVERY_NS 2000000000ull

/* A file mapping of this process. */
struct wmap {
	uintptr_t start, end;
	uint64_t offset;
	int readable;
	unsigned long dev_major, dev_minor, ino;
	char path[PATH_MAX];
};

/* Whether a device's rank has a file (pg_weights_rank_has_model). */
#define MAX_PROBES 16
struct wprobe {
	const struct pg_device *d;
	int has;
};

/* A model file met through a mapping, and whether it can be named. */
struct wfile {
	unsigned long dev_major, dev_minor, ino;
	int ok;
	struct wprobe probe[MAX_PROBES];
	int nprobe;
	pprpc_file_id id;
	char hint[256];
	char why[256];
};

/* Per rank: what its loads cost. */
struct wcount {
	uint64_t file_bytes, cache_bytes, sent_bytes, tensors, read_ns;
	uint64_t mapped_bytes, maps;
	char file[256];
	char why[256];           /* the last reason it could not fill */
};

/* Files met at offset 0 of a mapping, and whether they are GGUF. */
#define MAX_SEEN 256
struct wseen {
	unsigned long dev_major, dev_minor, ino;
	int gguf;
};

struct pg_weights {
	pthread_mutex_t lock;
	struct wseen seen[MAX_SEEN];
	int nseen;
	int off;
	int map_off;             /* PPRPC_WEIGHTS_MAP=off */
	long min_bytes;
	char sums_dir[PATH_MAX];
	struct wmap *maps;
	size_t nmaps;
	struct wfile files[MAX_FILES];
	int nfiles;
	struct wcount count[PG_MAX_RANKS];
	uint64_t t0, last_say;
	int active;              /* a load is under way (summary pending) */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int pg_weights_init(struct pg_registry *pr, char *err, size_t errlen)
{
	struct pg_weights *w = calloc(1, sizeof(*w));
	const char *mode = getenv("PPRPC_WEIGHTS"), *sums = getenv("PPRPC_SUMS_DIR");
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	pthread_mutex_init(&w->lock, NULL);
	if (mode && *mode && strcmp(mode, "auto") && strcmp(mode, "off")) {
		snprintf(err, errlen, "PPRPC_WEIGHTS=%s: expected auto or off", mode);
		free(w);
		return PPRPC_EINVAL;
	}
	w->off = mode && !strcmp(mode, "off");
	mode = getenv("PPRPC_WEIGHTS_MAP");
	if (mode && *mode && strcmp(mode, "auto") && strcmp(mode, "off")) {
		snprintf(err, errlen, "PPRPC_WEIGHTS_MAP=%s: expected auto or off", mode);
		free(w);
		return PPRPC_EINVAL;
	}
	w->map_off = w->off || (mode && !strcmp(mode, "off"));
	if (pg_env_int("PPRPC_WEIGHTS_MIN", 65536, 0, 1L << 40, &w->min_bytes, err, errlen) < 0) {
		free(w);
		return PPRPC_EINVAL;
	}
	if (sums && *sums)
		snprintf(w->sums_dir, sizeof(w->sums_dir), "%s", sums);
	else if (xdg && *xdg)
		snprintf(w->sums_dir, sizeof(w->sums_dir), "%s/pprpc", xdg);
	else if (home && *home)
		snprintf(w->sums_dir, sizeof(w->sums_dir), "%s/.cache/pprpc", home);
	/* made when missing (its parent too: ~/.cache may not exist yet); a
	 * folder that cannot be made only costs hashing the model again */
	if (w->sums_dir[0]) {
		char parent[PATH_MAX], *slash;

		snprintf(parent, sizeof(parent), "%s", w->sums_dir);
		slash = strrchr(parent, '/');
		if (slash && slash != parent) {
			*slash = '\0';
			(void)mkdir(parent, 0700);
		}
		(void)mkdir(w->sums_dir, 0700);
	}
	pr->weights = w;
	for (int i = 0; i < pr->nrank; i++)
		pr->rank[i].weights = w;
	return 0;
}

void pg_weights_free(struct pg_weights *w)
{
	if (!w)
		return;
	pthread_mutex_destroy(&w->lock);
	free(w->maps);
	free(w);
}

/* /proc/self/maps' file mappings, read again when a pointer is in none of
 * those seen (llama.cpp maps one file per split). */
static void read_maps(struct pg_weights *w)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[PATH_MAX + 128];
	size_t cap = 0;

	w->nmaps = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		struct wmap m;
		unsigned long long a, b, off;
		char perms[8] = "";
		int pos = 0;

		memset(&m, 0, sizeof(m));
		if (sscanf(line, "%llx-%llx %7s %llx %lx:%lx %lu %n", &a, &b, perms, &off, &m.dev_major, &m.dev_minor,
			   &m.ino, &pos) < 7 || m.ino == 0 || !pos || line[pos] != '/')
			continue;
		m.readable = perms[0] == 'r';
		line[strcspn(line, "\n")] = '\0';
		/* "(deleted)": the file is gone, nothing to name */
		if (strstr(line + pos, " (deleted)"))
			continue;
		m.start = (uintptr_t)a;
		m.end = (uintptr_t)b;
		m.offset = off;
		snprintf(m.path, sizeof(m.path), "%s", line + pos);
		if (w->nmaps == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct wmap *nm = realloc(w->maps, nc * sizeof(*nm));

			if (!nm)
				break;
			w->maps = nm;
			cap = nc;
		}
		w->maps[w->nmaps++] = m;
	}
	fclose(f);
}

static const struct wmap *find_map(struct pg_weights *w, const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < w->nmaps; i++)
			if (a >= w->maps[i].start && a < w->maps[i].end && n <= w->maps[i].end - a)
				return &w->maps[i];
		if (pass == 0)
			read_maps(w);
	}
	return NULL;
}

/* The identity of the mapped file (computed once per file and process;
 * kept beside the file by pprpc_file_identify). */
static struct wfile *file_of(struct pg_weights *w, const struct wmap *m)
{
	struct wfile *f;
	struct stat st;
	const char *base;
	int computed = 0;
	uint64_t t0;

	for (int i = 0; i < w->nfiles; i++) {
		f = &w->files[i];
		if (f->ino == m->ino && f->dev_major == m->dev_major && f->dev_minor == m->dev_minor)
			return f->ok ? f : NULL;
	}
	if (w->nfiles == MAX_FILES)
		return NULL;
	f = &w->files[w->nfiles++];
	memset(f, 0, sizeof(*f));
	f->dev_major = m->dev_major;
	f->dev_minor = m->dev_minor;
	f->ino = m->ino;
	/* the path must still lead to the mapped inode */
	if (stat(m->path, &st) < 0 || st.st_ino != m->ino || major(st.st_dev) != m->dev_major ||
	    minor(st.st_dev) != m->dev_minor) {
		snprintf(f->why, sizeof(f->why), "%.200s is no longer the file llama.cpp mapped", m->path);
		PG_LOG_WARN("pprpc: weights: %s: the ranks are sent the bytes\n", f->why);
		return NULL;
	}
	t0 = now_ns();
	if (pprpc_file_identify(m->path, w->sums_dir[0] ? w->sums_dir : NULL, 0, &f->id, &computed, f->why,
				sizeof(f->why)) < 0) {
		PG_LOG_WARN("pprpc: weights: cannot identify %s: %s: the ranks are sent the bytes\n", m->path, f->why);
		return NULL;
	}
	base = strrchr(m->path, '/');
	/* the hint is the name alone: the rank's folder is its own */
	snprintf(f->hint, sizeof(f->hint), "%.255s", base ? base + 1 : m->path);
	f->ok = 1;
	if (computed)
		PG_LOG_INFO("pprpc: weights: %s identified (%.1f GiB hashed in %.1f s, kept for the next load)\n", m->path,
			    (double)f->id.size / (1 << 30), (double)(now_ns() - t0) / 1e9);
	return f;
}

static void say(struct pg_registry *pr, const char *when)
{
	struct pg_weights *w = pr->weights;
	double secs = (double)(now_ns() - w->t0) / 1e9;

	for (int i = 0; i < pr->nrank; i++) {
		const struct wcount *k = &w->count[i];
		char rate[96];

		if (!k->tensors && !k->maps)
			continue;
		/* a mapping is read later, by the rank, as its graphs are made
		 * (daemon/weights/wahead.c): no rate to give yet */
		if (k->maps && !k->file_bytes && !k->cache_bytes)
			snprintf(rate, sizeof(rate), "mapped ranges are read by the rank ahead of its graphs");
		else
			snprintf(rate, sizeof(rate), "the rank read at %.0f MiB/s",
				 k->read_ns ? (k->file_bytes + k->cache_bytes) / 1048576.0 / (k->read_ns / 1e9) : 0.0);
		pg_say(5, "weights %s: rank %d %s: %.1f MiB mapped in %llu ranges and %.1f MiB read from its copy%s%s, "
			  "%.1f MiB from its cache, %.1f MiB sent, %llu pieces, %.1f s (%s)%s%s", when, i,
		       pr->rank[i].name, k->mapped_bytes / 1048576.0, (unsigned long long)k->maps,
		       k->file_bytes / 1048576.0, k->file[0] ? " of " : "", k->file, k->cache_bytes / 1048576.0,
		       k->sent_bytes / 1048576.0, (unsigned long long)k->tensors, secs, rate,
		       k->why[0] ? "; last not filled: " : "", k->why);
	}
}

/* A load's last word, at the first compute after it. */
void pg_weights_done(struct pg_registry *pr)
{
	struct pg_weights *w = pr ? pr->weights : NULL;

	if (!w || !w->active)
		return;
	pthread_mutex_lock(&w->lock);
	if (w->active) {
		say(pr, "loaded");
		w->active = 0;
		memset(w->count, 0, sizeof(w->count));
	}
	pthread_mutex_unlock(&w->lock);
}

static void count(struct pg_registry *pr, struct pg_weights *w, int rank, uint64_t file_b, uint64_t cache_b,
		  uint64_t sent_b, uint64_t ns)
{
	struct wcount *k = &w->count[rank];
	uint64_t t = now_ns();

	if (!w->active) {
		w->active = 1;
		w->t0 = w->last_say = t;
	}
	k->file_bytes += file_b;
	k->cache_bytes += cache_b;
	k->sent_bytes += sent_b;
	k->read_ns += ns;
	k->tensors++;
	if (t - w->last_say >= SAY_EVERY_NS) {
		w->last_say = t;
		say(pr, "so far");
	}
}

int pg_weights_maps(const struct pg_weights *w)
{
	return w && !w->map_off;
}

/* Whether the mapped file is a GGUF (its first four bytes, read from the
 * file rather than the mapping: a file cut short under a mapping would
 * make the read a SIGBUS); remembered per inode (lock held). */
static int is_gguf(struct pg_weights *w, const struct wmap *m)
{
	char magic[4];
	struct stat st;
	int fd = -1, yes = 0;

	for (int i = 0; i < w->nseen; i++)
		if (w->seen[i].ino == m->ino && w->seen[i].dev_major == m->dev_major &&
		    w->seen[i].dev_minor == m->dev_minor)
			return w->seen[i].gguf;
	/* regular files only: a device node's open may do something */
	if (stat(m->path, &st) == 0 && S_ISREG(st.st_mode) && st.st_ino == m->ino)
		fd = open(m->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	yes = fd >= 0 && pread(fd, magic, 4, 0) == 4 && !memcmp(magic, "GGUF", 4);
	if (fd >= 0)
		close(fd);
	if (w->nseen < MAX_SEEN)
		w->seen[w->nseen++] = (struct wseen){ m->dev_major, m->dev_minor, m->ino, yes };
	return yes;
}

/* What d's rank said of f, or -1 when it was not asked yet (lock held). */
static int probed(const struct wfile *f, const struct pg_device *d)
{
	for (int i = 0; i < f->nprobe; i++)
		if (f->probe[i].d == d)
			return f->probe[i].has;
	return -1;
}

/* Whether d's rank can map a page of the file (and then lets it go). */
static int probe(struct pg_device *d, const struct wfile *f)
{
	struct pg_rank *r = d->rank;
	pprpc_fill src = { .file = &f->id, .file_offset = 0, .hint = f->hint };
	pprpc_buffer b;
	uint64_t n = f->id.size < 4096 ? f->id.size : 4096;
	int rc;

	pg_lock(r);
	if (r->dead || pg_fault_failed(r->fault)) {
		pg_unlock(r);
		return 0;
	}
	rc = pprpc_buffer_map_file(r->c, d->index, n, &src, &b, NULL, 0);
	if (rc == 0)
		rc = pprpc_buffer_free(r->c, b);
	else
		pg_say(5, "weights: rank %d %s device %s: no copy of %s to map (%s): its weights are filled or sent",
		       r->index, r->name, d->name, f->hint, pprpc_last_error(r->c));
	if (rc < 0)
		pg_rank_failed(r, rc);
	pg_unlock(r);
	return rc == 0;
}

int pg_weights_rank_has_model(struct pg_device *d)
{
	struct pg_weights *w = d->rank->weights;
	struct wfile *ask[MAX_FILES];
	int nask = 0, has = 0;

	if (!pg_weights_maps(w) || !d->maps_files)
		return 0;
	/* the GGUF files this process maps (llama.cpp maps each whole, from
	 * its start), and what the rank said of each */
	pthread_mutex_lock(&w->lock);
	read_maps(w);
	for (size_t i = 0; i < w->nmaps && !has; i++) {
		const struct wmap *m = &w->maps[i];
		struct wfile *f;
		int seen = 0;

		if (m->offset != 0 || !m->readable || !is_gguf(w, m))
			continue;
		if (!(f = file_of(w, m)))
			continue;
		for (int k = 0; k < nask; k++)
			seen |= ask[k] == f;
		if (probed(f, d) == 1)
			has = 1;
		else if (probed(f, d) < 0 && !seen && nask < MAX_FILES)
			ask[nask++] = f;
	}
	pthread_mutex_unlock(&w->lock);
	/* asked without the weights' lock (the rank's comes first elsewhere);
	 * files are never forgotten, so the pointers stay good */
	for (int k = 0; k < nask && !has; k++) {
		int yes = probe(d, ask[k]);

		pthread_mutex_lock(&w->lock);
		if (probed(ask[k], d) < 0 && ask[k]->nprobe < MAX_PROBES)
			ask[k]->probe[ask[k]->nprobe++] = (struct wprobe){ d, yes };
		pthread_mutex_unlock(&w->lock);
		has = yes;
	}
	return has;
}

int pg_weights_locate(struct pg_weights *w, const void *p, size_t n, pprpc_file_id *id, uint64_t *ret_off,
		      char *hint, size_t hintlen, char *why, size_t whylen)
{
	const struct wmap *m;
	struct wfile *f = NULL;
	int rc = -1;

	pthread_mutex_lock(&w->lock);
	m = find_map(w, p, n);
	if (!m) {
		snprintf(why, whylen, "the bytes are in no mapping of a file");
	} else if (!(f = file_of(w, m))) {
		snprintf(why, whylen, "the mapped file cannot be named");
	} else {
		*id = f->id;
		*ret_off = m->offset + ((uintptr_t)p - m->start);
		snprintf(hint, hintlen, "%s", f->hint);
		rc = 0;
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

void pg_weights_mapped(struct pg_registry *pr, struct pg_rank *r, uint64_t size, const char *file)
{
	struct pg_weights *w = r->weights;

	pthread_mutex_lock(&w->lock);
	if (!w->active) {
		w->active = 1;
		w->t0 = w->last_say = now_ns();
	}
	w->count[r->index].mapped_bytes += size;
	w->count[r->index].maps++;
	snprintf(w->count[r->index].file, sizeof(w->count[r->index].file), "%s", file);
	pthread_mutex_unlock(&w->lock);
	(void)pr;
}

/* One piece (at most a frame's bulk) of a weight: filled by the rank, or
 * sent.  With the rank's lock. */
static void piece(struct pg_registry *pr, struct pg_buffer *b, const struct ggml_tensor *t, uint64_t off,
		  const void *data, size_t size, const struct wfile *f, uint64_t foff, int sources)
{
	struct pg_device *d = b->dev;
	struct pg_rank *r = d->rank;
	struct pg_weights *w = r->weights;
	struct wcount *k = &w->count[r->index];
	pprpc_fill_result res;
	pprpc_fill src = { 0 };
	uint8_t key[32];
	int rc;

	if (f) {
		src.file = &f->id;
		src.file_offset = foff;
		src.hint = f->hint;
		pprpc_range_key(&f->id, foff, size, key);
	} else {
		/* bytes of no file: their own hash names them (read here, locally:
		 * the link is what the rank's cache spares) */
		pprpc_bytes_key(data, size, key);
	}
	if (sources & PPRPC_WEIGHTS_CACHE)
		src.cache_key = key;
	rc = src.file || src.cache_key ? pprpc_tensor_fill(r->c, b->handle, off, size, &src, &res) : PPRPC_EUNSUPP;
	/* ordered with the device's other writes, and done when it returned */
	d->submitted++;
	d->writes++;
	if (rc < 0 && (pg_rank_failed(r, rc), r->dead))
		pg_fatal_rc(r, d->name, "TENSOR_FILL", rc);
	pthread_mutex_lock(&w->lock);
	if (rc == 0) {
		if (res.source == PPRPC_FILL_FILE)
			snprintf(k->file, sizeof(k->file), "%s", res.file);
		count(pr, w, r->index, res.source == PPRPC_FILL_FILE ? size : 0,
		      res.source == PPRPC_FILL_CACHE ? size : 0, 0, res.read_ns);
		pthread_mutex_unlock(&w->lock);
		return;
	}
	/* The rank could not: it is sent the bytes, and keeps them in its
	 * cache when it has one.  The first reason of a load is logged, the
	 * last one goes into the summary. */
	if (!k->why[0])
		pg_say(5, "weights: rank %d %s device %s: '%s' not filled by the rank (%s): sending it%s", r->index,
		       r->name, d->name, t->name, pprpc_last_error(r->c), sources & PPRPC_WEIGHTS_CACHE ? ", for its cache" : "");
	snprintf(k->why, sizeof(k->why), "%s", rc == PPRPC_EUNSUPP && !src.file && !src.cache_key ?
		 "no file and no cache" : pprpc_last_error(r->c));
	count(pr, w, r->index, 0, 0, size, 0);
	pthread_mutex_unlock(&w->lock);
	pg_buffer_set_keyed(b, off, data, size, src.cache_key, src.cache_key ? "TENSOR_SET (weights, for the rank's cache)"
									     : "TENSOR_SET (weights)");
}

int pg_weights_set(struct pg_buffer *b, const struct ggml_tensor *t, uint64_t off, const void *data, size_t size)
{
	struct pg_device *d = b->dev;
	struct pg_rank *r = d->rank;
	struct pg_weights *w = r->weights;
	struct pg_registry *pr = d->gdev.reg->context;
	const struct wmap *m;
	struct wfile *f = NULL;
	uint64_t foff = 0, step;
	int sources;

	if (!w || w->off || (long)size < w->min_bytes || !t->buffer ||
	    ggml_backend_buffer_get_usage(t->buffer) != GGML_BACKEND_BUFFER_USAGE_WEIGHTS)
		return 1;
	pg_lock(r);
	pg_check_alive(r, d->name, "TENSOR_FILL");
	sources = pprpc_weights_sources(r->c);
	step = pg_chunk_bytes(r);
	pg_unlock(r);
	if (!sources)
		return 1;
	pthread_mutex_lock(&w->lock);
	m = find_map(w, data, size);
	if (m) {
		foff = m->offset + ((uintptr_t)data - m->start);
		f = file_of(w, m);
	}
	pthread_mutex_unlock(&w->lock);
	if (!f && !(sources & PPRPC_WEIGHTS_CACHE))
		return 1;
	/* Pieces of at most a frame: each its own fill and its own key, the
	 * same pieces at every load. */
	pg_lock(r);
	for (size_t done = 0; done < size;) {
		size_t n = size - done < step ? size - done : (size_t)step;

		pg_check_alive(r, d->name, "TENSOR_FILL");
		piece(pr, b, t, off + done, (const char *)data + done, n, f, foff + done, sources);
		done += n;
	}
	pg_unlock(r);
	return 0;
}
