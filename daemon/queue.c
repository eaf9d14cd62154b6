/* daemon/queue.c — worker thread + completion hand-off (see queue.h). */
#include "daemon/queue.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc_types.h"

struct queue {
	uv_async_t async;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct qcmd *head, *tail;        /* waiting to execute */
	struct qcmd *done_head, *done_tail;
	int stop;
	uint64_t pushed;   /* loop thread */
	uint64_t completed; /* loop thread */
	char name[16];
};

static void *worker(void *arg)
{
	struct queue *q = arg;

	pthread_setname_np(pthread_self(), q->name);
	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct qcmd *c;

		while (!q->head && !q->stop)
			pthread_cond_wait(&q->cond, &q->lock);
		if (!q->head)
			break;
		c = q->head;
		q->head = c->next;
		if (!q->head)
			q->tail = NULL;
		pthread_mutex_unlock(&q->lock);

		c->status = c->exec ? c->exec(c) : 0;

		pthread_mutex_lock(&q->lock);
		c->next = NULL;
		if (q->done_tail)
			q->done_tail->next = c;
		else
			q->done_head = c;
		q->done_tail = c;
		uv_async_send(&q->async);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

static void drain(uv_async_t *a)
{
	struct queue *q = a->data;
	struct qcmd *c;

	pthread_mutex_lock(&q->lock);
	c = q->done_head;
	q->done_head = q->done_tail = NULL;
	pthread_mutex_unlock(&q->lock);
	while (c) {
		struct qcmd *next = c->next;

		q->completed++;
		c->done(c);
		c = next;
	}
}

int queue_create(uv_loop_t *loop, const char *name, struct queue **ret_q)
{
	struct queue *q = calloc(1, sizeof(*q));

	if (!q)
		return PPRPC_ENOMEM;
	snprintf(q->name, sizeof(q->name), "%s", name);
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	if (uv_async_init(loop, &q->async, drain) < 0)
		goto fail;
	q->async.data = q;
	if (pthread_create(&q->thread, NULL, worker, q) != 0) {
		uv_close((uv_handle_t *)&q->async, (uv_close_cb)free);
		return PPRPC_ENOMEM;
	}
	*ret_q = q;
	return 0;
fail:
	free(q);
	return PPRPC_ENOMEM;
}

void queue_push(struct queue *q, struct qcmd *c)
{
	c->next = NULL;
	c->status = 0;
	c->err[0] = '\0';
	q->pushed++;
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = c;
	else
		q->head = c;
	q->tail = c;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

uint64_t queue_depth(const struct queue *q)
{
	return q->pushed - q->completed;
}

uint64_t queue_completed(const struct queue *q)
{
	return q->completed;
}

void queue_destroy(struct queue *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->lock);
	q->stop = 1;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	pthread_join(q->thread, NULL);
	drain(&q->async);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	/* async is the first member: freeing the handle frees the queue. */
	uv_close((uv_handle_t *)&q->async, (uv_close_cb)free);
}
