/*
 * libclient/sock.c — connecting the client's socket (non-blocking, with a
 * timeout).  The I/O itself is rpc.c's progress engine.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "libclient/client.h"
#include "util/addr.h"

int sock_connect(const char *addr, int timeout_ms, int *ret_fd, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char host[256];
	uint16_t port;
	int fd, one = 1, flags, rc, soerr = 0;
	socklen_t el = sizeof(soerr);
	struct pollfd pfd;

	if (addr_split(addr, host, sizeof(host), &port, 50052) < 0) {
		snprintf(err, errlen, "cannot parse address '%s' (expected HOST:PORT)", addr ? addr : "");
		return PPRPC_EINVAL;
	}
	if (addr_resolve(host, port, &ss, &sl) < 0) {
		snprintf(err, errlen, "cannot resolve '%s'", host);
		return PPRPC_EINVAL;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return PPRPC_ECONN;
	}
	flags = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, flags | O_NONBLOCK);
	rc = connect(fd, (struct sockaddr *)&ss, sl);
	if (rc < 0 && errno == EINPROGRESS) {
		pfd.fd = fd;
		pfd.events = POLLOUT;
		do
			rc = poll(&pfd, 1, timeout_ms);
		while (rc < 0 && errno == EINTR);
		if (rc == 0) {
			snprintf(err, errlen, "connecting to %s timed out after %d ms", addr, timeout_ms);
			close(fd);
			return PPRPC_ETIMEDOUT;
		}
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el);
		rc = soerr ? -1 : 0;
		errno = soerr;
	}
	if (rc < 0) {
		snprintf(err, errlen, "cannot connect to %s: %s", addr, strerror(errno));
		close(fd);
		return PPRPC_ECONN;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*ret_fd = fd;
	return 0;
}
