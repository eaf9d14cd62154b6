/* Fuzz target: what one daemon reads of a landing page another process
 * wrote (daemon/xfer/land.c): the page's name from a PULL (it becomes a
 * path under /dev/shm), the page's header (checked before a source writes
 * into it) and a slot's bell and size (checked before a destination takes
 * its bytes).  Input: a name line, then the header's bytes, and a slot,
 * generation and size from its first bytes.  Any input must give a name
 * that stays one file of /dev/shm or a refusal, a header that is this
 * version's or a refusal, and a slot answer of 1, 0 or PPRPC_EPROTO, with
 * never a read outside the page. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/xfer/land.h"
#include "pprpc/types.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *page;
	const uint8_t *nl = memchr(data, '\n', size);
	size_t nlen = nl ? (size_t)(nl - data) : size;
	char name[128], why[200];
	uint64_t gen = 0, want = 0;
	uint32_t slot = 0;
	int rc;

	if (!page && !(page = calloc(1, LAND_PAGE_BYTES)))
		abort();
	/* the name */
	if (nlen >= sizeof(name))
		nlen = sizeof(name) - 1;
	memcpy(name, data, nlen);
	name[nlen] = '\0';
	if (land_name_ok(name) &&
	    (strchr(name, '/') || strlen(name) > strlen(LAND_PREFIX) + 10 + 1 + 32 || strstr(name, "..")))
		abort();
	/* the header, and a slot's answer */
	if (!nl)
		return 0;
	size -= (size_t)(nl + 1 - data);
	data = nl + 1;
	memset(page, 0, LAND_HDR_BYTES);
	memcpy(page, data, size < LAND_HDR_BYTES ? size : LAND_HDR_BYTES);
	rc = land_hdr_check(page, LAND_PAGE_BYTES, why, sizeof(why));
	if (rc != 0 && rc != PPRPC_EPROTO)
		abort();
	if (land_hdr_check(page, LAND_PAGE_BYTES - 1, why, sizeof(why)) == 0)
		abort(); /* a page of another size is never taken */
	if (size >= 20) {
		memcpy(&slot, data, 4);
		memcpy(&gen, data + 4, 8);
		memcpy(&want, data + 12, 8);
	}
	rc = land_desc_check(page, slot, gen, want);
	if (rc != 0 && rc != 1 && rc != PPRPC_EPROTO)
		abort();
	if (slot >= LAND_SLOTS && rc != PPRPC_EPROTO)
		abort();
	return 0;
}
