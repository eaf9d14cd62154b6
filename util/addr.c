/* util/addr.c — address parsing (see addr.h). */
#include "util/addr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprpc/types.h"

static int parse_port(const char *s, uint16_t *port)
{
	char *end;
	long v;

	/* Digits only: strtol alone would accept " 5" or "+5". */
	if (!isdigit((unsigned char)*s))
		return PPRPC_EINVAL;
	v = strtol(s, &end, 10);
	if (*end || v < 0 || v > 65535)
		return PPRPC_EINVAL;
	*port = (uint16_t)v;
	return 0;
}

int addr_split(const char *s, char *host, size_t hostlen, uint16_t *port, uint16_t default_port)
{
	const char *colon, *hs = s;
	size_t hl;
	uint16_t p = default_port;

	if (!s || !*s)
		return PPRPC_EINVAL;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close)
			return PPRPC_EINVAL;
		hs = s + 1;
		hl = (size_t)(close - hs);
		if (close[1] == ':') {
			if (parse_port(close + 2, &p) < 0)
				return PPRPC_EINVAL;
		} else if (close[1]) {
			return PPRPC_EINVAL;
		}
	} else {
		colon = strrchr(s, ':');
		if (colon && strchr(s, ':') != colon) {
			hl = strlen(s); /* bare IPv6 address without port */
		} else if (colon) {
			hl = (size_t)(colon - s);
			if (parse_port(colon + 1, &p) < 0)
				return PPRPC_EINVAL;
		} else {
			hl = strlen(s);
		}
	}
	if (hl == 0 || hl >= hostlen)
		return PPRPC_EINVAL;
	memcpy(host, hs, hl);
	host[hl] = '\0';
	*port = p;
	return 0;
}

int addr_resolve(const char *host, uint16_t port, struct sockaddr_storage *out, socklen_t *outlen)
{
	struct addrinfo hints, *res = NULL;
	char ps[8];
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(ps, sizeof(ps), "%u", port);
	rc = getaddrinfo(host, ps, &hints, &res);
	if (rc != 0 || !res)
		return PPRPC_EINVAL;
	if (res->ai_addrlen > sizeof(*out)) {
		freeaddrinfo(res);
		return PPRPC_EINVAL;
	}
	memcpy(out, res->ai_addr, res->ai_addrlen);
	*outlen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

void addr_format(const struct sockaddr *sa, char *buf, size_t len)
{
	char h[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)sa;

		inet_ntop(AF_INET, &in->sin_addr, h, sizeof(h));
		snprintf(buf, len, "%s:%u", h, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, h, sizeof(h));
		snprintf(buf, len, "[%s]:%u", h, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
}

int addr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)(const void *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;

		/* A dual-stack listener sees local IPv4 clients as ::ffff:127.x. */
		return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return 0;
}
