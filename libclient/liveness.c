/*
 * libclient/liveness.c — is the daemon's process alive, and a way for
 * another thread to end the waits of this client.
 *
 * PING is answered by the daemon's event loop, never queued behind device
 * work, so an answer within a few seconds tells a rank busy with a long
 * graph (its loop answers while its devices compute) from one whose process
 * is stopped or whose host is gone (nothing answers; the socket may stay
 * open for minutes).  A PING not answered in time breaks the connection:
 * its reply could still come and would be out of sync.
 *
 * The cancel fd lets a watchdog thread (which must not touch this client:
 * one thread at a time) end a wait that would otherwise last until the io
 * timeout: progress() polls it with the socket, and once it is readable
 * every wait fails with PPRPC_ECANCELED and breaks the connection.  The fd
 * stays the caller's; the library never reads or closes it.
 */
#include <string.h>

#include "libclient/client.h"
#include "proto/msgtype.h"

PPRPC_API int pprpc_ping(pprpc_client *c, int timeout_ms)
{
	Pprpc__Empty req = PPRPC__EMPTY__INIT;
	int saved, rc;

	if (!c)
		return PPRPC_EINVAL;
	saved = c->io_timeout_ms;
	c->io_timeout_ms = timeout_ms > 0 ? timeout_ms : 5000;
	rc = rpc_call(c, MSG_PING, &req.base, NULL, 0, NULL, NULL, NULL, 0);
	c->io_timeout_ms = saved;
	if (rc == PPRPC_ETIMEDOUT)
		client_fail(c, rc, "no answer to PING within %d ms: the daemon's process is stopped or its host "
			    "unreachable (a busy daemon answers PING while its devices work)",
			    timeout_ms > 0 ? timeout_ms : 5000);
	return rc;
}

PPRPC_API void pprpc_set_cancel_fd(pprpc_client *c, int fd)
{
	if (c)
		c->cancel_fd = fd;
}
