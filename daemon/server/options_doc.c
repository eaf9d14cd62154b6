/*
 * daemon/server/options_doc.c — the settings table (options.c) printed as the
 * documents that describe it: the README's table (md), the man page's
 * OPTIONS (roff) and the example configuration file (conf).
 *
 * `pprpcd --help-table FORMAT` prints them; scripts/gen-docs.sh puts them
 * into README.md, doc/man/pprpcd.8 and conf/pprpcd.conf (`make docs`) and
 * fails `make unit` when a file differs, so a setting added to the table
 * reaches all three and none drifts.  Defaults are the show() of
 * pprpcd_opts_default(): written once, in the code that applies them.
 */
#include <stdio.h>
#include <string.h>

#include "daemon/server/options.h"
#include "daemon/pprpcd.h"
#include "pprpc/types.h"

#define WIDTH 78

/* The default as --check-config shows it ("" when unset). */
static void default_of(const struct optdef *def, char *buf, size_t len)
{
	struct pprpcd_opts o;

	pprpcd_opts_default(&o);
	def->show(&o, buf, len);
}

/* A show() may follow the value with a note ("0 (all cores)"): the value
 * alone is what a file may say. */
static void value_only(char *v)
{
	char *note = strstr(v, " (");

	if (note)
		*note = '\0';
}

/* ---- markdown ------------------------------------------------------------------ */

static void md_cell(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputc('\\', f);
		fputc(*s, f);
	}
}

static void print_md(FILE *f, const struct optdef *defs, size_t n)
{
	fprintf(f, "| setting | value | default | meaning |\n|---|---|---|---|\n");
	for (size_t i = 0; i < n; i++) {
		char v[512], note[512] = "";
		char *p;

		default_of(&defs[i], v, sizeof(v));
		p = strstr(v, " (");
		if (p) {
			snprintf(note, sizeof(note), "%s", p);
			*p = '\0';
		}
		fprintf(f, "| `%s` | ", defs[i].name);
		md_cell(f, defs[i].arg);
		fprintf(f, " | ");
		if (v[0]) {
			fprintf(f, "`");
			md_cell(f, v);
			fprintf(f, "`");
			md_cell(f, note);
		} else {
			fprintf(f, "—");
		}
		fprintf(f, " | ");
		md_cell(f, defs[i].help);
		fprintf(f, " |\n");
	}
}

/* ---- filled text: roff and comments --------------------------------------------- */

/* One word of roff: a backslash is \e, and a minus that starts an option or
 * an argument (-hex, --listen) is \- so it can be copied. */
static void roff_word(FILE *f, const char *w, size_t len, int line_start)
{
	int opt = len > 0 && w[0] == '-';

	if (line_start && len > 0 && (w[0] == '.' || w[0] == '\''))
		fputs("\\&", f);
	for (size_t k = 0; k < len; k++) {
		if (w[k] == '\\')
			fputs("\\e", f);
		else if (w[k] == '-' && opt)
			fputs("\\-", f);
		else
			fputc(w[k], f);
	}
}

/* Text filled to WIDTH columns after prefix, words split at spaces; a
 * double space (between sentences) is kept. */
static void fill(FILE *f, const char *prefix, const char *text, int roff)
{
	size_t col = 0;
	const char *s = text;

	while (*s) {
		size_t gap = 0, len;

		while (*s == ' ') {
			gap++;
			s++;
		}
		if (!*s)
			break;
		len = strcspn(s, " ");
		if (col > 0 && col + (gap > 1 ? 2 : 1) + len > WIDTH) {
			fputc('\n', f);
			col = 0;
		}
		if (col == 0) {
			fputs(prefix, f);
			col = strlen(prefix);
		} else {
			fputs(gap > 1 ? "  " : " ", f);
			col += gap > 1 ? 2 : 1;
		}
		if (roff)
			roff_word(f, s, len, col == strlen(prefix));
		else
			fwrite(s, 1, len, f);
		col += len;
		s += len;
	}
	if (col > 0)
		fputc('\n', f);
}

/* ---- roff ------------------------------------------------------------------------ */

static void roff_flag(FILE *f, const char *name, const char *arg)
{
	fputs(".BI \\-\\-", f);
	for (const char *p = name; *p; p++)
		if (*p == '-')
			fputs("\\-", f);
		else
			fputc(*p, f);
	fprintf(f, " \" %s\"\n", arg);
}

static void print_roff(FILE *f, const struct optdef *defs, size_t n)
{
	fputs(".TP\n.BI \"\\-c, \\-\\-config\" \" FILE\"\n", f);
	fill(f, "", "The configuration file, read before the flags (default /etc/pprpc/pprpcd.conf if it "
		    "exists; a FILE named here must exist).", 1);
	fputs(".TP\n.B \\-\\-check\\-config\n", f);
	fill(f, "", "Validate the configuration (file, environment, flags), print the effective settings "
		    "and exit.", 1);
	for (size_t i = 0; i < n; i++) {
		char v[512], line[600];

		default_of(&defs[i], v, sizeof(v));
		fputs(".TP\n", f);
		roff_flag(f, defs[i].name, defs[i].arg);
		fill(f, "", defs[i].doc, 1);
		snprintf(line, sizeof(line), "Default: %s.", v[0] ? v : "unset");
		fill(f, "", line, 1);
	}
	fputs(".TP\n.B \\-\\-version\n", f);
	fill(f, "", "Print the version and the protocol version, and exit.", 1);
	fputs(".TP\n.B \\-\\-help\n", f);
	fill(f, "", "Print the flags with a line each, and exit.", 1);
}

/* ---- conf ------------------------------------------------------------------------ */

static void print_conf(FILE *f, const struct optdef *defs, size_t n)
{
	fill(f, "# ", "/etc/pprpc/pprpcd.conf — pprpcd configuration (one rank).", 0);
	fputs("#\n", f);
	fill(f, "# ", "Format: one \"name = value\" per line; '#' or ';' starts a comment line; an optional "
		      "\"[pprpcd]\" section header is accepted.  Names are the long flags without \"--\" (\"-\" "
		      "and \"_\" are interchangeable).  The environment variables named below override this "
		      "file, command-line flags override both.  Unknown names and bad values are errors "
		      "naming file:line.  `pprpcd -c FILE --check-config` validates a file and prints the "
		      "effective settings.  Values below are the defaults.", 0);
	fputs("#\n", f);
	fill(f, "# ", "Under systemd (pprpcd@NAME.service) the file is /etc/pprpc/NAME.conf.  This example "
		      "is generated from pprpcd's table of settings (`pprpcd --help-table conf`; `man pprpcd` "
		      "has the same text).", 0);
	fputs("\n[pprpcd]\n", f);
	for (size_t i = 0; i < n; i++) {
		char v[512], key[64];

		default_of(&defs[i], v, sizeof(v));
		value_only(v);
		snprintf(key, sizeof(key), "%s", defs[i].name);
		for (char *p = key; *p; p++)
			if (*p == '-')
				*p = '_';
		fputc('\n', f);
		fill(f, "# ", defs[i].doc, 0);
		if (v[0])
			fprintf(f, "%s = %s\n", key, v);
		else
			fprintf(f, "# %s = %s\n", key, defs[i].example ? defs[i].example : "");
	}
}

int pprpcd_opts_doc(const char *format, FILE *f)
{
	size_t n;
	const struct optdef *defs = pprpcd_optdefs(&n);

	if (!strcmp(format, "md"))
		print_md(f, defs, n);
	else if (!strcmp(format, "roff"))
		print_roff(f, defs, n);
	else if (!strcmp(format, "conf"))
		print_conf(f, defs, n);
	else
		return PPRPC_EINVAL;
	return 0;
}
