/* daemon/device/hostmem.h — free and total host memory, for a device whose
 * buffers are host memory (ggml-cpu): the figures the native cpu device
 * reads too (dev_cpu.c), so the memory floor means the same on both. */
#ifndef PPRPC_DAEMON_HOSTMEM_H
#define PPRPC_DAEMON_HOSTMEM_H

#include <stdint.h>

/* MemAvailable and MemTotal: 0, or PPRPC_EDEVICE when unreadable. */
int hostmem_info(uint64_t *ret_free, uint64_t *ret_total);

#endif
