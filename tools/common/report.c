/* tools/common/report.c — JSON strings, trace events, SVG Gantt charts (see report.h). */
#include "tools/common/report.h"

#include <errno.h>
#include <string.h>

void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

int trace_open(struct trace *t, const char *path, double t0)
{
	t->n = 0;
	t->t0 = t0;
	t->f = fopen(path, "w");
	if (!t->f)
		return -1;
	fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", t->f);
	return 0;
}

/* Start the next event of the array. */
static int next_event(struct trace *t)
{
	if (!t->f)
		return 0;
	fputs(t->n++ ? ",\n" : "\n", t->f);
	return 1;
}

void trace_process(struct trace *t, int pid, const char *name)
{
	if (!next_event(t))
		return;
	fprintf(t->f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":", pid);
	json_string(t->f, name);
	fputs("}}", t->f);
}

void trace_thread(struct trace *t, int pid, int tid, const char *name)
{
	if (!next_event(t))
		return;
	fprintf(t->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid, tid);
	json_string(t->f, name);
	fputs("}}", t->f);
}

void trace_slice(struct trace *t, int pid, int tid, const char *name, double a, double b, const char *args)
{
	double dur = (b - a) * 1e6;

	if (!next_event(t))
		return;
	fputs("{\"name\":", t->f);
	json_string(t->f, name);
	fprintf(t->f, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{%s}}", pid, tid,
		(a - t->t0) * 1e6, dur < 0 ? 0 : dur, args ? args : "");
}

int trace_close(struct trace *t)
{
	int bad;

	if (!t->f)
		return 0;
	fputs("\n]}\n", t->f);
	bad = ferror(t->f);
	bad |= fclose(t->f) != 0;
	t->f = NULL;
	return bad ? -1 : 0;
}

int gantt_svg(const char *path, const char *title, const char *const *panels, int npanels, int nrows,
	      const struct gantt_slice *sl, int n)
{
	const double W = 1000, left = 150, rowh = 28, gap = 40;
	double t0[8], t1[8], span = 0;
	FILE *f;

	if (npanels < 1 || npanels > 8)
		return -1;
	for (int p = 0; p < npanels; p++) {
		t0[p] = 1e30;
		t1[p] = 0;
	}
	for (int i = 0; i < n; i++) {
		if (sl[i].panel < 0 || sl[i].panel >= npanels)
			continue;
		if (sl[i].a < t0[sl[i].panel])
			t0[sl[i].panel] = sl[i].a;
		if (sl[i].b > t1[sl[i].panel])
			t1[sl[i].panel] = sl[i].b;
	}
	for (int p = 0; p < npanels; p++)
		if (t1[p] - t0[p] > span)
			span = t1[p] - t0[p];
	if (span <= 0)
		span = 1e-3;
	if (!(f = fopen(path, "w"))) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
		   "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		(int)(W + left + 20), (int)(npanels * (nrows * rowh + gap) + 60));
	fprintf(f, "<text x=\"10\" y=\"18\" font-size=\"14\">%s (time axis %.1f ms)</text>\n", title, span * 1e3);
	for (int p = 0; p < npanels; p++) {
		double y0 = 40 + p * (nrows * rowh + gap);

		fprintf(f, "<text x=\"10\" y=\"%.1f\" font-weight=\"bold\">%s</text>\n", y0 + 12, panels[p]);
		for (int r = 0; r < nrows; r++)
			fprintf(f, "<text x=\"40\" y=\"%.1f\">rank %d</text>\n"
				   "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
				y0 + 16 + r * rowh + rowh / 2, r, left, y0 + 16 + (r + 1) * rowh, left + W,
				y0 + 16 + (r + 1) * rowh);
		for (int i = 0; i < n; i++) {
			const struct gantt_slice *s = &sl[i];
			double xa, xb, y;

			if (s->panel != p)
				continue;
			xa = left + (s->a - t0[p]) / span * W;
			xb = left + (s->b - t0[p]) / span * W;
			y = y0 + 16 + s->row * rowh + 3;
			fprintf(f, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"hsl(%d,70%%,55%%)\" "
				   "stroke=\"#333\" stroke-width=\"0.5\"><title>%s rank %d ubatch %d: %.3f ms</title></rect>\n",
				xa, y, xb - xa > 0.5 ? xb - xa : 0.5, rowh - 6, (s->micro * 67) % 360, panels[p], s->row,
				s->micro, (s->b - s->a) * 1e3);
			if (xb - xa > 24)
				fprintf(f, "<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\">u%d</text>\n", xa + 3,
					y + rowh / 2, s->micro);
			/* The boundary: this slice's end to the next rank's start. */
			for (int j = 0; j < n; j++) {
				const struct gantt_slice *nx = &sl[j];

				if (nx->panel == p && nx->micro == s->micro && nx->row == s->row + 1)
					fprintf(f, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#000\" "
						   "stroke-width=\"1\"/>\n",
						xb, y + rowh - 6, left + (nx->a - t0[p]) / span * W, y + rowh + 3);
			}
		}
	}
	fputs("</svg>\n", f);
	if (fclose(f) != 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}
