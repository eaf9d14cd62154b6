/*
 * daemon/server/options.h — the settings table (flags and configuration file) and
 * CPU placement specs.
 */
#ifndef PPRPC_DAEMON_OPTIONS_H
#define PPRPC_DAEMON_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/pprpcd.h"   /* struct pprpcd_opts, struct cpu_affinity */

#define PPRPCD_DEFAULT_CONFIG "/etc/pprpc/pprpcd.conf"

void pprpcd_opts_default(struct pprpcd_opts *o);
/* Read the configuration file, then argv, into o.  Returns 0 to run, 1 when
 * --help/--version/--check-config printed (exit 0), or a negative code
 * after printing the reason (exit 2). */
int pprpcd_opts_parse(struct pprpcd_opts *o, int argc, char **argv);

/* One setting.  The table of them (options.c) is the only place a setting
 * is described: --help prints help, and `pprpcd --help-table md|roff|conf`
 * (options_doc.c) prints the README's table, the man page's OPTIONS and the
 * example file from name, arg, help, doc and the default — which is show()
 * of pprpcd_opts_default(), so no default is written twice. */
struct optdef {
	const char *name;   /* flag --name, file key name (or name_with_underscores) */
	const char *arg;
	const char *help;   /* one line: --help and the README's table */
	const char *doc;    /* whole sentences: the man page and the example file's comment */
	const char *example; /* optional: shown commented out in the example file when the default is empty */
	int (*set)(struct pprpcd_opts *o, const char *v, char *err, size_t errlen);
	void (*show)(const struct pprpcd_opts *o, char *buf, size_t len);
};

/* The table, for the printers of options_doc.c. */
const struct optdef *pprpcd_optdefs(size_t *ret_n);
/* Print the settings as "md" (the README's table), "roff" (the man page's
 * OPTIONS) or "conf" (the example configuration file).  PPRPC_EINVAL for
 * another format. */
int pprpcd_opts_doc(const char *format, FILE *f);

/* Parse a configuration text (path is only for messages).  Errors name
 * path:line. */
int pprpcd_config_parse(struct pprpcd_opts *o, const char *path, const char *text, size_t len,
			char *err, size_t errlen);
/* Read and parse a file; a missing file is fine unless must_exist. */
int pprpcd_config_load(struct pprpcd_opts *o, const char *path, int must_exist, char *err, size_t errlen);
void pprpcd_config_print(const struct pprpcd_opts *o, FILE *f);
/* Apply PPRPC_RDMA_CHUNK / _TX_DEPTH / _RX_DEPTH and PPRPC_TRANSPORT. */
int pprpcd_opts_env(struct pprpcd_opts *o, char *err, size_t errlen);
/* Cross-field and vocabulary checks (addresses parse, devices known). */
int pprpcd_opts_validate(const struct pprpcd_opts *o, char *err, size_t errlen);

/* "loop=0,device=1-3" (either part optional; lists like 0,2-3 inside a
 * part use ':' as separator: device=1:3-5). */
int affinity_parse(const char *s, struct cpu_affinity *out, char *err, size_t errlen);
void affinity_format(const struct cpu_affinity *a, char *buf, size_t len);

#endif
