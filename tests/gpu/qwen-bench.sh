#!/usr/bin/env bash
# tests/gpu/qwen-bench.sh OUT [llama-vs-rpc options...] — on the GPU machine,
# after tests/gpu/unpack.sh: the model class of issue 31's table (a qwen3 of
# 3.75 B parameters, Qwen3-8B's widths with 13 layers, random weights, seed 1,
# quantized to Q4_K_M: `make-models --arch qwen3 --preset h200 --set n_layer=13
# --types q4_k`) and llama-vs-rpc on ggml:CUDA0 ranks sharing the GPU with the
# options given.  Report in OUT/bench.txt, JSON in OUT/bench.json, the run's
# logs in OUT/logs.tgz.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1; shift
mkdir -p "$out"
t0=$(date +%s)
dir=/tmp/models
mkdir -p "$dir"
[ -s "$out/make-models.json" ] || bench/model-gen/make-models --arch qwen3 --preset h200 --set n_layer=13 --seed 1 --types q4_k --no-check \
	-o "$dir" >"$out/make-models.json" 2>"$out/make-models.err" || { tail "$out/make-models.err"; exit 1; }
model=$(python3 -c 'import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j.get("type") == "q4_k":
        print(j["path"])' "$out/make-models.json")
[ -n "$model" ] || { echo "qwen-bench: make-models named no Q4_K_M file: $(cat "$out/make-models.json")"; exit 1; }
echo "qwen-bench: $model ($(stat -c %s "$model") bytes) after $(( $(date +%s) - t0 )) s"
rc=0
bench/llama-vs-rpc/llama-vs-rpc --model "$model" --device cuda0 --llama-bin "$LLAMA_BIN" --pprpc-build build-gpu \
	--workdir /tmp/lvr --json "$out/bench.json" "$@" >"$out/bench.txt" 2>"$out/progress.err" || rc=$?
echo "qwen-bench: llama-vs-rpc exit $rc after $(( $(date +%s) - t0 )) s"
tar -czf "$out/logs.tgz" -C /tmp lvr 2>/dev/null || true
exit $rc
