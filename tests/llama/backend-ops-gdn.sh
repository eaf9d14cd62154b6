#!/usr/bin/env bash
# tests/llama/backend-ops-gdn.sh [MODE...] — test-backend-ops -o GATED_DELTA_NET
# -b PPRPC0 against a rank serving ggml:CPU with pprpc's own GATED_DELTA_NET
# kernels (--ggml-native-gdn MODE; default: on, then auto), doc/ggml.md.
#
# Passes when every case passes (the suite's own bound: NMSE <= 1e-7 against
# ggml-cpu) and the rank's STATS show pprpc's kernels ran: on: chunked and
# serial forms (prefill and decode cases), auto: chunked only, decode cases
# counted as left to ggml ("auto"); in both, the cases pprpc does not
# compute as ggml does (state snapshots K > 1 over several tokens) counted
# as "shape", none as "off".  Then test-llama-archs -a kimi-linear on a rank
# with the setting on: PPRPC0's row OK against the CPU, pprpc's chunked form
# counted.  Prints the suite's counts and the counters.
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

TBO=$LLAMA_BIN/test-backend-ops
require_llama "test-backend-ops GATED_DELTA_NET (pprpc's kernels)" "$TBO"
modes=("$@")
[ ${#modes[@]} = 0 ] && modes=(on auto)

# one counter of device 0 from `pprpcctl stats --json`
counter() {
	python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d[0] if isinstance(d, list) else d
print(r["devices"][0].get(sys.argv[1], 0))' "$1" <"$TMP_ROOT/stats.json"
}

for mode in "${modes[@]}"; do
	# a rank per mode, in a fresh directory (start_rank reads its port file)
	stop_ranks
	RANK_ADDRS=()
	RANK_DIRS=()
	rm -rf "$TMP_ROOT/rank0"
	start_rank --ggml-native-gdn "$mode" || fail "cannot start a rank"
	out=$TMP_ROOT/tbo-gdn-$mode.out
	with_plugin "$TBO" test -o GATED_DELTA_NET -b PPRPC0 >"$out" 2>"$TMP_ROOT/tbo-gdn-$mode.log"
	rc=$?
	"$PPRPCCTL" stats --json --rank "${RANK_ADDRS[0]}" >"$TMP_ROOT/stats.json" || fail "pprpcctl stats failed"
	passed=$(sed 's/\x1b\[[0-9;]*m//g' "$out" | sed -n 's/^ *\([0-9]*\/[0-9]*\) tests passed.*/\1/p')
	chunked=$(counter gdn_chunked)
	serial=$(counter gdn_serial)
	fallback=$(counter gdn_fallback)
	off=$(counter gdn_ggml_off)
	autos=$(counter gdn_ggml_auto)
	shape=$(counter gdn_ggml_shape)
	gate=$(counter gdn_ggml_gate)
	echo "test-backend-ops -o GATED_DELTA_NET, ggml-native-gdn $mode: ${passed:-?} passed (exit $rc);" \
		"pprpc chunked $chunked, serial $serial, fallback $fallback; ggml: off $off, auto $autos, shape $shape, gate $gate"
	[ $rc = 0 ] || { tail -n 40 "$out" >&2; fail "test-backend-ops exited with $rc"; }
	total=${passed#*/}
	[ -n "$passed" ] && [ "${passed%/*}" = "$total" ] && [ "$total" -gt 0 ] || fail "not every case passed: $passed"
	[ "$off" = 0 ] && [ "$gate" = 0 ] && [ "$shape" -gt 0 ] && [ "$chunked" -gt 0 ] || fail "unexpected counters"
	[ $((chunked + serial + fallback + autos + shape)) = "$total" ] || fail "counters do not add up to $total cases"
	case $mode in
	on) [ "$serial" -gt 0 ] && [ "$autos" = 0 ] || fail "on: decode cases must run pprpc's serial form" ;;
	auto) [ "$serial" = 0 ] && [ "$autos" -gt 0 ] || fail "auto: decode cases must stay with ggml" ;;
	esac
done

# A whole Kimi-Linear model (test-llama-archs' random-weight one: KDA layers
# next to MLA ones, 128 tokens) on a rank with the setting on: its logits
# against the CPU's (the suite's NMSE bound, 1e-4) and its KDA prefill on
# pprpc's chunked form.
TLA=$LLAMA_BIN/test-llama-archs
if [ -x "$TLA" ]; then
	stop_ranks
	RANK_ADDRS=()
	RANK_DIRS=()
	rm -rf "$TMP_ROOT/rank0"
	start_rank --ggml-native-gdn on || fail "cannot start a rank"
	out=$TMP_ROOT/archs-kimi.out
	with_plugin "$TLA" -a kimi-linear -s 42 >"$out" 2>"$TMP_ROOT/archs-kimi.log" || { cat "$out" >&2; fail "test-llama-archs -a kimi-linear failed"; }
	"$PPRPCCTL" stats --json --rank "${RANK_ADDRS[0]}" >"$TMP_ROOT/stats.json" || fail "pprpcctl stats failed"
	row=$(sed 's/\x1b\[[0-9;]*m//g' "$out" | awk -F'|' '$3 ~ /pprpc/ {gsub(/^ +| +$/, "", $5); print $5}')
	chunked=$(counter gdn_chunked)
	echo "test-llama-archs -a kimi-linear, ggml-native-gdn on: PPRPC0 ${row:-?} against the CPU; pprpc chunked $chunked"
	case $row in OK*) ;; *) cat "$out" >&2; fail "kimi-linear on PPRPC0: ${row:-no row}" ;; esac
	[ "$chunked" -gt 0 ] || fail "kimi-linear: pprpc's chunked form did not run"
fi
echo "test-backend-ops GATED_DELTA_NET (pprpc's kernels): passed"
