#!/usr/bin/env bash
# Every rule of the ggml engine names the kernel source it was written from.
#
# Issue 27: a rule states the preconditions of its op's kernels as ggml-cpu
# and ggml-cuda read them, the file and line next to each, in the form
#     cpu: ggml-cpu/ops.cpp:310 <what it reads>
#     cuda: ggml-cuda/cpy.cu:123 <what it reads>
# (paths relative to the pinned release's ggml/src).  This checks, for every
# `int rule_*(struct rule_ctx *)` of daemon/backend/ggml/rules/, that the text
# between the previous rule and it (its comment and its static helpers) cites
# both kernels, and that each cited file exists and has that line, so a
# citation cannot silently point past the source after a release bump.  A
# rule inherits the citations of the static helpers it calls (their
# comments), and one whose comment says "see rule_x" (same file) shares
# rule_x's.
#
#   tests/ggml/rule-sources.sh [--list] [GGML_SRC]   (default: ext/llama.cpp-<tag>/ggml/src)
# --list prints every citation (the closing note's table); exit 1 on a rule
# without both, or a citation that does not resolve.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/llama-release.sh

list=0
if [ "${1:-}" = --list ]; then list=1; shift; fi
SRC=${1:-$LLAMA_SRC_DEFAULT/ggml/src}
# the line numbers are those of the release the rules were written from
CITED=v0.5.0
if [ "$LLAMA_TAG" != "$CITED" ]; then
	echo "rule-sources: skipped: the rules cite $CITED's lines, this build is $LLAMA_TAG"
	exit 0
fi
[ -d "$SRC" ] || { echo "rule-sources: no ggml source at $SRC (scripts/fetch-llama.sh)" >&2; exit 1; }

bad=0
nrules=0
ncite=0
for f in daemon/backend/ggml/rules/rules_*.c; do
	# one record per rule: name, file:line, then its citations
	while IFS=$'\t' read -r name at cites; do
		nrules=$((nrules + 1))
		ncpu=0; ncuda=0
		for c in $cites; do
			kind=${c%%=*}; ref=${c#*=}
			path=${ref%:*}; line=${ref##*:}
			if [ ! -f "$SRC/$path" ]; then
				echo "rule-sources: $name ($at) cites $ref: no such file in $SRC" >&2
				bad=1; continue
			fi
			if [ "$(wc -l <"$SRC/$path")" -lt "$line" ]; then
				echo "rule-sources: $name ($at) cites $ref: past the end of the file" >&2
				bad=1; continue
			fi
			[ "$kind" = cpu ] && ncpu=$((ncpu + 1))
			[ "$kind" = cuda ] && ncuda=$((ncuda + 1))
			ncite=$((ncite + 1))
		done
		if [ $ncpu = 0 ] || [ $ncuda = 0 ]; then
			echo "rule-sources: $name ($at) cites ggml-cpu $ncpu and ggml-cuda $ncuda times: both are needed" >&2
			bad=1
		fi
		if [ $list = 1 ]; then
			printf '%s (%s): cpu %d, cuda %d\n' "$name" "$at" $ncpu $ncuda
		fi
	done < <(awk -v file="$(basename "$f")" '
		# A citation belongs to the function whose body holds it, else to the
		# next function below it (its comment).  A rule has its own and those
		# of the static helpers it calls (two levels), and with "see rule_x"
		# those of rule_x.
		function start(name, isrule) {
			cur = name; cites[cur] = pending; pending = ""; inbody = 1
			if (isrule) { order[++n] = cur; at[cur] = file ":" FNR }
			if (palias != "") alias[cur] = palias
			palias = ""
		}
		function gather(f, depth,   k, cs, parts, np) {
			cs = cites[f]
			if (depth < 2 && (f in calls)) {
				np = split(calls[f], parts, " ")
				for (k = 1; k <= np; k++)
					if (parts[k] != f && (parts[k] in cites)) cs = cs " " gather(parts[k], depth + 1)
			}
			return cs
		}
		/^int rule_[a-z0-9_]+\(struct rule_ctx/ { nm = $2; sub(/\(.*/, "", nm); start(nm, 1); next }
		/^static [^=;]*[a-z0-9_]+\([^;]*$/ {
			nm = $0; sub(/\(.*/, "", nm); sub(/.*[^a-z0-9_]/, "", nm); start(nm, 0); next
		}
		inbody && /^}/ { inbody = 0; next }
		{
			s = $0
			while (match(s, /see rule_[a-z0-9_]+/)) {
				m = substr(s, RSTART + 4, RLENGTH - 4)
				if (inbody) alias[cur] = m; else palias = m
				s = substr(s, RSTART + RLENGTH)
			}
			s = $0
			if (inbody)
				while (match(s, /[a-z_][a-z0-9_]*\(/)) {
					calls[cur] = calls[cur] " " substr(s, RSTART, RLENGTH - 1)
					s = substr(s, RSTART + RLENGTH)
				}
			s = $0
			while (match(s, /(cpu|cuda): ggml-[a-z]+\/[A-Za-z0-9_.\/-]+:[0-9]+/)) {
				m = substr(s, RSTART, RLENGTH)
				kind = m; sub(/:.*/, "", kind)
				ref = m; sub(/^[a-z]+: /, "", ref)
				if (inbody) cites[cur] = cites[cur] " " kind "=" ref
				else pending = pending " " kind "=" ref
				s = substr(s, RSTART + RLENGTH)
			}
		}
		END {
			for (i = 1; i <= n; i++) {
				r = order[i]; cs = gather(r, 0)
				if (r in alias) cs = cs " " gather(alias[r], 0)
				printf "%s\t%s\t%s\n", r, at[r], cs
			}
		}
' "$f")
	if [ $list = 1 ]; then
		grep -n -o -E '(cpu|cuda): ggml-[a-z]+/[A-Za-z0-9_./-]+:[0-9]+.*' "$f" | sed "s|^|  $(basename "$f"):|" || true
	fi
done
echo "rule-sources: $nrules rules, $ncite citations of $SRC$( [ $bad = 0 ] && echo ', all resolve' || echo ', FAILED')"
exit $bad
