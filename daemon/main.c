/* daemon/main.c — pprpcd entry point. */
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "daemon/pprpcd.h"
#include "daemon/server/options.h"
#include "daemon/server/server.h"

int main(int argc, char **argv)
{
	struct pprpcd d;
	int rc;

	memset(&d, 0, sizeof(d));
	pprpcd_opts_default(&d.opts);
	rc = pprpcd_opts_parse(&d.opts, argc, argv);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	/* CUDA modules load eagerly: a lazy load queued behind a stream that
	 * waits on a timeline deadlocks (GPU-NOTES.md).  Before any CUDA call. */
	setenv("CUDA_MODULE_LOADING", "EAGER", 0);
	/* A client vanishing mid-write must not kill the daemon. */
	signal(SIGPIPE, SIG_IGN);
	d.loop = uv_default_loop();
	rc = pprpcd_start(&d);
	if (rc == 0)
		rc = pprpcd_run(&d);
	else
		pprpcd_stop(&d);
	uv_run(d.loop, UV_RUN_DEFAULT); /* finish closing handles */
	pprpcd_fini(&d);
	/* The signal handles stay open on purpose: the loop is not closed. */
	return rc == 0 ? 0 : 1;
}
