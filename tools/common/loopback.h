/*
 * tools/common/loopback.h — the plain-TCP baseline of the benchmarks: a
 * forked peer process on the other end of one loopback connection, both
 * ends with TCP_NODELAY, so pprpc is compared with the same bytes over the
 * same kernel path in the same run.
 */
#ifndef PPRPC_TOOLS_LOOPBACK_H
#define PPRPC_TOOLS_LOOPBACK_H

#include <stddef.h>
#include <sys/types.h>

struct loopback_peer {
	pid_t pid;  /* the forked peer; 0 when none */
	int fd;     /* our end; -1 when none */
};

/* Fork a peer that runs serve(its fd, arg) and must not return (it ends
 * with _exit; it should exit on EOF).  Returns 0, or -1 with nothing left
 * running. */
int loopback_peer_start(struct loopback_peer *p, void (*serve)(int fd, void *arg), void *arg);
/* Close our end (the peer exits on EOF) and reap it. */
void loopback_peer_stop(struct loopback_peer *p);
void set_nodelay(int fd);
/* Blocking socket I/O of exactly len bytes (EINTR retried; no SIGPIPE).
 * 0, or -1 on error or EOF. */
int recv_exact(int fd, void *buf, size_t len);
int send_exact(int fd, const void *buf, size_t len);

#endif
