/*
 * libclient/cluster.c — the cluster file: the ranks of a pipeline in stage
 * order, one per line "NAME HOST:PORT DEVICES"; '#' starts a comment.
 * Errors name file:line.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc.h"
#include "util/addr.h"

#define CLUSTER_MAX_RANKS 1024

struct rank_entry {
	char name[64];
	char addr[128];
	char devices[128];
};

struct pprpc_cluster {
	int n;
	struct rank_entry r[CLUSTER_MAX_RANKS];
};

static int field(char **p, char *out, size_t len)
{
	char *s = *p;
	size_t n;

	while (*s == ' ' || *s == '\t')
		s++;
	n = strcspn(s, " \t\r\n");
	if (n == 0 || n >= len)
		return -1;
	memcpy(out, s, n);
	out[n] = '\0';
	*p = s + n;
	return 0;
}

PPRPC_API int pprpc_cluster_parse(const char *text, const char *path, pprpc_cluster **out, char *err,
				  size_t errlen)
{
	pprpc_cluster *c = calloc(1, sizeof(*c));
	const char *line = text;
	int lineno = 0;

	if (!c)
		return PPRPC_ENOMEM;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[512], *p = buf, host[256], extra[8];
		struct rank_entry *e;
		uint16_t port;

		lineno++;
		if (len >= sizeof(buf)) {
			snprintf(err, errlen, "%s:%d: line too long", path, lineno);
			goto fail;
		}
		memcpy(buf, line, len);
		buf[len] = '\0';
		line = nl ? nl + 1 : NULL;
		if (strchr(buf, '#'))
			*strchr(buf, '#') = '\0';
		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p)
			continue;
		if (c->n == CLUSTER_MAX_RANKS) {
			snprintf(err, errlen, "%s:%d: more than %d ranks", path, lineno, CLUSTER_MAX_RANKS);
			goto fail;
		}
		e = &c->r[c->n];
		if (field(&p, e->name, sizeof(e->name)) < 0 || field(&p, e->addr, sizeof(e->addr)) < 0) {
			snprintf(err, errlen, "%s:%d: expected NAME HOST:PORT [DEVICES]", path, lineno);
			goto fail;
		}
		if (field(&p, e->devices, sizeof(e->devices)) < 0)
			snprintf(e->devices, sizeof(e->devices), "cpu");
		if (field(&p, extra, sizeof(extra)) == 0) {
			snprintf(err, errlen, "%s:%d: unexpected text after the devices", path, lineno);
			goto fail;
		}
		if (addr_split(e->addr, host, sizeof(host), &port, 50052) < 0 || port == 0) {
			snprintf(err, errlen, "%s:%d: bad address '%s'", path, lineno, e->addr);
			goto fail;
		}
		for (int i = 0; i < c->n; i++)
			if (!strcmp(c->r[i].name, e->name)) {
				snprintf(err, errlen, "%s:%d: rank name '%s' repeated", path, lineno, e->name);
				goto fail;
			}
		c->n++;
	}
	if (c->n == 0) {
		snprintf(err, errlen, "%s: no ranks", path);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	free(c);
	return PPRPC_EINVAL;
}

PPRPC_API int pprpc_cluster_load(const char *path, pprpc_cluster **out, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *text;
	size_t n;
	int rc;

	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return PPRPC_EINVAL;
	}
	text = malloc(1 << 20);
	if (!text) {
		fclose(f);
		return PPRPC_ENOMEM;
	}
	n = fread(text, 1, (1 << 20) - 1, f);
	fclose(f);
	text[n] = '\0';
	if (strlen(text) != n) {
		snprintf(err, errlen, "%s: NUL byte in the file", path);
		free(text);
		return PPRPC_EINVAL;
	}
	rc = pprpc_cluster_parse(text, path, out, err, errlen);
	free(text);
	return rc;
}

PPRPC_API void pprpc_cluster_free(pprpc_cluster *c)
{
	free(c);
}

PPRPC_API int pprpc_cluster_size(const pprpc_cluster *c)
{
	return c->n;
}

static const struct rank_entry *entry(const pprpc_cluster *c, int i)
{
	return i >= 0 && i < c->n ? &c->r[i] : NULL;
}

PPRPC_API const char *pprpc_cluster_name(const pprpc_cluster *c, int i)
{
	return entry(c, i) ? entry(c, i)->name : NULL;
}

PPRPC_API const char *pprpc_cluster_addr(const pprpc_cluster *c, int i)
{
	return entry(c, i) ? entry(c, i)->addr : NULL;
}

PPRPC_API const char *pprpc_cluster_devices(const pprpc_cluster *c, int i)
{
	return entry(c, i) ? entry(c, i)->devices : NULL;
}
