#!/usr/bin/env bash
# tests/gpu/unpack.sh — on the GPU machine: lay out what a run carries
# (tests/gpu/README.md): the pinned llama.cpp built with ggml-cuda for sm_90
# (gpu-pack/llama-cuda-min.txz: its libraries, test-backend-ops and
# test-llama-archs) and pprpc's build (gpu-pack/pprpc-run.txz: build-gpu/ with
# pprpcd, pprpcctl, the plugin and the tests, plus the llama.cpp tools the
# benchmarks use, which are CPU code linked against the libraries above).
# Prints the environment to source.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(. scripts/llama-release.sh && echo "$LLAMA_SRC_DEFAULT")/build-cuda/bin
if [ ! -f "$bin/libggml-cuda.so" ]; then
	mkdir -p "$bin"
	xz -dc gpu-pack/llama-cuda-min.txz | tar -x -C "$bin"
fi
xz -dc gpu-pack/pprpc-run.txz | tar -x
echo "export LD_LIBRARY_PATH=$PWD/$bin:$PWD/build-gpu/lib BUILD=build-gpu LLAMA_BIN=$bin PPRPCD=build-gpu/bin/pprpcd BINDIR=build-gpu/bin"
