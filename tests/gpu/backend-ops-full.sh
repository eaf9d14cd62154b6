#!/usr/bin/env bash
# tests/gpu/backend-ops-full.sh [SHARDS] — the whole of llama.cpp's
# test-backend-ops through the plugin, as SHARDS (default 6) runs of
# tests/llama/backend-ops.sh --full side by side, each over a set of ops and
# against a rank of its own (RANK_DEVICE, e.g. ggml:CUDA0: the ranks share
# the GPU).  One run against one rank is bound by that rank's single device
# worker and the client's round trips; shards make the ~20,000 cases fit
# a GPU machine's minutes.  The ops are dealt to shards by case count
# (largest first, to the emptiest shard), from the suite's own case list.
#
# Prints every shard's per-op table and the totals; exits non-zero when any
# shard failed.  Environment as for tests/llama/backend-ops.sh; SHARD_OPS=REGEX
# keeps only the ops whose names match (a smoke test of this script).
set -u
cd "$(dirname "$0")/../.."
shards=${1:-6}
case "$shards" in
''|*[!0-9]*|0) echo "usage: tests/gpu/backend-ops-full.sh [SHARDS] (a whole number from 1; got '$shards')" >&2; exit 2 ;;
esac
LLAMA_BIN=${LLAMA_BIN:-$(. scripts/llama-release.sh && echo "$LLAMA_SRC_DEFAULT")/build-cpu/bin}
tmp=$(mktemp -d /tmp/pprpc-tbo-shards-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

"$LLAMA_BIN/test-backend-ops" support -b CPU >"$tmp/all.txt" 2>&1 || {
	tail -n 20 "$tmp/all.txt" >&2
	echo "FAIL: test-backend-ops support -b CPU failed" >&2
	exit 1
}
sed -n 's/^  \([A-Z_0-9]*\)(.*): .*/\1/p' "$tmp/all.txt" | grep -E "^(${SHARD_OPS:-.*})$" | sort | uniq -c | sort -rn |
	awk -v n="$shards" '
		{ best = 0; for (i = 1; i < n; i++) if (load[i] < load[best]) best = i
		  load[best] += $1; ops[best] = ops[best] (ops[best] == "" ? "" : ",") $2 }
		END { for (i = 0; i < n; i++) if (ops[i] != "") printf "%d %s\n", load[i], ops[i] }' >"$tmp/shards.txt"
echo "test-backend-ops: $(awk '{ n += $1 } END { print n }' "$tmp/shards.txt") cases in $(wc -l <"$tmp/shards.txt") shards (cases per shard: $(cut -d' ' -f1 "$tmp/shards.txt" | paste -sd' '))"

start=$(date +%s)
i=0
while read -r _ ops; do
	TBO_OPS=$ops tests/llama/backend-ops.sh --full >"$tmp/shard$i.txt" 2>&1 &
	pids[i]=$!
	i=$((i + 1))
done <"$tmp/shards.txt"
rc=0
for j in "${!pids[@]}"; do
	wait "${pids[j]}" || rc=1
done
secs=$(( $(date +%s) - start ))

for j in "${!pids[@]}"; do
	echo "==== shard $j: ops $(sed -n "$((j + 1))p" "$tmp/shards.txt" | cut -d' ' -f2)"
	cat "$tmp/shard$j.txt"
	# a shard that skipped (no llama.cpp build, ...) ran nothing: not a pass
	grep -q "^TOTAL: " "$tmp/shard$j.txt" || { echo "FAIL: shard $j ran no case"; rc=1; }
done
cat "$tmp"/shard*.txt | awk '/^TOTAL: / {
		ops += $2; okops += substr($4, 2); ok += $8; bad += $10; un += $12; cpu += $17 }
	END { printf "ALL SHARDS: %d ops (%d with passing cases): %d passed, %d failed, %d not supported by PPRPC0, %d not supported by the CPU reference\n", ops, okops, ok, bad, un, cpu }'
echo "test-backend-ops full in $i shards: ${secs}s, $([ $rc = 0 ] && echo passed || echo FAILED)"
exit $rc
