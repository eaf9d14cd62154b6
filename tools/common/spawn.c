/* tools/common/spawn.c — see spawn.h. */
#include "tools/common/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

const char *spawn_default_bin(const char *argv0, char *buf, size_t len)
{
	const char *slash = argv0 ? strrchr(argv0, '/') : NULL;

	if (getenv("PPRPCD"))
		return getenv("PPRPCD");
	if (slash && (size_t)(slash - argv0) + 8 < len) {
		snprintf(buf, len, "%.*s/pprpcd", (int)(slash - argv0), argv0);
		if (access(buf, X_OK) == 0)
			return buf;
	}
	return "pprpcd";
}

int spawn_alive(struct spawned *s)
{
	int st;

	if (s->pid <= 0)
		return 0;
	if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
		s->pid = -st - 1;
		return 0;
	}
	return 1;
}

int spawn_daemon(const char *bin, const char *const *extra, int timeout_ms, struct spawned *s,
		 char *err, size_t errlen)
{
	char portfile[300];
	const char *argv[64];
	int argc = 0;

	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/pprpcd-XXXXXX");
	if (!mkdtemp(s->dir)) {
		snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
		s->dir[0] = '\0';
		return -1;
	}
	snprintf(portfile, sizeof(portfile), "%s/port", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/log", s->dir);
	argv[argc++] = bin;
	argv[argc++] = "--listen";
	argv[argc++] = "127.0.0.1:0";
	argv[argc++] = "--port-file";
	argv[argc++] = portfile;
	for (int i = 0; extra && extra[i] && argc < 62; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;

	s->pid = fork();
	if (s->pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		s->pid = 0;
		return -1;
	}
	if (s->pid == 0) {
		int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp(bin, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	for (int waited = 0; waited < timeout_ms; waited += 5) {
		FILE *f = fopen(portfile, "r");
		unsigned p = 0;

		if (f) {
			int ok = fscanf(f, "%u", &p) == 1;

			fclose(f);
			if (ok && p > 0 && p < 65536) {
				s->port = (uint16_t)p;
				snprintf(s->addr, sizeof(s->addr), "127.0.0.1:%u", p);
				return 0;
			}
		}
		if (!spawn_alive(s))
			break;
		sleep_ms(5);
	}
	snprintf(err, errlen, "pprpcd (%s) did not start listening; its log is %s", bin, s->log);
	return -1;
}

int spawn_stop(struct spawned *s, int keep_dir)
{
	int st = -1;

	if (s->pid > 0) {
		kill(s->pid, SIGTERM);
		for (int waited = 0; waited < 10000; waited += 5) {
			if (waitpid(s->pid, &st, WNOHANG) == s->pid)
				goto done;
			sleep_ms(5);
		}
		kill(s->pid, SIGKILL);
		waitpid(s->pid, &st, 0);
	} else if (s->pid < 0) {
		st = -s->pid - 1;
	}
done:
	s->pid = 0;
	if (s->dir[0] && !keep_dir) {
		char path[400];

		snprintf(path, sizeof(path), "%s/port", s->dir);
		unlink(path);
		unlink(s->log);
		rmdir(s->dir);
		s->dir[0] = '\0';
	}
	return st;
}

void spawn_dump_log(const struct spawned *s)
{
	FILE *f = fopen(s->log, "r");
	char line[512];

	if (!f)
		return;
	fprintf(stderr, "---- pprpcd log (%s) ----\n", s->log);
	while (fgets(line, sizeof(line), f))
		fputs(line, stderr);
	fprintf(stderr, "---- end of log ----\n");
	fclose(f);
}
