#!/usr/bin/env bash
# bench/llama-vs-rpc/decode-probe.sh MODEL [DEV] [TOKENS] — where one rank's
# decode time goes: llama-bench -p 0 -n TOKENS (3 repetitions) on the same
# model, all layers on one device, five ways:
#   local            llama.cpp on DEV in this process
#   local-nographs   the same with GGML_CUDA_DISABLE_GRAPHS=1
#   pprpc            one pprpcd rank serving ggml:DEV, through the plugin
#   pprpc-nographs   the same, the rank started with GGML_CUDA_DISABLE_GRAPHS=1
#   rpc              one ggml-rpc-server rank serving DEV (-d DEV)
# and what the ranks' ggml said about CUDA graphs (their logs), and the pprpc
# rank's own account of its time (pprpcctl stats: exec time per command).  DEV is a
# ggml device name: CUDA0 (default) or CPU.  Environment as for
# tests/llama/lib.sh (BUILD, LLAMA_BIN, PPRPCD, PLUGIN).
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh
if [ $# -lt 1 ] || [ ! -f "$1" ]; then
	echo "usage: bench/llama-vs-rpc/decode-probe.sh MODEL.gguf [DEV] [TOKENS]${1:+ ($1: no such file)}" >&2
	exit 2
fi
model=$1
dev=${2:-CUDA0}
n=${3:-128}
case "$n" in
''|*[!0-9]*|0) echo "decode-probe: TOKENS must be a whole number from 1 (got '$n')" >&2; exit 2 ;;
esac
LB=$LLAMA_BIN/llama-bench
RS=$LLAMA_BIN/ggml-rpc-server
require_llama "decode-probe" "$LB" "$RS"

bench() {
	local name=$1; shift
	local out=$TMP_ROOT/$name.json
	if "$@" -m "$model" -p 0 -n "$n" -r 3 -ngl 99 -o json >"$out" 2>"$TMP_ROOT/$name.err"; then
		python3 - "$name" "$out" <<'PY'
import json, sys
t = json.load(open(sys.argv[2]))[0]
s = sorted(x / 1e9 for x in t["samples_ns"])
med = s[len(s) // 2]
print("%-16s %9.2f tok/s  %7.3f ms/token  (samples %s s)" % (sys.argv[1], t["n_gen"] / med, med * 1e3 / t["n_gen"],
      " ".join("%.4f" % x for x in s)))
PY
	else
		echo "$name: llama-bench failed:"; tail -n 5 "$TMP_ROOT/$name.err"
	fi
}

# llama-bench names the CPU alone "none" (no offload device)
ldev=$dev; [ "$dev" = CPU ] && ldev=none
bench local "$LB" -dev "$ldev"
GGML_CUDA_DISABLE_GRAPHS=1 bench local-nographs "$LB" -dev "$ldev"

RANK_DEVICE=ggml:$dev
start_rank || fail "cannot start a rank"
bench pprpc with_plugin "$LB" -dev PPRPC0
# where the rank's time went (its queue's exec time per command type)
"$PPRPCCTL" stats --rank "${RANK_ADDRS[0]}" | sed -n '/exec time/,/^[a-z]/p' | grep -v "^[a-z]"
stop_ranks
RANK_ADDRS=()
GGML_CUDA_DISABLE_GRAPHS=1 start_rank || fail "cannot start a rank"
bench pprpc-nographs with_plugin "$LB" -dev PPRPC0
stop_ranks

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$RS" -H 127.0.0.1 -p "$port" -d "$dev" >"$TMP_ROOT/rpc.log" 2>&1 &
RANK_PIDS+=($!)
for _ in $(seq 1 500); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	sleep 0.02
done
bench rpc "$LB" --rpc "127.0.0.1:$port" -dev RPC0
stop_ranks

for d in "${RANK_DIRS[@]}"; do
	echo "$d: $(grep -ci "cuda graph" "$d/log") lines on CUDA graphs; $(grep -i "cuda graph" "$d/log" | sort | uniq -c | sort -rn | head -n 4 | tr '\n' ';')"
done
