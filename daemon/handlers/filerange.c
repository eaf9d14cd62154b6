/* daemon/handlers/filerange.c — see filerange.h. */
#include "daemon/handlers/filerange.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pprpc/types.h"

int filerange_parse(const Pprpc__FileRange *f, uint64_t size, const char *what, struct filesum *id,
		    uint64_t *ret_off, char *hint, size_t hintlen, char *err, size_t errlen)
{
	if (f->head_sha256.len != 32 || f->content_sha256.len != 32) {
		snprintf(err, errlen, "%s: a file's hashes are 32 bytes each", what);
		return PPRPC_EINVAL;
	}
	if (f->file_offset > f->file_size || size > f->file_size - f->file_offset) {
		snprintf(err, errlen, "%s: %" PRIu64 " bytes at %" PRIu64 " are outside a file of %" PRIu64 " bytes", what,
			 size, f->file_offset, f->file_size);
		return PPRPC_ERANGE;
	}
	if (f->hint && strlen(f->hint) >= hintlen) {
		snprintf(err, errlen, "%s: file hint longer than %zu bytes", what, hintlen - 1);
		return PPRPC_EINVAL;
	}
	id->size = f->file_size;
	memcpy(id->head, f->head_sha256.data, 32);
	memcpy(id->content, f->content_sha256.data, 32);
	*ret_off = f->file_offset;
	snprintf(hint, hintlen, "%s", f->hint ? f->hint : "");
	return 0;
}
