#!/usr/bin/env bash
# tests/gpu/head-bench.sh — on the GPU machine, in one call: lay out the
# carried gpu-pack/ (tests/gpu/README.md: llama-cuda-min.txz, and a
# pprpc-run.txz built from this tree, whose pprpcd reports the load | run
# split), generate a llama and run llama-vs-rpc with the head's own GPU as
# the first stage (--head: -dev CUDA0/PPRPC0/PPRPC1 against
# CUDA0/RPC0/RPC1), then the same without --head (ranks only).
#
#   tests/gpu/head-bench.sh OUT [llama-vs-rpc options...]
#
# OUT gets head.txt / head.json, nohead.txt / nohead.json and logs.tgz (every
# tool's log: the llama.cpp lines that say whether it pipelined).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1; shift
t0=$(date +%s)
eval "$(tests/gpu/unpack.sh)"
export LD_LIBRARY_PATH BUILD LLAMA_BIN PPRPCD BINDIR
src=$(. scripts/llama-release.sh && echo "$LLAMA_SRC_DEFAULT")
model=build/models/llama-small-s1-f16.gguf
mkdir -p build/models
[ -s "$model" ] || LLAMA_DIR=$src bench/model-gen/gen-model --arch llama --preset small --seed 1 -o "$model" >/dev/null
echo "head-bench: model after $(( $(date +%s) - t0 )) s ($(stat -c %s "$model") bytes)"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader || true
args=(--model "$model" --device cuda0 --llama-bin "$LLAMA_BIN" --pprpc-build build-gpu --cpu-reference off
      --rounds 2 --sweep none --prompts 512,2048 --gen 64 "$@")
rc=0
for run in head nohead; do
	extra=()
	[ "$run" = head ] && extra=(--head)
	bench/llama-vs-rpc/llama-vs-rpc "${args[@]}" "${extra[@]}" --workdir "/tmp/lvr-$run" --json "$out/$run.json" \
		>"$out/$run.txt" 2>"/tmp/lvr-$run.err" || rc=1
	cp "/tmp/lvr-$run.err" "/tmp/lvr-$run/progress.err" 2>/dev/null || true
	echo "head-bench: $run after $(( $(date +%s) - t0 )) s"
	sed -n '1,/^paired/p' "$out/$run.txt"
done
tar -czf "$out/logs.tgz" -C /tmp lvr-head lvr-nohead
exit $rc
