#!/usr/bin/env bash
# tests/gpu/parity-probe.sh MODEL OUT [DEV] — where the greedy tokens of a
# model part: llama-completion --temp 0 -n 40 on the same prompt, six ways:
# local / pprpc (two pprpcd ranks serving ggml:DEV) / ggml-rpc (two
# ggml-rpc-server ranks on DEV), each with Flash Attention on and off.  For
# each: the first 160 characters, how many characters it shares with
# local (FA on), and what llama.cpp and the ranks said about where the ops
# went (ops llama.cpp moved to the CPU, the plugin's refusals at debug
# level, the ranks' request errors).  Logs are kept in OUT.
# Environment as for tests/llama/lib.sh (BUILD, LLAMA_BIN, PPRPCD, PLUGIN).
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh
if [ $# -lt 2 ] || [ ! -f "$1" ]; then
	echo "usage: tests/gpu/parity-probe.sh MODEL.gguf OUT [DEV]" >&2
	exit 2
fi
model=$1 out=$2 dev=${3:-CUDA0}
mkdir -p "$out"
LC=$LLAMA_BIN/llama-completion
RS=$LLAMA_BIN/ggml-rpc-server
require_llama "parity-probe" "$LC" "$RS"
RANK_DEVICE=ggml:$dev

prompt="the quick brown fox jumps over the lazy dog, then it runs far away into the green hills and"
gen=(-m "$model" -p "$prompt" -n 40 --temp 0 --ignore-eos -c 1024 -no-cnv --simple-io
	--no-display-prompt --no-warmup -ngl 99 -lv 4)

start_rank --log-level debug || fail "cannot start rank 0"
start_rank --log-level debug || fail "cannot start rank 1"
rpc_ports=()
rpc_pids=()
for i in 0 1; do
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$RS" -H 127.0.0.1 -p "$port" -d "$dev" >"$out/rpc-rank$i.log" 2>&1 &
	rpc_pids+=($!)
	rpc_ports+=("$port")
done
sleep 3

run() { # NAME FA ARGS...
	local name=$1 fa=$2; shift 2
	local t0=$(date +%s%N)
	"$@" "${gen[@]}" -fa "$fa" >"$out/$name.txt" 2>"$out/$name.log"
	local rc=$?
	printf '%-14s exit %d, %.1f s\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))e-3"
}
for fa in on off; do
	run local-fa$fa $fa "$LC" -dev "$dev"
	for i in 0 1; do "$PPRPCCTL" stats --rank "${RANK_ADDRS[$i]}" >"$out/pprpc-fa$fa-stats$i.before" 2>&1; done
	run pprpc-fa$fa $fa with_plugin "$LC" -dev PPRPC0,PPRPC1 -ts 1,1
	for i in 0 1; do "$PPRPCCTL" stats --rank "${RANK_ADDRS[$i]}" >"$out/pprpc-fa$fa-stats$i.after" 2>&1; done
	run rpc-fa$fa $fa "$LC" --rpc "127.0.0.1:${rpc_ports[0]},127.0.0.1:${rpc_ports[1]}" -dev RPC0,RPC1 -ts 1,1
done
kill "${rpc_pids[@]}" 2>/dev/null
wait "${rpc_pids[@]}" 2>/dev/null

echo
echo "text (first 160 characters) and characters in common with local-faon:"
ref=$(cat "$out/local-faon.txt")
for n in local-faon local-faoff pprpc-faon pprpc-faoff rpc-faon rpc-faoff; do
	t=$(cat "$out/$n.txt")
	common=$(python3 -c 'import os, sys; print(len(os.path.commonprefix([sys.argv[1], sys.argv[2]])))' "$ref" "$t")
	printf '%-12s %4s  %s\n' "$n" "$common" "$(printf '%s' "$t" | head -c 160 | tr '\n' ' ')"
done
echo
for n in local-faon local-faoff pprpc-faon pprpc-faoff rpc-faon rpc-faoff; do
	echo "== $n: llama.cpp's placement and attention"
	grep -E "flash_attn|Flash Attention|usually due to missing support|graph splits|pipeline parallelism" "$out/$n.log" |
		sed 's/^[0-9.]* [A-Z] //' | sort | uniq -c | head -n 12
	grep -E "pprpc: .*(not supported|not offered|refused)" "$out/$n.log" | sed 's/^[0-9.]* [A-Z] //' |
		sort | uniq -c | sort -rn | head -n 12
done
echo
echo "== the ranks' request errors and what their logs say of refusals"
for i in 0 1; do
	grep -iE "request_errors|request errors" "$out"/pprpc-fa*-stats$i.* | head -n 8
	grep -iE "refus|invalid|error|warn" "${RANK_DIRS[$i]}/log" | sed 's/^[^ ]* //' | sort | uniq -c | sort -rn | head -n 12
	cp "${RANK_DIRS[$i]}/log" "$out/pprpc-rank$i.log"
done
