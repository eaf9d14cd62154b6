/* daemon/core/staging.c — see staging.h. */
#include "daemon/core/staging.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "pprpc/types.h"

static int slots_init(struct staging *s)
{
	s->free_list = malloc(s->nslots * sizeof(*s->free_list));
	if (!s->free_list)
		return PPRPC_ENOMEM;
	for (uint32_t i = 0; i < s->nslots; i++)
		s->free_list[i] = s->nslots - 1 - i;
	s->nfree = s->nslots;
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

static int geometry(struct staging *s, uint64_t bytes, uint64_t slot_size)
{
	memset(s, 0, sizeof(*s));
	if (slot_size == 0 || bytes / slot_size < 2 || bytes / slot_size > (1u << 20))
		return PPRPC_EINVAL;
	s->nslots = (uint32_t)(bytes / slot_size);
	s->slot_size = slot_size;
	s->bytes = (uint64_t)s->nslots * slot_size;
	return 0;
}

int staging_init(struct staging *s, uint64_t bytes, uint64_t slot_size)
{
	int rc = geometry(s, bytes, slot_size);

	if (rc < 0)
		return rc;
	s->mem = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->mem == MAP_FAILED) {
		s->mem = NULL;
		return PPRPC_ENOMEM;
	}
	if (slots_init(s) < 0) {
		munmap(s->mem, s->bytes);
		s->mem = NULL;
		return PPRPC_ENOMEM;
	}
	return 0;
}

int staging_init_over(struct staging *s, void *mem, uint64_t bytes, uint64_t slot_size)
{
	int rc = geometry(s, bytes, slot_size);

	if (rc < 0)
		return rc;
	s->mem = mem;
	s->borrowed = 1;
	if (slots_init(s) < 0) {
		s->mem = NULL;
		return PPRPC_ENOMEM;
	}
	return 0;
}

void staging_fini(struct staging *s)
{
	if (!s->mem)
		return;
	if (!s->borrowed)
		munmap(s->mem, s->bytes);
	free(s->free_list);
	pthread_mutex_destroy(&s->lock);
	memset(s, 0, sizeof(*s));
}

int staging_try_get(struct staging *s)
{
	int slot = -1;

	pthread_mutex_lock(&s->lock);
	if (s->nfree > 0) {
		slot = (int)s->free_list[--s->nfree];
		if (s->nslots - s->nfree > s->high_water)
			s->high_water = s->nslots - s->nfree;
	}
	pthread_mutex_unlock(&s->lock);
	return slot;
}

uint32_t staging_free_slots(struct staging *s)
{
	uint32_t n;

	pthread_mutex_lock(&s->lock);
	n = s->nfree;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void staging_put(struct staging *s, int slot)
{
	pthread_mutex_lock(&s->lock);
	s->free_list[s->nfree++] = (uint32_t)slot;
	pthread_mutex_unlock(&s->lock);
}

uint8_t *staging_ptr(const struct staging *s, int slot)
{
	return s->mem + (uint64_t)slot * s->slot_size;
}

uint32_t staging_used(struct staging *s)
{
	uint32_t used;

	pthread_mutex_lock(&s->lock);
	used = s->nslots - s->nfree;
	pthread_mutex_unlock(&s->lock);
	return used;
}
