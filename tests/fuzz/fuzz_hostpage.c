/* Fuzz target: what a daemon reads of a client's host page before it writes
 * into it (daemon/objects/hostpage.c): the text of /proc/PID/fd/FD's link
 * (hostpage_link_ok) and the page's header against the key the request
 * names (proto/hostpage.c: hostpage_hdr_check).  Both come from a process
 * the daemon does not trust.
 *
 * Input: a link line (up to '\n'), then
 *   byte 0     control: bits 0-5 the key's length (0..63, exactly that many
 *              bytes on the heap, so a read past a short key is caught);
 *              bit 6 the page length is len +- 1 (bit 7 of byte 1 says
 *              which); bit 7 the header is a good one made by
 *              hostpage_hdr_init from the input's len and key, with the
 *              byte at byte 1's position flipped when byte 1 is not 0
 *   byte 1     see bits 6 and 7
 *   bytes 2-9  len, the page's length as the daemon knows it
 *   then       the key, then the header's bytes (zeros after the input)
 * The header is exactly HOSTPAGE_HDR bytes on the heap: the check never
 * reads past it.  Contract: the link is accepted iff it is exactly the
 * memfd's; the header answers 0, PPRPC_EPROTO or PPRPC_EAUTH, a refusal
 * with its reason; 0 only for a 32-byte key, a length in (HOSTPAGE_HDR,
 * HOSTPAGE_MAX_BYTES] and the first 56 bytes equal to what
 * hostpage_hdr_init writes for that length and key; a good header with
 * any of those bytes flipped is refused, one flipped after them is not; a
 * key one byte shorter than one accepted is refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/objects/hostpage.h"
#include "pprpc/types.h"
#include "proto/hostpage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* magic, hdr_bytes, key_bytes, len, key: what hostpage_hdr_init writes */
#define HDR_USED (8 + 4 + 4 + 8 + HOSTPAGE_KEY)

static int hdr_valid_len(uint64_t len)
{
	return len > HOSTPAGE_HDR && len <= HOSTPAGE_MAX_BYTES;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char want[] = "/memfd:" HOSTPAGE_NAME " (deleted)";
	const uint8_t *nl = memchr(data, '\n', size);
	size_t nlen = nl ? (size_t)(nl - data) : size;
	uint8_t *hdr, *key, good[HDR_USED], ctl, pos;
	char link[256], why[200];
	uint64_t len = 0, check_len;
	size_t keylen;
	int rc;

	/* the link, as readlink gives it (NUL-terminated, may hold anything) */
	if (nlen >= sizeof(link))
		nlen = sizeof(link) - 1;
	memcpy(link, data, nlen);
	link[nlen] = '\0';
	if (hostpage_link_ok(link) != !strcmp(link, want))
		abort();
	if (hostpage_link_ok(NULL))
		abort();
	if (!nl)
		return 0;
	size -= (size_t)(nl + 1 - data);
	data = nl + 1;

	if (size < 10)
		return 0;
	ctl = data[0];
	pos = data[1];
	memcpy(&len, data + 2, 8);
	data += 10;
	size -= 10;
	keylen = ctl & 0x3f;
	key = malloc(keylen ? keylen : 1);
	hdr = calloc(1, HOSTPAGE_HDR);
	if (!key || !hdr)
		abort();
	for (size_t i = 0; i < keylen; i++)
		key[i] = i < size ? data[i] : (uint8_t)i;
	if (size > keylen)
		memcpy(hdr, data + keylen, size - keylen < HOSTPAGE_HDR ? size - keylen : HOSTPAGE_HDR);

	check_len = len;
	if (ctl & 0x40)
		check_len = pos & 0x80 ? len + 1 : len - 1;
	if ((ctl & 0x80) && keylen >= HOSTPAGE_KEY) {
		hostpage_hdr_init(hdr, len, key);
		if (pos)
			hdr[pos % HOSTPAGE_HDR] ^= (uint8_t)(1u << (pos % 8));
	}

	why[0] = '\0';
	rc = hostpage_hdr_check(hdr, check_len, key, keylen, why, sizeof(why));
	if (rc != 0 && rc != PPRPC_EPROTO && rc != PPRPC_EAUTH)
		abort();
	if (rc != 0 && !why[0])
		abort();  /* every refusal says why */
	if (rc == 0) {
		/* accepted: exactly the header hostpage_hdr_init writes */
		if (keylen != HOSTPAGE_KEY || !hdr_valid_len(check_len))
			abort();
		hostpage_hdr_init(good, check_len, key);
		if (memcmp(hdr, good, HDR_USED))
			abort();
	}
	if ((ctl & 0x80) && keylen == HOSTPAGE_KEY && hdr_valid_len(check_len) && check_len == len) {
		/* a good header: refused iff a byte it holds was flipped */
		int flipped = pos && pos % HOSTPAGE_HDR < HDR_USED;

		if ((rc != 0) != flipped)
			abort();
	}
	if ((ctl & 0x40) && (ctl & 0x80) && !pos && keylen >= HOSTPAGE_KEY && check_len != len && rc == 0)
		abort();  /* a page of another length than its header's is never taken */
	/* the same header under a key one byte shorter: refused (read only
	 * within the key) */
	if (rc == 0 && hostpage_hdr_check(hdr, check_len, key, keylen - 1, why, sizeof(why)) == 0)
		abort();
	free(hdr);
	free(key);
	return 0;
}
