#!/usr/bin/env bash
# tests/gpu/pack.sh — here: build what a GPU run carries (tests/gpu/README.md)
# into gpu-pack/ (git-ignored through .git/info/exclude):
#   gpu-pack/pprpc-run.txz  build-gpu/ (pprpcd, pprpcctl, the plugin, llama-logits,
#                           the GPU tests; libuv, protobuf-c, cmocka, OpenBLAS linked
#                           statically: the GPU machine has none of them; the tests
#                           with PACK_TESTS=1) and the
#                           CPU build's llama.cpp tools the benchmarks run, laid out
#                           where unpack.sh's environment finds them
#   gpu-pack/llama-src.txz  the pinned llama.cpp's source, patched, without models/ and
#                           docs/, for tests/gpu/llama-cuda.sh on the machine
# A llama-cuda-min.txz brought back from a run (tests/gpu/llama-cuda.sh TARBALL
# $OUT/pack writes it as pieces) is kept: cat the pieces into gpu-pack/llama-cuda-min.txz.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/llama-release.sh
src=$LLAMA_SRC_DEFAULT
cpu=$src/build-cpu/bin
[ -x "$cpu/llama-completion" ] || { echo "pack: no $cpu/llama-completion: run make llama first" >&2; exit 1; }
mkdir -p gpu-pack
make -s -j"$(nproc)" BUILD=build-gpu STATIC=1 CUDA_ARCHS=90 all build-gpu/tests/test_p2p build-gpu/tests/test_async \
	build-gpu/tests/test_ggml build-gpu/tests/gguf-add-vocab build-gpu/bin/llama-logits >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build-gpu/bin" "$tmp/build-gpu/lib" "$tmp/build-gpu/tests" "$tmp/$src/build-cuda/bin" "$tmp/$src/gguf-py/gguf"
cp build-gpu/bin/pprpcd build-gpu/bin/pprpcctl build-gpu/bin/llama-logits "$tmp/build-gpu/bin/"
cp build-gpu/lib/libggml-pprpc.so "$tmp/build-gpu/lib/"
# the plugin is a shared object: it links protobuf-c dynamically; the tests cmocka
for l in libprotobuf-c.so.1 libcmocka.so.0; do
	cp -L "$(ldconfig -p | awk -v l="$l" '$1 == l && /x86-64/ {print $NF; exit}')" "$tmp/build-gpu/lib/$l"
done
# the GPU tests only with PACK_TESTS=1: test_p2p and test_async are 30 MB each
# (CUDA linked statically), and the carry limit is 64 MiB with llama-cuda-min.txz
cp build-gpu/tests/gguf-add-vocab "$tmp/build-gpu/tests/"
[ "${PACK_TESTS:-0}" = 1 ] && cp build-gpu/tests/test_p2p build-gpu/tests/test_async build-gpu/tests/test_ggml "$tmp/build-gpu/tests/"
# CPU code linked against libllama/libggml: on the machine the CUDA build's libraries serve them
for t in llama-bench llama-completion llama-fit-params ggml-rpc-server llama-server llama-quantize llama-eval-callback; do
	cp "$cpu/$t" "$tmp/$src/build-cuda/bin/"
done
cp "$cpu"/libllama-*-impl.so "$tmp/$src/build-cuda/bin/"
cp -a "$cpu"/libmtmd.so* "$tmp/$src/build-cuda/bin/" # llama-server's
cp "$src/gguf-py/gguf/constants.py" "$tmp/$src/gguf-py/gguf/"
strip --strip-debug "$tmp"/build-gpu/bin/* "$tmp"/build-gpu/tests/* "$tmp/$src"/build-cuda/bin/* 2>/dev/null || true
tar -c --owner=0 --group=0 -C "$tmp" . | xz -T0 -6 >gpu-pack/pprpc-run.txz
if [ ! -f gpu-pack/llama-src.txz ] || [ "$(cat gpu-pack/llama-src.commit 2>/dev/null)" != "$LLAMA_COMMIT" ]; then
	# the source tree as build-llama.sh left it (its patches applied), no build trees
	tar -c --owner=0 --group=0 --exclude='./build-*' --exclude=./models --exclude=./docs --exclude=./.git \
		-C "$src" . | xz -T0 -6 >gpu-pack/llama-src.txz
	echo "$LLAMA_COMMIT" >gpu-pack/llama-src.commit
fi
ls -la gpu-pack
