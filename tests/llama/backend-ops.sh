#!/usr/bin/env bash
# tests/llama/backend-ops.sh [--full] — llama.cpp's own test-backend-ops
# (mode test: every case computed on PPRPC0 and on ggml's CPU reference,
# outputs compared by the suite's own error bounds) through the plugin,
# against one pprpcd rank serving ggml:CPU.
#
# The suite has ~20,000 cases; on a 2-core machine the whole run takes
# hours, so `make test` runs a fixed subset that covers every op: for each
# op, its first two cases in the suite's order plus the first case of every
# type value it has not seen yet (type=, type_a=, type_src=, ...), selected
# from the case list of the pinned llama.cpp (deterministic).  --full runs
# every case (`make test-llama-full`).
#
# Passes when test-backend-ops passes (every case the plugin reports as
# supported matches the CPU) and the plugin logged no error.  Prints the
# counts per op: passed, failed, not supported by PPRPC0 (with the rank's
# reasons, from the plugin's debug log), not supported by the CPU reference.
# TBO_OPS=OP,OP,... restricts --full to those ops (tests/gpu/backend-ops-full.sh
# runs the whole suite as shards of ops, each against a rank of its own).
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

mode=subset
[ "${1:-}" = --full ] && mode=full
TBO=$LLAMA_BIN/test-backend-ops
require_llama "test-backend-ops ($mode)" "$TBO"

start_rank || fail "cannot start a rank"

# -j: cases in parallel (the CPU reference of one overlaps the rank's work
# on another): 1.42x on 2 cores (MUL_MAT,SOFT_MAX: 50.5 s -> 35.5 s, the
# same 1515 cases passed)
args=(test -b PPRPC0 -j "${TBO_JOBS:-4}")
if [ $mode = subset ]; then
	# every case string of the suite, as the CPU backend lists them (no rank)
	"$TBO" support -b CPU >"$TMP_ROOT/all.txt" 2>&1 || fail "test-backend-ops support -b CPU failed"
	sed -n 's/^  \([A-Z_0-9]*(.*)\): .*/\1/p' "$TMP_ROOT/all.txt" | awk '
		{
			op = substr($0, 1, index($0, "(") - 1)
			vars = substr($0, index($0, "(") + 1)
			sub(/\)$/, "", vars)
			pick = (++seen[op] <= 2)
			n = split(vars, kv, ",")
			for (i = 1; i <= n; i++) {
				if (kv[i] ~ /^type[A-Za-z0-9_]*=/ && !((op, kv[i]) in cov)) {
					cov[op, kv[i]] = 1
					pick = 1
				}
			}
			if (pick && !($0 in chosen)) {
				chosen[$0] = 1
				print
			}
		}' >"$TMP_ROOT/subset.txt"
	n_all=$(sed -n 's/^  \([A-Z_0-9]*(.*)\): .*/\1/p' "$TMP_ROOT/all.txt" | wc -l)
	n_sub=$(wc -l <"$TMP_ROOT/subset.txt")
	n_ops=$(cut -d'(' -f1 "$TMP_ROOT/subset.txt" | sort -u | wc -l)
	echo "test-backend-ops subset: $n_sub of $n_all cases, covering all $n_ops ops (list: $TMP_ROOT/subset.txt)"
	args+=(-o "$(paste -sd, "$TMP_ROOT/subset.txt")")
elif [ -n "${TBO_OPS:-}" ]; then
	args+=(-o "$TBO_OPS")
	mode="full, ops $TBO_OPS"
fi

out=$TMP_ROOT/test-backend-ops.out
log=$TMP_ROOT/test-backend-ops.log
start=$(date +%s)
with_plugin "$TBO" "${args[@]}" >"$out" 2>"$log"
rc=$?
secs=$(( $(date +%s) - start ))

grep -q "^Backend [0-9]*/[0-9]*: PPRPC0" "$out" || { cat "$out" "$log" >&2; fail "the plugin did not register PPRPC0"; }

# per op: OK / FAIL / not supported by PPRPC0 / not supported by the CPU reference
sed 's/\x1b\[[0-9;]*m//g' "$out" | awk '
	/^  [A-Z_0-9]*\(.*\): / {
		op = substr($1, 1, index($1, "(") - 1)
		ops[op] = 1
		sub(/[ \t]+$/, "")
		if ($0 ~ /: OK$/) ok[op]++
		else if ($0 ~ /FAIL$/) { bad[op]++; failed = failed "\n    " substr($0, 3) }
		else if ($0 ~ /not supported \[.*PPRPC0.*\]$/) unsup[op]++
		else if ($0 ~ /not supported \[/) cpu[op]++
		else { bad[op]++; failed = failed "\n    " substr($0, 3) " (no verdict)" }
	}
	END {
		printf "%-26s %6s %6s %11s %8s\n", "op", "passed", "failed", "unsupported", "cpu-only"
		for (op in ops) {
			printf "%-26s %6d %6d %11d %8d\n", op, ok[op], bad[op], unsup[op], cpu[op] | "sort"
			tok += ok[op]; tbad += bad[op]; tun += unsup[op]; tcpu += cpu[op]; nops++
			if (ok[op]) okops++
		}
		close("sort")
		printf "TOTAL: %d ops (%d with passing cases): %d passed, %d failed, %d not supported by PPRPC0, %d not supported by the CPU reference\n", nops, okops, tok, tbad, tun, tcpu
		if (tbad) printf "failed cases:%s\n", failed
	}' | tee "$TMP_ROOT/summary.txt"

# why PPRPC0 does not take the unsupported ones: the rank's own reasons
if grep -q "not supported:" "$log"; then
	echo "reasons given by the rank (first per op):"
	sed -n 's/^pprpc: PPRPC0: \([A-Z_0-9]*\) not supported: \(.*\)/\1: \2/p' "$log" | awk -F': ' '!s[$1]++' |
		sort | sed 's/^/    /' | head -n 120
fi

errors=$(grep -c "^pprpc: .*\(failed\|fatal\)" "$log")
tail -n 3 "$out" | sed 's/\x1b\[[0-9;]*m//g'
echo "test-backend-ops ($mode): exit $rc, ${secs}s, plugin errors logged: $errors"
"$PPRPCCTL" stats --rank "${RANK_ADDRS[0]}" 2>/dev/null | grep -i "graph" | head -n 3

if [ "$errors" != 0 ]; then
	grep "^pprpc: .*\(failed\|fatal\)" "$log" | head -n 20 >&2
	fail "the plugin logged errors"
fi
[ $rc = 0 ] || { tail -n 40 "$log" >&2; fail "test-backend-ops exited with $rc"; }
grep -q "^TOTAL: .* 0 failed" "$TMP_ROOT/summary.txt" || fail "failed cases"
echo "test-backend-ops ($mode): passed"
