/* daemon/device/hostmem.c — see hostmem.h. */
#include "daemon/device/hostmem.h"

#include <stdio.h>

#include "pprpc/types.h"

int hostmem_info(uint64_t *ret_free, uint64_t *ret_total)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long v, avail = 0, total = 0;

	if (!f)
		return PPRPC_EDEVICE;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
			avail = v * 1024;
		else if (sscanf(line, "MemTotal: %llu kB", &v) == 1)
			total = v * 1024;
	}
	fclose(f);
	if (!total)
		return PPRPC_EDEVICE;
	*ret_free = avail;
	*ret_total = total;
	return 0;
}
