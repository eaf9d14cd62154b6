/* daemon/server/notify.c — sd_notify without libsystemd (see notify.h). */
#include "daemon/server/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "pprpc/types.h"

int notify_send(const char *msg)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	size_t plen;
	socklen_t salen;
	ssize_t n;
	int fd;

	if (!path || !*path)
		return 0;
	plen = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || plen >= sizeof(sa.sun_path))
		return PPRPC_EINVAL;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, plen);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return PPRPC_EIO;
	n = sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	close(fd);
	return n < 0 ? PPRPC_EIO : 0;
}

uint64_t notify_watchdog_usec(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (!usec)
		return 0;
	/* WATCHDOG_PID, when set, names the process meant (not a child). */
	if (pid && strtol(pid, NULL, 10) != (long)getpid())
		return 0;
	errno = 0;
	v = strtoull(usec, &end, 10);
	if (errno || *end || v == 0)
		return 0;
	return v;
}
