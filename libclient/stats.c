/*
 * libclient/stats.c — STATS as named values (pprpc.h: statistics).
 *
 * The reply is walked with protobuf-c's descriptors instead of being copied
 * field by field into public structs: every scalar field of StatsReply is a
 * value of the daemon's own item, every repeated message field a list whose
 * items hold their message's scalar fields, nested messages flattened as
 * "outer.inner".  A counter added to pprpc.proto therefore reaches callers
 * (and pprpcctl --json) with no change here or in the ABI.  Strings point
 * into the unpacked reply, which the snapshot keeps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libclient/client.h"
#include "proto/meta.h"
#include "proto/msgtype.h"

struct stat_item {
	pprpc_stat *v;
	int n, cap;
};

struct stat_list {
	const char *name;
	struct stat_item *items;
	int n;
};

struct pprpc_stats {
	ProtobufCMessage *reply;
	struct stat_item top;
	struct stat_list *lists;
	int nlists;
	char **names;            /* "outer.inner" names we made */
	int nnames, capnames;
};

static int keep_name(pprpc_stats *s, const char *prefix, const char *name, const char **out)
{
	size_t len = strlen(prefix) + strlen(name) + 1;
	char *n;

	if (!*prefix) {
		*out = name;  /* the descriptor's own string: static */
		return 0;
	}
	if (s->nnames == s->capnames) {
		int cap = s->capnames ? 2 * s->capnames : 16;
		char **nn = realloc(s->names, (size_t)cap * sizeof(*nn));

		if (!nn)
			return PPRPC_ENOMEM;
		s->names = nn;
		s->capnames = cap;
	}
	if (!(n = malloc(len)))
		return PPRPC_ENOMEM;
	snprintf(n, len, "%s%s", prefix, name);
	s->names[s->nnames++] = n;
	*out = n;
	return 0;
}

static int push(struct stat_item *it, const pprpc_stat *v)
{
	if (it->n == it->cap) {
		int cap = it->cap ? 2 * it->cap : 16;
		pprpc_stat *nv = realloc(it->v, (size_t)cap * sizeof(*nv));

		if (!nv)
			return PPRPC_ENOMEM;
		it->v = nv;
		it->cap = cap;
	}
	it->v[it->n++] = *v;
	return 0;
}

/* Is a non-repeated field set?  proto3 scalars always are; optional and
 * oneof members say so in their quantifier. */
static int present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const char *base = (const char *)m;

	if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING)
		return *(void *const *)(base + f->offset) != NULL;
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
	if (f->label == PROTOBUF_C_LABEL_OPTIONAL)
		return *(const protobuf_c_boolean *)(base + f->quantifier_offset) != 0;
	return 1;
}

/* The scalar at p as a value; 0, or 1 for a type that is not a statistic
 * (bytes). */
static int scalar(const ProtobufCFieldDescriptor *f, const void *p, pprpc_stat *v)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		v->type = PPRPC_STAT_INT;
		v->i = *(const int32_t *)p;
		return 0;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		v->type = PPRPC_STAT_INT;
		v->i = *(const int64_t *)p;
		return 0;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		v->type = PPRPC_STAT_UINT;
		v->u = *(const uint32_t *)p;
		return 0;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		v->type = PPRPC_STAT_UINT;
		v->u = *(const uint64_t *)p;
		return 0;
	case PROTOBUF_C_TYPE_BOOL:
		v->type = PPRPC_STAT_UINT;
		v->u = *(const protobuf_c_boolean *)p != 0;
		return 0;
	case PROTOBUF_C_TYPE_ENUM:
		v->type = PPRPC_STAT_INT;
		v->i = *(const int *)p;
		return 0;
	case PROTOBUF_C_TYPE_FLOAT:
		v->type = PPRPC_STAT_REAL;
		v->d = *(const float *)p;
		return 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		v->type = PPRPC_STAT_REAL;
		v->d = *(const double *)p;
		return 0;
	case PROTOBUF_C_TYPE_STRING:
		v->type = PPRPC_STAT_STRING;
		v->s = *(const char *const *)p;
		return 0;
	default:
		return 1;
	}
}

static int walk(pprpc_stats *s, const ProtobufCMessage *m, const char *prefix, struct stat_item *it, int top);

/* A repeated message field of the reply: one list, an item per element. */
static int add_list(pprpc_stats *s, const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const char *base = (const char *)m;
	size_t n = *(const size_t *)(base + f->quantifier_offset);
	ProtobufCMessage *const *elems = *(ProtobufCMessage *const *const *)(base + f->offset);
	struct stat_list *l, *nl = realloc(s->lists, (size_t)(s->nlists + 1) * sizeof(*nl));
	int rc;

	if (!nl)
		return PPRPC_ENOMEM;
	s->lists = nl;
	l = &s->lists[s->nlists++];
	l->name = f->name;
	l->n = 0;
	l->items = calloc(n ? n : 1, sizeof(*l->items));
	if (!l->items)
		return PPRPC_ENOMEM;
	for (size_t i = 0; i < n; i++) {
		l->n++;
		if (elems[i] && (rc = walk(s, elems[i], "", &l->items[i], 0)) < 0)
			return rc;
	}
	return 0;
}

/* The fields of m into it (top: repeated messages become lists). */
static int walk(pprpc_stats *s, const ProtobufCMessage *m, const char *prefix, struct stat_item *it, int top)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const char *base = (const char *)m;
	int rc;

	for (unsigned k = 0; k < d->n_fields; k++) {
		const ProtobufCFieldDescriptor *f = &d->fields[k];
		pprpc_stat v;

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			/* Only the reply's own lists; a repeated field deeper down
			 * is not a statistic. */
			if (top && f->type == PROTOBUF_C_TYPE_MESSAGE && (rc = add_list(s, m, f)) < 0)
				return rc;
			continue;
		}
		if (!present(m, f))
			continue;
		if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
			char sub[128];

			snprintf(sub, sizeof(sub), "%s%s.", prefix, f->name);
			if ((rc = walk(s, *(ProtobufCMessage *const *)(base + f->offset), sub, it, 0)) < 0)
				return rc;
			continue;
		}
		memset(&v, 0, sizeof(v));
		if (scalar(f, base + f->offset, &v))
			continue;
		if (v.type == PPRPC_STAT_STRING && !v.s)
			v.s = "";
		if ((rc = keep_name(s, prefix, f->name, &v.name)) < 0 || (rc = push(it, &v)) < 0)
			return rc;
	}
	return 0;
}

PPRPC_API int pprpc_stats_get(pprpc_client *c, pprpc_stats **out)
{
	Pprpc__Stats req = PPRPC__STATS__INIT;
	ProtobufCMessage *m = NULL;
	pprpc_stats *s;
	int rc;

	if (!out)
		return client_fail(c, PPRPC_EINVAL, "stats_get: NULL output");
	rc = rpc_call(c, MSG_STATS, &req.base, NULL, 0, &pprpc__stats_reply__descriptor, &m, NULL, 0);
	if (rc < 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s) {
		meta_free(m);
		return client_fail(c, PPRPC_ENOMEM, "out of memory");
	}
	s->reply = m;
	rc = walk(s, m, "", &s->top, 1);
	if (rc < 0) {
		pprpc_stats_free(s);
		return client_fail(c, rc, "out of memory");
	}
	*out = s;
	return 0;
}

PPRPC_API void pprpc_stats_free(pprpc_stats *s)
{
	if (!s)
		return;
	for (int l = 0; l < s->nlists; l++) {
		for (int i = 0; i < s->lists[l].n; i++)
			free(s->lists[l].items[i].v);
		free(s->lists[l].items);
	}
	free(s->lists);
	for (int i = 0; i < s->nnames; i++)
		free(s->names[i]);
	free(s->names);
	free(s->top.v);
	meta_free(s->reply);
	free(s);
}

PPRPC_API const char *pprpc_stats_list(const pprpc_stats *s, int i)
{
	return s && i >= 0 && i < s->nlists ? s->lists[i].name : NULL;
}

static const struct stat_list *find_list(const pprpc_stats *s, const char *list)
{
	for (int l = 0; s && list && l < s->nlists; l++)
		if (!strcmp(s->lists[l].name, list))
			return &s->lists[l];
	return NULL;
}

static const struct stat_item *find_item(const pprpc_stats *s, const char *list, int item)
{
	const struct stat_list *l;

	if (!s)
		return NULL;
	if (!list)
		return item == 0 ? &s->top : NULL;
	l = find_list(s, list);
	return l && item >= 0 && item < l->n ? &l->items[item] : NULL;
}

PPRPC_API int pprpc_stats_count(const pprpc_stats *s, const char *list)
{
	const struct stat_list *l;

	if (!s)
		return 0;
	if (!list)
		return 1;
	l = find_list(s, list);
	return l ? l->n : 0;
}

PPRPC_API int pprpc_stats_field(const pprpc_stats *s, const char *list, int item, int i, pprpc_stat *out)
{
	const struct stat_item *it = find_item(s, list, item);

	if (!it || i < 0 || i >= it->n)
		return PPRPC_ERANGE;
	*out = it->v[i];
	return 0;
}

PPRPC_API int pprpc_stats_find(const pprpc_stats *s, const char *list, int item, const char *name,
			       pprpc_stat *out)
{
	const struct stat_item *it = find_item(s, list, item);

	for (int i = 0; it && name && i < it->n; i++)
		if (!strcmp(it->v[i].name, name)) {
			*out = it->v[i];
			return 0;
		}
	return PPRPC_EINVAL;
}

PPRPC_API uint64_t pprpc_stats_u64(const pprpc_stats *s, const char *list, int item, const char *name)
{
	pprpc_stat v;

	if (pprpc_stats_find(s, list, item, name, &v) < 0)
		return 0;
	if (v.type == PPRPC_STAT_UINT)
		return v.u;
	if (v.type == PPRPC_STAT_INT)
		return v.i > 0 ? (uint64_t)v.i : 0;
	if (v.type == PPRPC_STAT_REAL)
		return v.d >= 18446744073709551615.0 ? UINT64_MAX : v.d > 0 ? (uint64_t)v.d : 0;
	return 0;
}

PPRPC_API const char *pprpc_stats_str(const pprpc_stats *s, const char *list, int item, const char *name)
{
	pprpc_stat v;

	if (pprpc_stats_find(s, list, item, name, &v) < 0 || v.type != PPRPC_STAT_STRING)
		return "";
	return v.s;
}
