/* daemon/device/devinfo.h — DeviceInfo messages for HELLO and STATS replies. */
#ifndef PPRPC_DAEMON_DEVINFO_H
#define PPRPC_DAEMON_DEVINFO_H

#include "daemon/pprpcd.h"
#include "proto/pprpc.pb-c.h"

struct devinfo_set {
	unsigned n;
	Pprpc__DeviceInfo info[PPRPCD_MAX_DEVICES];
	Pprpc__DeviceInfo *ptrs[PPRPCD_MAX_DEVICES];
};

/* Fill set from the daemon's devices (strings point into the devices). */
void devinfo_fill(struct pprpcd *d, struct devinfo_set *set);

#endif
