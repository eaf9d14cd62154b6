#!/usr/bin/env bash
# tests/gpu/fusion-check.sh MODEL OUT [DEV] — is ggml-cuda's op fusion what
# parts pprpc's (and ggml-rpc's) logits from local's?  parity-probe.sh showed
# every node's result equal when the graph is computed node by node
# (llama-eval-callback); a whole graph is where ggml-cuda fuses neighbouring
# ops (rms_norm+mul, add chains, top-k MoE, ...), and a layer split hands each
# rank a different graph.  Teacher-forced logits (llama-logits) of local, pprpc
# (two ranks) and ggml-rpc (two ranks), Flash Attention on, with fusion as
# released and with GGML_CUDA_DISABLE_FUSION=1 in every process; each against
# local of the same setting.  Environment as for tests/llama/lib.sh.
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh
[ $# -ge 2 ] && [ -f "$1" ] || { echo "usage: tests/gpu/fusion-check.sh MODEL.gguf OUT [DEV]" >&2; exit 2; }
model=$1 out=$2 dev=${3:-CUDA0}
local_dev=${LOCAL_DEV:-$dev} # none: the CPU alone (a check of this script on a CPU host)
mkdir -p "$out"
RANK_DEVICE=ggml:$dev
LL=${LLAMA_LOGITS:-$BUILD/bin/llama-logits}
RS=$LLAMA_BIN/ggml-rpc-server
prompt="the quick brown fox jumps over the lazy dog, then it runs far away into the green hills and"
lg=(-m "$model" -p "$prompt" -n 0 -c 1024 -ngl 99 --no-warmup -fa on -lv 2)
for fusion in released off; do
	if [ $fusion = off ]; then export GGML_CUDA_DISABLE_FUSION=1; else unset GGML_CUDA_DISABLE_FUSION; fi
	stop_ranks
	start_rank || fail "cannot start rank"
	start_rank || fail "cannot start rank"
	n=${#RANK_ADDRS[@]}
	a0=${RANK_ADDRS[$((n - 2))]} a1=${RANK_ADDRS[$((n - 1))]}
	start_rpc_ranks 2 "$dev" "$out/rpc-$fusion-"
	"$LL" "${lg[@]}" -dev "$local_dev" --logits-out "$out/local-$fusion.bin" >"$out/local-$fusion.log" 2>&1 || echo "local ($fusion) failed"
	GGML_BACKEND_PATH=$(realpath "$PLUGIN") PPRPC_RANKS=$a0,$a1 "$LL" "${lg[@]}" -dev PPRPC0,PPRPC1 -ts 1,1 \
		--logits-out "$out/pprpc-$fusion.bin" >"$out/pprpc-$fusion.log" 2>&1 || echo "pprpc ($fusion) failed"
	"$LL" "${lg[@]}" --rpc "$RPC_ADDRS" -dev RPC0,RPC1 -ts 1,1 \
		--logits-out "$out/rpc-$fusion.bin" >"$out/rpc-$fusion.log" 2>&1 || echo "rpc ($fusion) failed"
	stop_rpc_ranks
done
unset GGML_CUDA_DISABLE_FUSION
python3 - "$out" <<'PY'
import os, sys
sys.path.insert(0, "bench/llama-vs-rpc")
import logits
out = sys.argv[1]
print("teacher-forced logits (prompt positions), FA on, against local with the same fusion setting:")
for side, ref in (("pprpc-released", "local-released"), ("rpc-released", "local-released"),
                  ("pprpc-off", "local-off"), ("rpc-off", "local-off"), ("local-off", "local-released")):
    try:
        r = logits.compare(os.path.join(out, side + ".bin"), os.path.join(out, ref + ".bin"))
        print("  %-15s vs %-15s NMSE %-10.3g top-1 %d/%d  first divergence %s  max |diff| %.3g%s" % (
            side, ref, r["nmse"], r["top1_agree"], r["positions"], r["first_divergence"], r["max_abs"],
            "  bit-identical" if r["bit_identical"] else ""))
    except Exception as e:
        print("  %-15s vs %-15s %s" % (side, ref, e))
PY
rm -f "$out"/*.bin
