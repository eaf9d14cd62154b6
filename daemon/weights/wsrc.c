/*
 * daemon/weights/wsrc.c — the weight sources as an object: open the folders
 * named by the configuration, close, counters.
 */
#include "daemon/weights/wsrc_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprpc/types.h"

static int open_model_dir(struct wsrc *w, const char *dir, char *err, size_t errlen)
{
	struct stat st;

	w->model_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->model_fd < 0) {
		snprintf(err, errlen, "model-dir %s: %s", dir, strerror(errno));
		return PPRPC_EIO;
	}
	if (fstat(w->model_fd, &st) || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "model-dir %s: not a folder", dir);
		return PPRPC_EIO;
	}
	if (!(w->model_dir = strdup(dir))) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	return 0;
}

int wsrc_open(const struct wsrc_conf *conf, struct wsrc **ret, char *err, size_t errlen)
{
	struct wsrc *w = calloc(1, sizeof(*w));
	int rc;

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return PPRPC_ENOMEM;
	}
	w->model_fd = w->cache_fd = w->tmp_fd = -1;
	if (pthread_mutex_init(&w->lock, NULL)) {
		free(w);
		snprintf(err, errlen, "mutex: out of resources");
		return PPRPC_ENOMEM;
	}
	if (pthread_cond_init(&w->ahead_done, NULL)) {
		pthread_mutex_destroy(&w->lock);
		free(w);
		snprintf(err, errlen, "mutex: out of resources");
		return PPRPC_ENOMEM;
	}
	w->threads = conf->threads < 1 ? 1 : conf->threads;
	w->cache_max = conf->cache_max_bytes;
	w->map_ahead = conf->map_ahead;
	w->recall_on = conf->map_ahead && conf->map_recall;
	w->mem_available = conf->mem_available;
	if (conf->model_dir && *conf->model_dir && (rc = open_model_dir(w, conf->model_dir, err, errlen)) < 0)
		goto fail;
	if (conf->cache_dir && *conf->cache_dir && (rc = wcache_open(w, conf->cache_dir, err, errlen)) < 0)
		goto fail;
	wrecall_open(w);
	*ret = w;
	return 0;
fail:
	wsrc_close(w);
	return rc;
}

void wsrc_close(struct wsrc *w)
{
	if (!w)
		return;
	wahead_wait_all(w);
	wrecall_close(w);
	wcache_close(w);
	wfiles_free(w);
	if (w->model_fd >= 0)
		close(w->model_fd);
	free(w->model_dir);
	pthread_cond_destroy(&w->ahead_done);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

int wsrc_has_files(const struct wsrc *w)
{
	return w && w->model_fd >= 0;
}

int wsrc_has_cache(const struct wsrc *w)
{
	return w && w->cache_fd >= 0;
}

void wsrc_stats_get(struct wsrc *w, struct wsrc_stats *out)
{
	pthread_mutex_lock(&w->lock);
	*out = w->st;
	pthread_mutex_unlock(&w->lock);
}
