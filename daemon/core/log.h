/*
 * daemon/core/log.h — the daemon's logging (library code never logs).
 *
 * Levels are syslog priorities.  Under systemd (JOURNAL_STREAM set) each line
 * starts with "<N>" so journald records the priority; otherwise lines carry
 * a timestamp and a level word.
 */
#ifndef PPRPC_DAEMON_LOG_H
#define PPRPC_DAEMON_LOG_H

enum log_level { LOG_ERR_ = 3, LOG_WARN_ = 4, LOG_NOTICE_ = 5, LOG_INFO_ = 6, LOG_DEBUG_ = 7 };

struct log_cfg {
	int level;       /* messages above this are dropped */
	int journal;     /* "<N>" prefixes */
};

void log_setup(struct log_cfg *cfg, int level);
/* "err", "warning", "notice", "info", "debug" or a digit; -1 if unknown. */
int log_level_parse(const char *s);
/* One line; control characters of the formatted text are escaped (\\xNN), so
 * a value from the network cannot start a line of its own. */
void log_msg(const struct log_cfg *cfg, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
