#!/usr/bin/env bash
# tests/gpu/load-bench.sh — on the GPU machine, in one call (a machine goes
# back 30 s after a call): build the pinned llama.cpp with ggml-cuda from
# gpu-pack/llama-src.txz (only what the load benchmark runs), lay out
# gpu-pack/pprpc-run.txz (tests/gpu/README.md), generate the 2.4 GB llama of
# doc/llama-vs-rpc.md and run the load benchmark on ggml:CUDA0 ranks.
#
#   tests/gpu/load-bench.sh OUT [llama-vs-rpc options...]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1; shift
src=$(. scripts/llama-release.sh && echo "$LLAMA_SRC_DEFAULT")
build=$src/build-cuda
export GIT_CEILING_DIRECTORIES=$PWD/$(dirname "$src")
t0=$(date +%s)
if [ ! -f "$build/bin/libggml-cuda.so" ]; then
	mkdir -p "$src"
	xz -dc gpu-pack/llama-src.txz | tar -x -C "$src"
	LLAMA_CUDA=1 LLAMA_NATIVE=OFF JOBS=$(nproc) LLAMA_TARGETS="ggml llama llama-completion llama-bench llama-fit-params ggml-rpc-server" \
		scripts/build-llama.sh "$src" "$build" >"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
fi
echo "load-bench: llama.cpp with ggml-cuda after $(( $(date +%s) - t0 )) s"
xz -dc gpu-pack/pprpc-run.txz | tar -x
# the tools of pprpc-run.txz are the CPU build's: their libraries are the CUDA build's
export LD_LIBRARY_PATH=$PWD/$build/bin:$PWD/build-gpu/lib
model=build/models/llama-2.4g-s1-f16.gguf
mkdir -p build/models
[ -s "$model" ] || LLAMA_DIR=$src bench/model-gen/gen-model --arch llama --preset small --set n_embd=2048 \
	--set n_layer=24 --set n_ff=5632 --seed 1 -o "$model" >/dev/null
echo "load-bench: model after $(( $(date +%s) - t0 )) s ($(stat -c %s "$model") bytes)"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader || true
bench/llama-vs-rpc/llama-vs-rpc --model "$model" --device cuda0 --llama-bin "$build/bin" --pprpc-build build-gpu \
	--workdir "$out/lvr" --json "$out/load.json" "$@" 2>&1 | tee "$out/load.txt"
echo "load-bench: done after $(( $(date +%s) - t0 )) s"
