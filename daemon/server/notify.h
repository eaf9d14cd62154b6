/*
 * daemon/server/notify.h — the systemd notification protocol, self-contained (no
 * libsystemd needed): datagrams to $NOTIFY_SOCKET ("READY=1", "STATUS=...",
 * "WATCHDOG=1", "STOPPING=1").  Without NOTIFY_SOCKET every call is a no-op.
 */
#ifndef PPRPC_DAEMON_NOTIFY_H
#define PPRPC_DAEMON_NOTIFY_H

#include <stdint.h>

/* Send one notification; returns 0, or a negative code (not under systemd:
 * 0 and nothing sent). */
int notify_send(const char *msg);
/* Watchdog interval requested by systemd ($WATCHDOG_USEC, for this PID),
 * in microseconds; 0 when none. */
uint64_t notify_watchdog_usec(void);

#endif
