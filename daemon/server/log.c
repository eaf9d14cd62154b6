/* daemon/server/log.c — leveled logging to stderr (see log.h). */
#include "daemon/server/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const level_names[8] = {
	"emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
};

void log_setup(struct log_cfg *cfg, int level)
{
	cfg->level = level;
	cfg->journal = getenv("JOURNAL_STREAM") != NULL;
}

int log_level_parse(const char *s)
{
	int i;

	if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
		return s[0] - '0';
	for (i = 0; i < 8; i++)
		if (strcmp(s, level_names[i]) == 0)
			return i;
	if (strcmp(s, "error") == 0)
		return LOG_ERR_;
	if (strcmp(s, "warn") == 0)
		return LOG_WARN_;
	return -1;
}

void log_msg(const struct log_cfg *cfg, int level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (level > cfg->level)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (cfg->journal) {
		fprintf(stderr, "<%d>%s\n", level, line);
	} else {
		struct timespec ts;
		struct tm tm;
		char tb[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		strftime(tb, sizeof(tb), "%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ld pprpcd %s: %s\n", tb, ts.tv_nsec / 1000000,
			level_names[level & 7], line);
	}
}
