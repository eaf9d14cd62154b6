#!/usr/bin/env bash
# Build a llama.cpp release of scripts/llama-releases (LLAMA_RELEASE, default
# the first; fetched by scripts/fetch-llama.sh when missing) with CMake into a
# git-ignored build tree, once: ninja rebuilds nothing when nothing changed.
#
#   [LLAMA_RELEASE=v0.4.0] scripts/build-llama.sh [SRC [BUILD]]
#       (default: ext/llama.cpp-<tag> ext/llama.cpp-<tag>/build-cpu)
#
# The CPU backend is built the way llama.cpp's own releases build it:
# GGML_BACKEND_DL with GGML_CPU_ALL_VARIANTS, one libggml-cpu-<variant>.so per
# instruction-set level (x64 ... sapphirerapids on x86, armv8.0 ... armv9.2 on
# Arm), the best one for the running CPU chosen when the process starts.  A
# GGML_NATIVE build runs only on CPUs with every extension of the build host,
# and a build tree is carried to ranks and to the GPU machine.  The variants
# cost ~1 CPU-minute each (14 on x86).  LLAMA_NATIVE=1 builds the one native
# backend instead, linked in (a developer's quick build; never carried).
# LLAMA_CUDA=1 adds ggml-cuda (sm_90 unless LLAMA_CUDA_ARCHS), into build-cuda.
# LLAMA_SANITIZE=1 builds ggml alone with AddressSanitizer and UBSan into
# build-asan, for pprpc's sanitizer builds (make SANITIZE=address,... loads
# it: ggml's kernels are part of what the engine must keep safe).  It has the
# one native CPU backend, linked into libggml (GGML_NATIVE cannot be a
# GGML_BACKEND_DL module): it is built on, and only used on, the test host.
#
# llama-server is built without its web UI (LLAMA_BUILD_UI and the prebuilt
# download off: nothing but the package registries is reachable); its HTTP
# API is complete without it.
#
# The patches of scripts/llama-patches/ are applied to the source first, each
# documented in scripts/llama-patches/README.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
. scripts/llama-release.sh
SRC=${1:-$LLAMA_SRC_DEFAULT}
if [ "${LLAMA_CUDA:-0}" = 1 ]; then BUILD=${2:-$SRC/build-cuda}
elif [ "${LLAMA_SANITIZE:-0}" = 1 ]; then BUILD=${2:-$SRC/build-asan}
else BUILD=${2:-$SRC/build-cpu}; fi
JOBS=${JOBS:-$(nproc)}
# `ggml` depends on every backend module of a GGML_BACKEND_DL build (the CPU
# variants, ggml-rpc, ggml-cuda).  llama-common (libllama-common.so, which
# llama-completion links too) is named for pprpc's llama-logits
# (bench/llama-vs-rpc/llama-logits.cpp), which links it.
TOOLS="test-backend-ops test-llama-archs llama-bench llama-simple llama-completion llama-eval-callback llama-quantize llama-imatrix llama-fit-params ggml-rpc-server llama-server"
TARGETS=${LLAMA_TARGETS:-"ggml llama llama-common $TOOLS"}
[ "${LLAMA_SANITIZE:-0}" = 1 ] && TARGETS=${LLAMA_TARGETS:-ggml}

[ -d "$SRC" ] || scripts/fetch-llama.sh "$SRC"
if [ -d "$SRC/.git" ]; then
	got=$(git -C "$SRC" rev-parse HEAD)
	[ "$got" = "$LLAMA_COMMIT" ] || { echo "build-llama: $SRC holds $got, not $LLAMA_TAG ($LLAMA_COMMIT)" >&2; exit 1; }
fi

# patch(1), not git: the GPU machine builds from a tarball of the source
# (made from a patched tree: there a missing patch(1) is not fatal).
# A patch whose header has a "Releases:" line applies to those tags only.
for p in scripts/llama-patches/*.patch; do
	only=$(sed -n '1,/^---/s/^Releases: *//p' "$root/$p")
	if [ -n "$only" ] && ! grep -qw -- "$LLAMA_TAG" <<<"${only%%(*}"; then
		continue
	fi
	command -v patch >/dev/null || { echo "build-llama: no patch(1); $p must be in the source already"; continue; }
	if patch -d "$SRC" -p1 -R -s -f --dry-run <"$root/$p" >/dev/null 2>&1; then
		continue # already applied
	fi
	patch -d "$SRC" -p1 -s -f --no-backup-if-mismatch <"$root/$p"
	echo "build-llama: applied $p"
done

cpu_flags=(-DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_NATIVE=OFF)
if [ "${LLAMA_NATIVE:-0}" = 1 ]; then
	cpu_flags=(-DGGML_BACKEND_DL=OFF -DGGML_NATIVE=ON)
fi
if [ "${LLAMA_SANITIZE:-0}" = 1 ]; then
	# one CPU backend linked into libggml (no loader): libggml finds it
	# beside itself, so an installed rank (PREFIX/lib/pprpc) needs no build tree
	cpu_flags=(-DGGML_BACKEND_DL=OFF -DGGML_NATIVE=ON -DGGML_SANITIZE_ADDRESS=ON -DGGML_SANITIZE_UNDEFINED=ON
		"-DCMAKE_BUILD_RPATH=\$ORIGIN")
fi
cuda_flags=()
if [ "${LLAMA_CUDA:-0}" = 1 ]; then
	cuda_flags=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${LLAMA_CUDA_ARCHS:-90}")
fi
stamp="$LLAMA_TAG ${cpu_flags[*]} ${cuda_flags[*]}"
if [ -f "$BUILD/build.ninja" ] && [ "$(cat "$BUILD/pprpc-config" 2>/dev/null)" != "$stamp" ]; then
	echo "build-llama: $BUILD was configured otherwise ($(cat "$BUILD/pprpc-config" 2>/dev/null || echo unknown)); reconfiguring"
	rm -rf "$BUILD"
fi
if [ ! -f "$BUILD/build.ninja" ]; then
	cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
		-DBUILD_SHARED_LIBS=ON -DGGML_RPC=ON "${cpu_flags[@]}" \
		-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=ON \
		-DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF \
		-DLLAMA_BUILD_EXAMPLES="$([ -d "$SRC/examples" ] && echo ON || echo OFF)" \
		"${cuda_flags[@]}" >"$BUILD.cmake.log" 2>&1 || { tail -20 "$BUILD.cmake.log" >&2; exit 1; }
	mv "$BUILD.cmake.log" "$BUILD/pprpc-cmake.log"
	echo "$stamp" >"$BUILD/pprpc-config"
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
	case $t in ggml*|llama|llama-common) continue ;; esac # libraries
	[ -x "$BUILD/bin/$t" ] || { echo "build-llama: $BUILD/bin/$t missing after the build" >&2; exit 1; }
done
ls "$BUILD"/bin/libggml-cpu*.so >/dev/null 2>&1 || { echo "build-llama: no CPU backend in $BUILD/bin" >&2; exit 1; }
echo "$LLAMA_TAG $LLAMA_COMMIT" >"$BUILD/bin/pprpc-llama-release"
echo "build-llama: $BUILD ready ($LLAMA_TAG; CPU variants:$(cd "$BUILD/bin" && ls libggml-cpu*.so | sed 's/libggml-cpu-\{0,1\}\(.*\)\.so/ \1/' | tr -d '\n'))"
