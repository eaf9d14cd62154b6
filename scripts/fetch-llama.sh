#!/usr/bin/env bash
# Fetch a llama.cpp / ggml release of scripts/llama-releases (LLAMA_RELEASE,
# default the first) into a git-ignored folder.  The machines reach Debian and
# the npm registry only; the release's node-llama-cpp package carries it as a
# git bundle, checked by commit.  Idempotent: does nothing when the folder
# already holds that commit.
#
#   [LLAMA_RELEASE=v0.4.0] scripts/fetch-llama.sh [DIR]   (default: ext/llama.cpp-<tag>)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/llama-release.sh

DIR=${1:-$LLAMA_SRC_DEFAULT}
CACHE=ext/npm

if [ -d "$DIR/.git" ] && [ "$(git -C "$DIR" rev-parse HEAD 2>/dev/null)" = "$LLAMA_COMMIT" ]; then
	echo "fetch-llama: $DIR holds $LLAMA_TAG ($LLAMA_COMMIT)"
	exit 0
fi
if [ -e "$DIR" ]; then
	echo "fetch-llama: $DIR exists but is not $LLAMA_TAG ($LLAMA_COMMIT); remove it first" >&2
	exit 1
fi

command -v npm >/dev/null || { echo "fetch-llama: npm not found (scripts/setup-debian.sh installs it)" >&2; exit 1; }
mkdir -p "$CACHE"
tgz="$CACHE/${LLAMA_PKG//@/-}.tgz"
if [ ! -s "$tgz" ]; then
	(cd "$CACHE" && npm pack --silent "$LLAMA_PKG" >/dev/null)
fi
[ -s "$tgz" ] || { echo "fetch-llama: npm pack $LLAMA_PKG gave no $tgz" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tgz" -C "$tmp" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
tag=$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$tmp/package/llama/llama.cpp.info.json")
if [ "$tag" != "$LLAMA_TAG" ]; then
	echo "fetch-llama: $LLAMA_PKG carries tag '$tag', expected $LLAMA_TAG" >&2
	exit 1
fi
mkdir -p "$(dirname "$DIR")"
rm -rf "$DIR.part"
git -c advice.detachedHead=false clone -q "$tmp/package/llama/gitRelease.bundle" "$DIR.part" 2>/dev/null
got=$(git -C "$DIR.part" rev-parse HEAD)
if [ "$got" != "$LLAMA_COMMIT" ]; then
	rm -rf "$DIR.part"
	echo "fetch-llama: bundle holds $got, expected $LLAMA_COMMIT" >&2
	exit 1
fi
mv "$DIR.part" "$DIR"
echo "fetch-llama: $DIR holds $LLAMA_TAG ($LLAMA_COMMIT)"
