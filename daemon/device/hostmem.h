/* daemon/device/hostmem.h — free and total host memory, for every device
 * whose buffers are host memory (the native cpu device, ggml-cpu), so the
 * memory floor means the same on each and they see each other's buffers. */
#ifndef PPRPC_DAEMON_HOSTMEM_H
#define PPRPC_DAEMON_HOSTMEM_H

#include <stdint.h>

/* MemAvailable and MemTotal: 0, or PPRPC_EDEVICE when unreadable. */
int hostmem_info(uint64_t *ret_free, uint64_t *ret_total);

#endif
