/* Fuzz target: the configuration file parser (pprpcd_config_parse) and the
 * validation of what it produced.  Any input must give 0 or an error with
 * a message — never a crash, a read past the input or a leak. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/server/options.h"
#include "daemon/pprpcd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pprpcd_opts o;
	char err[512];
	int rc;

	pprpcd_opts_default(&o);
	err[0] = '\0';
	rc = pprpcd_config_parse(&o, "fuzz.conf", (const char *)data, size, err, sizeof(err));
	if (rc < 0 && !err[0])
		abort(); /* every refusal must say why */
	if (rc == 0) {
		pprpcd_opts_validate(&o, err, sizeof(err));
		if (strlen(o.listen) >= sizeof(o.listen) || o.log_level < 0 || o.log_level > 7)
			abort();
	}
	return 0;
}
