/* tests/integration/harness.c — see harness.h. */
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int tdaemon_start(struct tdaemon *d, const char *const *extra)
{
	const char *bin = getenv("PPRPCD") ? getenv("PPRPCD") : "build/bin/pprpcd";
	const char *argv[64] = { "--log-level", "info" };
	const char *devices = getenv("PPRPC_TEST_DEVICES");
	char err[512];
	int n = 2;

	/* The same tests against another device set (cuda:0 on a GPU host,
	 * where the async paths are the CUDA backend's). */
	if (devices && *devices) {
		argv[n++] = "--devices";
		argv[n++] = devices;
	}
	for (int i = 0; extra && extra[i] && n < 63; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	if (spawn_daemon(bin, argv, 20000, d, err, sizeof(err)) == 0)
		return 0;
	fprintf(stderr, "harness: %s\n", err);
	tdaemon_stop(d);
	return -1;
}

int tdaemon_alive(struct tdaemon *d)
{
	return spawn_alive(d);
}

int tdaemon_stop(struct tdaemon *d)
{
	int st;

	if (!d->dir[0])
		return -1;
	spawn_alive(d);
	st = spawn_stop(d, 1);
	if (st != 0 || getenv("PPRPC_KEEP_LOGS"))
		tdaemon_dump_log(d);
	spawn_stop(d, 0);
	return st;
}

char *tdaemon_log(const struct tdaemon *d)
{
	FILE *f = fopen(d->log, "r");
	size_t cap = 1 << 16, n = 0, k;
	char *s = malloc(cap);

	if (!f || !s) {
		fprintf(stderr, "harness: cannot read the log %s\n", d->log);
		exit(1);
	}
	while ((k = fread(s + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (n + 1 == cap) {
			cap *= 2;
			s = realloc(s, cap);
			if (!s)
				exit(1);
		}
	}
	s[n] = '\0';
	fclose(f);
	return s;
}

int tdaemon_stop_log(struct tdaemon *d, char **ret_log)
{
	int st;

	if (!d->dir[0])
		return -1;
	st = spawn_stop(d, 1);
	*ret_log = tdaemon_log(d);
	if (st != 0 || getenv("PPRPC_KEEP_LOGS"))
		tdaemon_dump_log(d);
	spawn_stop(d, 0);
	return st;
}

void tdaemon_dump_log(const struct tdaemon *d)
{
	spawn_dump_log(d);
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

uint64_t tmem_available_mib(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
				break;
		fclose(f);
	}
	if (!kb) {
		/* every floor test would compute a floor from nothing */
		fprintf(stderr, "tmem_available_mib: no MemAvailable in /proc/meminfo\n");
		exit(1);
	}
	return kb / 1024;
}
