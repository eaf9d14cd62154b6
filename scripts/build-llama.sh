#!/usr/bin/env bash
# Build the pinned llama.cpp release (fetched by scripts/fetch-llama.sh) with
# CMake into a git-ignored build tree, once: ninja rebuilds nothing when
# nothing changed.  CPU build by default; LLAMA_CUDA=1 adds ggml-cuda (sm_90).
#
#   scripts/build-llama.sh [SRC [BUILD]]   (default: ext/llama.cpp ext/llama.cpp/build-cpu)
#
# One patch is applied to the source before building (scripts/llama-patches/):
# test-llama-archs does not call ggml_backend_load_all() in this release, so it
# never sees a backend named by GGML_BACKEND_PATH; the patch adds that one call
# at the top of main() (what llama-bench, llama-cli and test-backend-ops do).
# What the test checks is unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
SRC=${1:-ext/llama.cpp}
if [ "${LLAMA_CUDA:-0}" = 1 ]; then BUILD=${2:-$SRC/build-cuda}; else BUILD=${2:-$SRC/build-cpu}; fi
JOBS=${JOBS:-$(nproc)}
TARGETS=${LLAMA_TARGETS:-"ggml-base ggml-cpu ggml llama test-backend-ops test-llama-archs llama-bench llama-simple llama-completion llama-quantize llama-imatrix llama-fit-params ggml-rpc-server"}

[ -d "$SRC" ] || scripts/fetch-llama.sh "$SRC"

# patch(1), not git: the GPU machine builds from a tarball of the source
# (made from a patched tree: there a missing patch(1) is not fatal).
for p in scripts/llama-patches/*.patch; do
	command -v patch >/dev/null || { echo "build-llama: no patch(1); $p must be in the source already"; continue; }
	if patch -d "$SRC" -p1 -R -s -f --dry-run <"$root/$p" >/dev/null 2>&1; then
		continue # already applied
	fi
	patch -d "$SRC" -p1 -s -f <"$root/$p"
	echo "build-llama: applied $p"
done

cuda_flags=()
if [ "${LLAMA_CUDA:-0}" = 1 ]; then
	cuda_flags=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${LLAMA_CUDA_ARCHS:-90}")
fi
if [ ! -f "$BUILD/build.ninja" ]; then
	cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
		-DBUILD_SHARED_LIBS=ON -DGGML_RPC=ON -DGGML_NATIVE="${LLAMA_NATIVE:-ON}" \
		-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=ON \
		-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
		-DLLAMA_BUILD_EXAMPLES="$([ -d "$SRC/examples" ] && echo ON || echo OFF)" \
		"${cuda_flags[@]}" >/dev/null
fi
# Progress lines and compiler warnings of the foreign code stay in the log.
log="$BUILD/pprpc-build.log"
# shellcheck disable=SC2086
if ! ninja -C "$BUILD" -j "$JOBS" $TARGETS >"$log" 2>&1; then
	grep -E "error|FAILED" "$log" | head -20 >&2
	echo "build-llama: ninja failed, see $log" >&2
	exit 1
fi
for t in $TARGETS; do
	case $t in ggml|ggml-base|ggml-cpu|ggml-cuda|llama) continue ;; esac # libraries
	[ -x "$BUILD/bin/$t" ] || { echo "build-llama: $BUILD/bin/$t missing after the build" >&2; exit 1; }
done
echo "build-llama: $BUILD ready"
