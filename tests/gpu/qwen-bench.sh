#!/usr/bin/env bash
# tests/gpu/qwen-bench.sh OUT [llama-vs-rpc options...] — on the GPU machine,
# after tests/gpu/unpack.sh: the model class of issue 31's table
# (tests/gpu/qwen-model.sh) and llama-vs-rpc on ggml:CUDA0 ranks sharing the GPU with the
# options given.  Report in OUT/bench.txt, JSON in OUT/bench.json, the run's
# logs in OUT/logs.tgz.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1; shift
mkdir -p "$out"
t0=$(date +%s)
model=$(tests/gpu/qwen-model.sh "$out")
echo "qwen-bench: $model ($(stat -c %s "$model") bytes) after $(( $(date +%s) - t0 )) s"
rc=0
bench/llama-vs-rpc/llama-vs-rpc --model "$model" --device cuda0 --llama-bin "$LLAMA_BIN" --pprpc-build build-gpu \
	--workdir /tmp/lvr --json "$out/bench.json" "$@" >"$out/bench.txt" 2>"$out/progress.err" || rc=$?
echo "qwen-bench: llama-vs-rpc exit $rc after $(( $(date +%s) - t0 )) s"
tar -czf "$out/logs.tgz" -C /tmp lvr 2>/dev/null || true
exit $rc
