#!/usr/bin/env bash
# tests/gpu/llama-cuda.sh — on the GPU machine: build the pinned llama.cpp
# with ggml-cuda (sm_90) from a source tarball made here, into ext/llama.cpp-<tag> (LLAMA_RELEASE)
# (git-ignored, kept while the machine stays warm).  Nothing is fetched there.
#
#   tests/gpu/llama-cuda.sh TARBALL [PACK_DIR]
#
# TARBALL: `git -C ext/llama.cpp-<tag> archive HEAD | xz` without models/docs
# (tests/gpu/README.md).  With PACK_DIR, the built libraries and tools are
# also written there as xz pieces of at most 15 MiB (a later, cold machine
# unpacks them instead of building again: cat PACK_DIR/llama-cuda.txz.* | xz -d | tar x).
set -euo pipefail
cd "$(dirname "$0")/../.."
tarball=$1
pack=${2:-}
src=$(. scripts/llama-release.sh && echo "$LLAMA_SRC_DEFAULT")
build=$src/build-cuda
# The tarball is no git checkout: without a ceiling, ggml's CMakeLists asks
# the enclosing repository (this tree's copy) for "its" commit and bakes a
# wrong one into ggml_commit(), which the plugin and pprpcd then refuse.
# Stopped at ext/, it says "unknown" and the release check compares the
# version alone (util/ggml_release.h).
export GIT_CEILING_DIRECTORIES=$PWD/$(dirname "$src")
targets="ggml llama test-backend-ops test-llama-archs llama-bench llama-completion llama-fit-params ggml-rpc-server"
if [ ! -x "$build/bin/test-backend-ops" ] || [ ! -f "$build/bin/libggml-cuda.so" ]; then
	if [ ! -d "$src" ]; then
		mkdir -p "$src"
		xz -dc "$tarball" | tar -x -C "$src"
	fi
	t0=$(date +%s)
	LLAMA_CUDA=1 LLAMA_NATIVE=OFF JOBS=$(nproc) LLAMA_TARGETS="$targets" scripts/build-llama.sh "$src" "$build"
	echo "llama-cuda: built in $(( $(date +%s) - t0 )) s"
fi
if [ -n "$pack" ]; then
	mkdir -p "$pack"
	tmp=$(mktemp -d)
	cp -a "$build"/bin/*.so* "$tmp"/
	for t in $targets; do [ ! -x "$build/bin/$t" ] || [ -d "$build/bin/$t" ] || cp "$build/bin/$t" "$tmp"/; done
	strip --strip-unneeded "$tmp"/* 2>/dev/null || true
	tar -c --owner=0 --group=0 -C "$tmp" . | xz -T0 -6 | split -b 15M -d - "$pack/llama-cuda.txz."
	rm -rf "$tmp"
	ls -la "$pack"
fi
