/*
 * daemon/server/server.h — the daemon's life: bind, start, run, stop.
 *
 * Start order matters for whoever waits on us (tests, systemd): see
 * server.c.  main.c calls these; the handlers call pprpcd_conn_gone.
 */
#ifndef PPRPC_DAEMON_SERVER_H
#define PPRPC_DAEMON_SERVER_H

struct pprpcd;

/* Fill d->ops with the server's implementation (core/core_impl.h): the
 * first thing pprpcd_start does; a harness that builds a context by hand
 * and serves requests through it (tests/fuzz) calls it too. */
void pprpcd_bind(struct pprpcd *d);
int pprpcd_start(struct pprpcd *d);     /* devices, listen, port file */
int pprpcd_run(struct pprpcd *d);       /* loop until stopped */
void pprpcd_stop(struct pprpcd *d);     /* begin shutdown (loop thread) */
void pprpcd_fini(struct pprpcd *d);
/* A connection finished closing (lets shutdown complete). */
void pprpcd_conn_gone(struct pprpcd *d);

#endif
