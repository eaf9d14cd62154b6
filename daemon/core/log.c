/* daemon/core/log.c — leveled logging to stderr (see log.h). */
#include "daemon/core/log.h"

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

/* Control characters become \xNN: names and messages in a line may come
 * from the network (a client name, a peer's error text), and a newline or
 * a carriage return in them would forge a log line of its own.  Bytes from
 * 0x80 up pass (UTF-8 names stay readable). */
static void escape_ctl(const char *in, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	for (const unsigned char *s = (const unsigned char *)in; *s && o + 5 < outlen; s++) {
		if (*s < 0x20 || *s == 0x7f) {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[*s >> 4];
			out[o++] = hex[*s & 15];
		} else {
			out[o++] = (char)*s;
		}
	}
	out[o] = '\0';
}

void log_msg(const struct log_cfg *cfg, int level, const char *fmt, ...)
{
	char raw[1024], line[4 * sizeof(raw)];
	va_list ap;

	if (level > cfg->level)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	escape_ctl(raw, line, sizeof(line));
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
