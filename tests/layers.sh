#!/usr/bin/env bash
# The include checker: which part of the tree may include which.
#
# doc/layers.txt names the parts (folders) and, for each, the parts it may
# include.  This reads every `#include "..."` of every .c/.h/.cu/.cuh of
# the tree and fails with
#     file:line: part X may not include part Y ("path")
# for an include the table does not allow, unless doc/layers-known.txt
# lists it (a known violation another change is removing; an entry that no
# longer matches fails too, so that file only shrinks).  It also fails on
# a cycle among the table's allow lines, on a file in no part, and when
# doc/layers.md's table of arrows differs from the rules (either way) or
# its drawing leaves a part out.
#
#   tests/layers.sh            check (exit 1 on any finding)
#   tests/layers.sh --table    print the table doc/layers.md carries
#
# An include is resolved as the compiler's -I list does (the including
# file's folder, the top, include/, libclient/include/); one naming no file
# of the tree counts for the part whose folder it starts with (the
# generated proto/pprpc.pb-c.h), or else is outside the tree (system,
# ggml, CUDA headers) and not checked.
set -euo pipefail
cd "$(dirname "$0")/.."

RULES=doc/layers.txt
KNOWN=doc/layers-known.txt
DOC=doc/layers.md
mode=check
if [ "${1:-}" = --table ]; then mode=table; shift; fi
if [ $# -gt 0 ]; then echo "usage: tests/layers.sh [--table]" >&2; exit 2; fi

files=$(find include util proto kernels transport libclient ggml-pprpc daemon tools tests bench \
	-type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | LC_ALL=C sort)

# One awk program: the rules, the known list and the doc first (each as
# "FILE:<name>" records on stdin), then the file list, then the sources.
{
	# section marks start with \001, which no source line does
	printf '\001RULES\n'; cat "$RULES"
	printf '\001KNOWN\n'; if [ -f "$KNOWN" ]; then cat "$KNOWN"; fi
	printf '\001DOC\n'; cat "$DOC"
	printf '\001FILES\n'; printf '%s\n' $files
	for f in $files; do
		printf '\001SRC %s\n' "$f"
		cat "$f"
		echo
	done
} | LC_ALL=C awk -v mode="$mode" -v rules="$RULES" -v known="$KNOWN" -v doc="$DOC" '
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function norm(p,    n, a, out, i, k) {
	n = split(p, a, "/"); k = 0
	for (i = 1; i <= n; i++) {
		if (a[i] == "" || a[i] == ".") continue
		if (a[i] == "..") { if (k > 0) k--; continue }
		out[++k] = a[i]
	}
	p = ""
	for (i = 1; i <= k; i++) p = p (i > 1 ? "/" : "") out[i]
	return p
}
# the part of a path: the longest matching folder prefix or file
function part_of(p,    i, best, bl) {
	best = ""; bl = 0
	for (i = 1; i <= npaths; i++) {
		if ((substr(ppath[i], length(ppath[i])) == "/" && index(p, ppath[i]) == 1) || p == ppath[i]) {
			if (length(ppath[i]) > bl) { bl = length(ppath[i]); best = ppart[i] }
		}
	}
	return best
}
function dirname(p) { if (p !~ /\//) return ""; sub(/\/[^\/]*$/, "", p); return p }
function fail(msg) { print msg > "/dev/stderr"; bad = 1 }
# w appears in s as a word of its own (a part name in the drawing)
function has_word(s, w,    i, b, a) {
	while ((i = index(s, w)) > 0) {
		b = substr(s, i - 1, 1); a = substr(s, i + length(w), 1)
		if (b !~ /[A-Za-z0-9_\/-]/ && a !~ /[A-Za-z0-9_\/-]/) return 1
		s = substr(s, i + length(w))
	}
	return 0
}
# depth-first search for a cycle among the allow lines: on a back edge to
# v, cyc is the path from v around to v
function visit(u,    i, j, n, a, v) {
	state[u] = 1; stack[++sp] = u
	n = split(allowlist[u], a, " ")
	for (i = 1; i <= n; i++) {
		v = a[i]
		if (state[v] == 1) {
			for (j = sp; stack[j] != v; j--) ;
			cyc = v
			for (j++; j <= sp; j++) cyc = cyc " -> " stack[j]
			cyc = cyc " -> " v
			return 1
		}
		if (state[v] == 0 && visit(v)) return 1
	}
	state[u] = 2; sp--
	return 0
}
BEGIN { sect = ""; bad = 0; npaths = 0; nparts = 0 }
/^\001RULES$/ { sect = "rules"; ln = 0; next }
/^\001KNOWN$/ { sect = "known"; ln = 0; next }
/^\001DOC$/   { sect = "doc"; ln = 0; intable = 0; indraw = 0; next }
/^\001FILES$/ { sect = "files"; next }
/^\001SRC /   { sect = "src"; cur = substr($0, 6); ln = 0; curpart = part_of(cur); next }
sect == "rules" {
	ln++
	line = $0; sub(/#.*/, "", line); line = trim(line)
	if (line == "") next
	n = split(line, w, /[ \t]+/)
	if (w[1] == "part") {
		if (n < 3) { fail(rules ":" ln ": part needs a name and a path"); next }
		if (w[2] in isPart) { fail(rules ":" ln ": part " w[2] " named twice"); next }
		isPart[w[2]] = 1; order[++nparts] = w[2]
		for (i = 3; i <= n; i++) { ppath[++npaths] = w[i]; ppart[npaths] = w[2] }
	} else if (w[1] == "allow") {
		name = w[2]; sub(/:$/, "", name)
		if (!(name in isPart)) { fail(rules ":" ln ": allow for unknown part " name); next }
		for (i = 3; i <= n; i++) {
			if (!(w[i] in isPart)) { fail(rules ":" ln ": " name " allows unknown part " w[i]); continue }
			if (w[i] == name) continue
			if (!((name, w[i]) in allow)) { allow[name, w[i]] = 1; allowlist[name] = allowlist[name] " " w[i] }
		}
	} else fail(rules ":" ln ": expected part or allow: " line)
	next
}
sect == "known" {
	ln++
	line = $0; sub(/#.*/, "", line); line = trim(line)
	if (line == "") next
	n = split(line, w, /[ \t]+/)
	if (n != 2) { fail(known ":" ln ": expected FILE INCLUDED-PATH"); next }
	knownat[w[1], w[2]] = ln; knownused[w[1], w[2]] = 0; nknown++
	next
}
sect == "doc" {
	ln++
	if ($0 ~ /^<!-- layers:drawing -->/) { indraw = 1; next }
	if ($0 ~ /^<!-- layers:end -->/) { indraw = 0; intable = 0; next }
	if ($0 ~ /^<!-- layers:table -->/) { intable = 1; next }
	if (indraw) { drawing = drawing " " $0; next }
	if (intable && $0 ~ /^\|/) {
		n = split($0, c, "|")
		p = trim(c[2]); gsub(/`/, "", p)
		if (p == "part" || p ~ /^-+$/) next
		if (!(p in isPart)) { fail(doc ":" ln ": the table names part " p ", which doc/layers.txt does not have"); next }
		docrow[p] = 1
		m = split(trim(c[3]), a, /[ ,]+/)
		for (i = 1; i <= m; i++) {
			v = a[i]; gsub(/`/, "", v)
			if (v == "" || v == "-" || v == "—") continue
			docallow[p, v] = 1
			if (!((p, v) in allow)) fail(doc ":" ln ": the table has " p " -> " v ", which doc/layers.txt does not allow")
		}
	}
	next
}
sect == "files" { have[$0] = 1; next }
sect == "src" {
	ln++
	if ($0 !~ /^[ \t]*#[ \t]*include[ \t]*"/) next
	inc = $0; sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", inc); sub(/".*/, "", inc)
	if (curpart == "") next
	t = ""
	d = dirname(cur)
	cand[1] = norm((d != "" ? d "/" : "") inc); cand[2] = norm(inc)
	cand[3] = norm("include/" inc); cand[4] = norm("libclient/include/" inc)
	for (i = 1; i <= 4; i++) if (cand[i] in have) { t = cand[i]; break }
	if (t == "") {
		tp = part_of(norm(inc))
		if (tp == "" || index(norm(inc), "/") == 0) next   # outside the tree
	} else tp = part_of(t)
	if (tp == "" || tp == curpart || ((curpart, tp) in allow)) next
	if ((cur, inc) in knownat) { knownused[cur, inc]++; next }
	fail(cur ":" ln ": part " curpart " may not include part " tp " (\"" inc "\")")
	next
}
END {
	if (mode == "table") {
		print "| part | may include |"
		print "|---|---|"
		for (i = 1; i <= nparts; i++) {
			p = order[i]; s = ""
			n = split(allowlist[p], a, " ")
			for (j = 1; j <= n; j++) s = s (j > 1 ? ", " : "") "`" a[j] "`"
			print "| `" p "` | " (s == "" ? "—" : s) " |"
		}
		exit 0
	}
	for (f in have) if (part_of(f) == "") fail(f ": in no part of " rules)
	for (k in knownat) if (!knownused[k]) {
		split(k, kk, SUBSEP)
		fail(known ":" knownat[k] ": " kk[1] " no longer includes \"" kk[2] "\" against the rules: remove the entry")
	}
	for (i = 1; i <= nparts; i++) {
		p = order[i]
		if (!(p in docrow)) fail(doc ": the table has no row for part " p)
		if (!has_word(" " drawing " ", p)) fail(doc ": the drawing does not show part " p)
		n = split(allowlist[p], a, " ")
		for (j = 1; j <= n; j++)
			if (!((p, a[j]) in docallow)) fail(doc ": the table lacks " p " -> " a[j] " (doc/layers.txt allows it)")
	}
	for (i = 1; i <= nparts && !cyc; i++) if (state[order[i]] == 0) visit(order[i])
	if (cyc) fail(rules ": the allow lines form a cycle: " cyc)
	if (!bad) printf "layers: %d parts, no include against %s (%d known, doc/layers-known.txt)\n", nparts, rules, nknown
	exit bad
}'
