#!/usr/bin/env bash
# tests/llama/archs.sh [--full] — llama.cpp's own test-llama-archs through
# the plugin with two pprpcd ranks (ggml:CPU each).
#
# test-llama-archs builds a random-weight model of each architecture (dense
# and MoE variants), runs 128 tokens on every device configuration it finds
# and compares the logits with the CPU's (NMSE <= 1e-4), then saves and
# reloads the model from the device and requires identical logits.  With
# the plugin it finds: the CPU, PPRPC0 alone, PPRPC1 alone, and "Meta" —
# every weight split across PPRPC0 and PPRPC1 (tensor parallelism), whose
# partial results meet through cross-rank copies and ggml's generic
# all-reduce (cpy_tensor_async = SEND/RECV between the ranks, then ADD).
#
# Each architecture runs in its own process (a crash in one does not hide
# the others).  `make test` runs a fixed list of architectures; --full runs
# every architecture the pinned llama.cpp knows (make test-llama-full).
# Passes when every configuration passes for every architecture whose CPU
# row passes; rows test-llama-archs itself skips are listed with its reason.
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

mode=subset
[ "${1:-}" = --full ] && mode=full
TLA=$LLAMA_BIN/test-llama-archs
require_llama "test-llama-archs ($mode)" "$TLA"
SEED=${PPRPC_ARCHS_SEED:-42}

if [ -n "${PPRPC_ARCHS:-}" ]; then
	archs=$PPRPC_ARCHS # by hand: PPRPC_ARCHS="llama dream" tests/llama/archs.sh
elif [ $mode = subset ]; then
	# dense + MoE where the architecture has both; qwen3moe/qwen35moe are
	# the MoE-only counterparts of qwen3/qwen35
	# dream and t5: casts (a CPY that names itself); t5: encoder + decoder
	archs="llama qwen3 qwen3moe qwen35 qwen35moe qwen3next kimi-linear kimi-k3 deepseek2 gemma3 mamba2 granitehybrid dream t5"
else
	# every architecture: the table of a CPU-only run names them
	"$TLA" -s "$SEED" >"$TMP_ROOT/cpu-only.txt" 2>&1
	archs=$(sed 's/\x1b\[[0-9;]*m//g' "$TMP_ROOT/cpu-only.txt" | awk -F'|' '/^\|/ && $2 !~ /Model arch|^-+$/ {gsub(/ /, "", $2); if ($2 != "" && $2 !~ /^-+$/ && !s[$2]++) print $2}')
fi

start_rank || fail "cannot start rank 0"
start_rank || fail "cannot start rank 1"
echo "test-llama-archs ($mode): ranks ${RANK_ADDRS[*]}, seed $SEED"

has_summary=0
grep -aq 'Summary: ' "$TLA" && has_summary=1
rows=$TMP_ROOT/rows.txt
: >"$rows"
crashed=""
start=$(date +%s)
for a in $archs; do
	out=$TMP_ROOT/arch-$a.out
	with_plugin "$TLA" -a "$a" -s "$SEED" >"$out" 2>"$TMP_ROOT/arch-$a.log"
	rc=$?
	sed 's/\x1b\[[0-9;]*m//g' "$out" | awk -F'|' -v a="$a" '
		/^\|/ && $2 !~ /Model arch/ && $2 !~ /^-+$/ {
			dev = $3; gsub(/^ +| +$/, "", dev)
			if (dev ~ /^pprpc /) { split(dev, w, " "); dev = "pprpc:" w[2] }
			else if (dev != "Meta") dev = "CPU"
			cfg = $4; gsub(/ /, "", cfg)
			st = $5; gsub(/^ +| +$/, "", st)
			rt = $6; gsub(/ /, "", rt)
			print a "\t" cfg "\t" dev "\t" st "\t" rt
		}' >>"$rows"
	# a run that ended cleanly printed its summary line last: without it a
	# row may be cut whatever the exit status says
	# (v0.5.0 on; v0.4.0 prints none)
	why=""
	if [ "$has_summary" = 1 ] && ! grep -q '^Summary: ' "$out"; then
		why="no summary line"
	elif [ $rc != 0 ] && ! sed 's/\x1b\[[0-9;]*m//g' "$out" | grep -q "FAIL"; then
		why="no FAIL row"
	fi
	if [ -n "$why" ]; then
		crashed="$crashed $a(exit $rc, $why)"
		echo "  $a: exit $rc, $why; last lines of its stderr:" >&2
		grep -v '^#\|^\[\|^Using host\|^[0-9]*\s*\.\./' "$TMP_ROOT/arch-$a.log" | tail -n 8 | sed 's/^/    /' >&2
	fi
done
secs=$(( $(date +%s) - start ))

# per architecture and variant: the CPU row and every device configuration
echo
awk -F'\t' '
	{ key = $1 " " $2; if (!(key in seen)) { seen[key] = 1; order[++n] = key }
	  st = $4; sub(/ .*/, "", st)
	  res[key] = res[key] sprintf("  %s=%s%s", $3, st, ($5 == "FAIL" ? "(roundtrip FAIL)" : ""))
	  cfg[$3] = 1
	  if ($3 == "CPU") cpu[key] = st
	  if (st == "OK" && $5 != "FAIL") ok[$3]++
	  else if (st == "SKIP") skip[$3]++
	  else { bad[$3]++; fails = fails "\n  " key " on " $3 ": " $4 " roundtrip " $5 } }
	END {
		for (i = 1; i <= n; i++) printf "%-24s%s\n", order[i], res[order[i]]
		printf "\nper configuration (OK / FAIL / SKIP):\n"
		for (d in cfg) printf "  %-14s %4d %4d %4d\n", d, ok[d], bad[d], skip[d] | "sort"
		close("sort")
		if (fails != "") printf "failures:%s\n", fails
	}' "$rows" | tee "$TMP_ROOT/summary.txt"

# skipped rows: test-llama-archs skips an architecture it cannot build a
# test model for (CPU row SKIP too), and Meta where the architecture does
# not support tensor split (llm_arch_supports_sm_tensor)
cpu_skip=$(awk -F'\t' '$3 == "CPU" && $4 ~ /^SKIP/ {printf " %s(%s)", $1, $2}' "$rows")
meta_skip=$(awk -F'\t' '$3 == "CPU" && $4 ~ /^OK/ {ok[$1 " " $2] = 1}
	$3 == "Meta" && $4 ~ /^SKIP/ && ok[$1 " " $2] {printf " %s(%s)", $1, $2}' "$rows")
echo "skipped by test-llama-archs itself:"
echo "  $(echo $cpu_skip | wc -w) variants in every configuration, the CPU's included (the suite does not test the architecture: arch_supported() is false):$cpu_skip"
echo "  $(echo $meta_skip | wc -w) Meta rows of variants that pass elsewhere (the architecture does not support tensor split):$meta_skip"
echo "test-llama-archs ($mode): $(echo $archs | wc -w) architectures in ${secs}s"

# a row is OK, SKIP or failed: anything else (an empty or cut status) fails too
bad=$(awk -F'\t' '$4 !~ /^(OK|SKIP)/ || $5 == "FAIL"' "$rows" | wc -l)
awk -F'\t' '$4 !~ /^(OK|SKIP|FAIL)/' "$rows" | sed 's/^/  a row without a status: /' >&2
pprpc_rows=$(awk -F'\t' '$3 ~ /^pprpc:/ && $4 ~ /^OK/' "$rows" | wc -l)
[ -z "$crashed" ] || fail "test-llama-archs died for:$crashed"
[ "$bad" = 0 ] || fail "$bad rows failed"
[ "$pprpc_rows" -gt 0 ] || fail "no PPRPC configuration ran"
echo "test-llama-archs ($mode): passed"
