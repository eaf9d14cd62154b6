#!/usr/bin/env bash
# Fetch the pinned llama.cpp / ggml release (v0.4.0, commit 80fb11a) into a
# git-ignored folder.  The machines reach Debian and the npm registry only; the
# npm package node-llama-cpp@3.21.1 carries that release as a git bundle.
# Idempotent: does nothing when the folder already holds the pinned commit.
#
#   scripts/fetch-llama.sh [DIR]      (default: ext/llama.cpp)
set -euo pipefail
cd "$(dirname "$0")/.."

PKG=node-llama-cpp@3.21.1
TAG=v0.4.0
COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed
DIR=${1:-ext/llama.cpp}
CACHE=ext/npm

if [ -d "$DIR/.git" ] && [ "$(git -C "$DIR" rev-parse HEAD 2>/dev/null)" = "$COMMIT" ]; then
	echo "fetch-llama: $DIR holds $TAG ($COMMIT)"
	exit 0
fi
if [ -e "$DIR" ]; then
	echo "fetch-llama: $DIR exists but is not $TAG ($COMMIT); remove it first" >&2
	exit 1
fi

command -v npm >/dev/null || { echo "fetch-llama: npm not found (scripts/setup-debian.sh installs it)" >&2; exit 1; }
mkdir -p "$CACHE"
tgz="$CACHE/node-llama-cpp-3.21.1.tgz"
if [ ! -s "$tgz" ]; then
	(cd "$CACHE" && npm pack --silent "$PKG" >/dev/null)
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tgz" -C "$tmp" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
tag=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$tmp/package/llama/llama.cpp.info.json")
if [ "$tag" != "$TAG" ]; then
	echo "fetch-llama: $PKG carries tag '$tag', expected $TAG" >&2
	exit 1
fi
mkdir -p "$(dirname "$DIR")"
git clone -q "$tmp/package/llama/gitRelease.bundle" "$DIR.part" 2>/dev/null
got=$(git -C "$DIR.part" rev-parse HEAD)
if [ "$got" != "$COMMIT" ]; then
	rm -rf "$DIR.part"
	echo "fetch-llama: bundle holds $got, expected $COMMIT" >&2
	exit 1
fi
mv "$DIR.part" "$DIR"
echo "fetch-llama: $DIR holds $TAG ($COMMIT)"
