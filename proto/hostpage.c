/* proto/hostpage.c — a host page's header (see hostpage.h). */
#include "proto/hostpage.h"

#include <stdio.h>
#include <string.h>

#include "pprpc/types.h"

#define HOSTPAGE_MAGIC 0x3154534f48525050ull  /* "PPRHOST1" */

struct hostpage_hdr {
	uint64_t magic;
	uint32_t hdr_bytes;
	uint32_t key_bytes;
	uint64_t len;
	uint8_t key[HOSTPAGE_KEY];
};

_Static_assert(sizeof(struct hostpage_hdr) <= HOSTPAGE_HDR, "the header fits its page");

void hostpage_hdr_init(void *base, uint64_t len, const uint8_t key[HOSTPAGE_KEY])
{
	struct hostpage_hdr *h = base;

	h->hdr_bytes = HOSTPAGE_HDR;
	h->key_bytes = HOSTPAGE_KEY;
	h->len = len;
	memcpy(h->key, key, HOSTPAGE_KEY);
	h->magic = HOSTPAGE_MAGIC;
}

int hostpage_hdr_check(const void *base, uint64_t len, const uint8_t *key, size_t keylen, char *why,
		       size_t whylen)
{
	const struct hostpage_hdr *h = base;
	uint8_t diff = 0;

	if (len <= HOSTPAGE_HDR || len > HOSTPAGE_MAX_BYTES) {
		snprintf(why, whylen, "a host page of %llu bytes (%u < size <= %llu)", (unsigned long long)len,
			 HOSTPAGE_HDR, HOSTPAGE_MAX_BYTES);
		return PPRPC_EPROTO;
	}
	if (h->magic != HOSTPAGE_MAGIC || h->hdr_bytes != HOSTPAGE_HDR || h->key_bytes != HOSTPAGE_KEY ||
	    h->len != len) {
		snprintf(why, whylen, "the host page's header is not this version's");
		return PPRPC_EPROTO;
	}
	if (!key || keylen != HOSTPAGE_KEY) {
		snprintf(why, whylen, "a host page's key is %u bytes, not %zu", HOSTPAGE_KEY, keylen);
		return PPRPC_EAUTH;
	}
	for (size_t i = 0; i < HOSTPAGE_KEY; i++)
		diff |= (uint8_t)(h->key[i] ^ key[i]);
	if (diff) {
		snprintf(why, whylen, "the key is not the host page's");
		return PPRPC_EAUTH;
	}
	return 0;
}
