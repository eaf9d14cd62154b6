/* tools/common/loopback.c — forked loopback TCP peer (see loopback.h). */
#include "tools/common/loopback.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

void set_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int loopback_peer_start(struct loopback_peer *p, void (*serve)(int fd, void *arg), void *arg)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int lfd, fd;

	p->pid = 0;
	p->fd = -1;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
		close(lfd);
		return -1;
	}
	p->pid = fork();
	if (p->pid < 0) {
		p->pid = 0;
		close(lfd);
		return -1;
	}
	if (p->pid == 0) {
		int cfd = accept(lfd, NULL, NULL);

		if (cfd < 0)
			_exit(2);
		close(lfd);
		set_nodelay(cfd);
		serve(cfd, arg);
		_exit(0);
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (fd >= 0)
			close(fd);
		close(lfd);
		kill(p->pid, SIGTERM);
		waitpid(p->pid, NULL, 0);
		p->pid = 0;
		return -1;
	}
	close(lfd);
	set_nodelay(fd);
	p->fd = fd;
	return 0;
}

void loopback_peer_stop(struct loopback_peer *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	if (p->pid > 0)
		waitpid(p->pid, NULL, 0);
	p->pid = 0;
}

int recv_exact(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int send_exact(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
