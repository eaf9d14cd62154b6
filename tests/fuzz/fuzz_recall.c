/* Fuzz target: the parser of a rank's last-load record
 * (daemon/weights/wrecall.c, model-dir/.pprpc-last-load), a file anyone
 * who can write model-dir can alter.  Any input must give NULL or a record
 * that holds: a name that stays under model-dir, regions inside the file,
 * at most WRECORD_MAX_REGIONS of them — never a crash or a read past the
 * input. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/weights/wsrc_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wrecord *r = wrecord_parse((const char *)data, size);

	if (!r)
		return 0;
	if (!r->name[0] || r->name[0] == '/' || r->n == 0 || r->n > WRECORD_MAX_REGIONS)
		abort();
	/* no component "." or ".." and none empty: the name stays beneath */
	for (const char *p = r->name; *p;) {
		size_t k = strcspn(p, "/");

		if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
			abort();
		p += k;
		if (*p == '/' && !*++p)
			abort(); /* a trailing '/' */
	}
	for (size_t i = 0; i < r->n; i++)
		if (r->r[i].len == 0 || r->r[i].off > r->size || r->r[i].len > r->size - r->r[i].off)
			abort();
	free(r);
	return 0;
}
