/* tests/integration/harness.c — see harness.h. */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int tdaemon_start(struct tdaemon *d, const char *const *extra)
{
	const char *bin = getenv("PPRPCD") ? getenv("PPRPCD") : "build/bin/pprpcd";
	char portfile[300];
	const char *argv[64];
	int argc = 0;

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/pprpc-test-XXXXXX");
	if (!mkdtemp(d->dir)) {
		perror("mkdtemp");
		return -1;
	}
	snprintf(portfile, sizeof(portfile), "%s/port", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/log", d->dir);
	argv[argc++] = bin;
	argv[argc++] = "--listen";
	argv[argc++] = "127.0.0.1:0";
	argv[argc++] = "--port-file";
	argv[argc++] = portfile;
	argv[argc++] = "--log-level";
	argv[argc++] = "info";
	for (int i = 0; extra && extra[i] && argc < 62; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;

	d->pid = fork();
	if (d->pid < 0)
		return -1;
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd >= 0) {
			dup2(fd, 2);
			dup2(fd, 1);
			close(fd);
		}
		execv(bin, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	for (int waited = 0; waited < 20000; waited += 10) {
		FILE *f = fopen(portfile, "r");
		unsigned p = 0;

		if (f) {
			int ok = fscanf(f, "%u", &p) == 1;

			fclose(f);
			if (ok && p > 0 && p < 65536) {
				d->port = (uint16_t)p;
				snprintf(d->addr, sizeof(d->addr), "127.0.0.1:%u", p);
				return 0;
			}
		}
		if (!tdaemon_alive(d))
			break;
		sleep_ms(10);
	}
	fprintf(stderr, "harness: pprpcd did not start\n");
	tdaemon_dump_log(d);
	tdaemon_stop(d);
	return -1;
}

int tdaemon_alive(struct tdaemon *d)
{
	int st;

	if (d->pid <= 0)
		return 0;
	if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
		d->pid = -st - 1; /* remember it exited */
		return 0;
	}
	return 1;
}

int tdaemon_stop(struct tdaemon *d)
{
	int st = -1;

	if (d->pid > 0) {
		kill(d->pid, SIGTERM);
		for (int waited = 0; waited < 10000; waited += 10) {
			if (waitpid(d->pid, &st, WNOHANG) == d->pid)
				goto done;
			sleep_ms(10);
		}
		fprintf(stderr, "harness: pprpcd %d ignored SIGTERM; killing\n", d->pid);
		kill(d->pid, SIGKILL);
		waitpid(d->pid, &st, 0);
	} else if (d->pid < 0) {
		st = -d->pid - 1;
	}
done:
	d->pid = 0;
	if (d->dir[0]) {
		char cmd[400];

		if (st != 0 || getenv("PPRPC_KEEP_LOGS"))
			tdaemon_dump_log(d);
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "harness: cannot remove %s\n", d->dir);
		d->dir[0] = '\0';
	}
	return st;
}

void tdaemon_dump_log(const struct tdaemon *d)
{
	FILE *f = fopen(d->log, "r");
	char line[512];

	if (!f)
		return;
	fprintf(stderr, "---- pprpcd log (%s) ----\n", d->log);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fprintf(stderr, "---- end of log ----\n");
	fclose(f);
}

int traw_connect(const struct tdaemon *d)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(d->port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}
