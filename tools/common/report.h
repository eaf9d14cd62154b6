/*
 * tools/common/report.h — the report writers pp-fence-test and pprpc-bench
 * share: JSON strings, Chrome trace-event files (open in Perfetto or
 * chrome://tracing) and SVG Gantt charts of per-rank slices.
 */
#ifndef PPRPC_TOOLS_REPORT_H
#define PPRPC_TOOLS_REPORT_H

#include <stdio.h>

/* s as a JSON string (quotes, escapes; NULL as ""). */
void json_string(FILE *f, const char *s);

/* A trace-event file being written; times are CLOCK_MONOTONIC seconds
 * (tools/common/measure.h now_s), shown relative to t0. */
struct trace {
	FILE *f;
	int n;
	double t0;
};

/* Create path and write the header.  0, or -1 (errno set); t->f stays NULL
 * then and every other call does nothing. */
int trace_open(struct trace *t, const char *path, double t0);
/* Name a process (pid) or one of its threads (pid, tid). */
void trace_process(struct trace *t, int pid, const char *name);
void trace_thread(struct trace *t, int pid, int tid, const char *name);
/* A complete slice [a, b] named name on (pid, tid); args is the body of a
 * JSON object ("\"ubatch\":3") or NULL. */
void trace_slice(struct trace *t, int pid, int tid, const char *name, double a, double b, const char *args);
/* Write the footer and close: 0, or -1 when anything failed to write. */
int trace_close(struct trace *t);

/* One bar of a Gantt chart: panel (a mode), row (a rank), the micro-batch
 * it belongs to (colour and label), and its interval in seconds. */
struct gantt_slice {
	int panel, row, micro;
	double a, b;
};

/* An SVG Gantt chart: one panel per name in panels (each on the time axis
 * of its own first slice, all to the same scale), rows "rank 0..nrows-1",
 * a line from each slice's end to the start of the same micro-batch on the
 * next row (the boundary).  0, or -1 with the reason on stderr. */
int gantt_svg(const char *path, const char *title, const char *const *panels, int npanels, int nrows,
	      const struct gantt_slice *sl, int n);

#endif
