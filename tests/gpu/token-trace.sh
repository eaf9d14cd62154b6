#!/usr/bin/env bash
# tests/gpu/token-trace.sh OUT [CONFIG...] — on the GPU machine, after
# tests/gpu/unpack.sh: where a decoded token's time goes on ggml:CUDA0 ranks
# sharing the GPU, on issue 31's model class (tests/gpu/qwen-model.sh).
#
# First local (-dev CUDA0): llama-completion's own decode figure.  Then, for
# each CONFIG (default: 2), NAME=RANKS[:PPRPCD FLAGS...] e.g.
#   2  4  ipc2=2:--direct-min=0  nograph2=2:env=GGML_CUDA_DISABLE_GRAPHS=1
#   cold2=2:--wake-ahead=0,cenv=PPRPC_SPIN=0   (env=: the ranks', cenv=: the client's)
# RANKS ranks with trace-file on each, llama-completion with PPRPC_TRACE,
# greedy, the same prompt and length, and bench/llama-vs-rpc/token-trace.py
# on decoded tokens 20 and 40.  OUT/NAME.txt: the decode figure and both
# tokens' hop tables; OUT/summary.txt: one line per configuration; the
# rank logs in OUT/NAME-logs/.  On this host: TRACE_MODEL=FILE LOCAL_DEV=none
# TRACE_RANK_DEVICE=ggml:CPU LLAMA_BIN=... tests/gpu/token-trace.sh OUT 2.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1; shift
[ $# -gt 0 ] || set -- 2
mkdir -p "$out"
model=${TRACE_MODEL:-$(tests/gpu/qwen-model.sh "$out")}
LC=$LLAMA_BIN/llama-completion
prompt="Once upon a time, in a land of rivers and mountains, there lived a"
gen=(-m "$model" -p "$prompt" -n 64 --temp 0 --ignore-eos -c 1024 -no-cnv --simple-io --no-display-prompt -ngl 99)

# llama-completion's decode line: "eval time = X ms / N runs (Y ms per token, Z tokens per second)"
eval_line() { grep -E "(llama_perf_context_print|common_perf_print): +eval time" "$1" | sed 's/.*eval time = *//'; }

summary=$out/summary.txt
: >"$summary"
"$LC" "${gen[@]}" -dev "${LOCAL_DEV:-CUDA0}" >"$out/local.out" 2>"$out/local.err" || { tail "$out/local.err"; exit 1; }
echo "local        $(eval_line "$out/local.err")  text $(md5sum <"$out/local.out" | cut -c1-16)" | tee -a "$summary"

for cfg in "$@"; do
	name=${cfg%%=*}
	[ "$name" = "$cfg" ] && name=r$cfg
	spec=${cfg#*=}
	nranks=${spec%%:*}
	flags=()
	envs=()
	cenvs=()
	if [ "$spec" != "$nranks" ]; then
		IFS=, read -r -a words <<<"${spec#*:}"
		for w in "${words[@]}"; do
			case $w in
			env=*) envs+=("${w#env=}") ;;
			cenv=*) cenvs+=("${w#cenv=}") ;;
			*) flags+=("$w") ;;
			esac
		done
	fi
	(
		. tests/llama/lib.sh
		RANK_DEVICE=${TRACE_RANK_DEVICE:-ggml:CUDA0}
		T=$out/$name-logs
		mkdir -p "$T"
		# the ranks' environment (GGML_CUDA_DISABLE_GRAPHS=1, ...) through a wrapper
		wrap=$TMP_ROOT/pprpcd-env
		printf '#!/bin/sh\nexec env %s "%s" "$@"\n' "${envs[*]:-}" "$(realpath "$PPRPCD")" >"$wrap"
		chmod +x "$wrap"
		PPRPCD=$wrap
		devs=()
		for i in $(seq 0 $((nranks - 1))); do
			start_rank --trace-file "$T/rank$i.trace" "${flags[@]}" || fail "cannot start rank $i"
			devs+=("PPRPC$i")
		done
		ts=$(printf '1,%.0s' $(seq 1 "$nranks")); ts=${ts%,}
		dl=$(IFS=,; echo "${devs[*]}")
		PPRPC_TRACE=$T/client with_plugin env "${cenvs[@]}" "$LC" "${gen[@]}" -dev "$dl" -ts "$ts" >"$out/$name.out" 2>"$T/lc.err" ||
			{ tail -n 30 "$T/lc.err" >&2; fail "llama-completion over $nranks ranks failed"; }
		for i in $(seq 0 $((nranks - 1))); do
			"$PPRPCCTL" stats --rank "${RANK_ADDRS[$i]}" >"$T/stats$i.txt" 2>&1 || true
		done
		stop_ranks
		for i in $(seq 0 $((nranks - 1))); do cp "${RANK_DIRS[$i]}/log" "$T/rank$i.log"; done
		{
			echo "# $name: $nranks ranks, pprpcd ${flags[*]:-} ${envs[*]:-}, client ${cenvs[*]:-}"
			grep -h "wake-ahead:" "$T"/rank*.log || true
			echo "eval: $(eval_line "$T/lc.err")"
			echo "CUDA graph warmups per rank: $(for i in $(seq 0 $((nranks - 1))); do grep -c 'CUDA graph warmup complete' "$T/rank$i.log" || true; done | paste -sd' ')"
			for tok in 20 40; do
				python3 bench/llama-vs-rpc/token-trace.py --token "$tok" "$T"/rank*.trace "$T"/client.* || echo "token-trace failed"
			done
		} >"$out/$name.txt" 2>&1
		echo "$(printf '%-12s' "$name") $(eval_line "$T/lc.err")  text $(md5sum <"$out/$name.out" | cut -c1-16)" >>"$summary"
	) || echo "$name: failed" >>"$summary"
	tail -n 1 "$summary"
done
