# Sourced by the llama.cpp scripts: resolves LLAMA_RELEASE (default: the
# first release of scripts/llama-releases) into LLAMA_TAG, LLAMA_PKG,
# LLAMA_COMMIT and the default source folder LLAMA_SRC_DEFAULT.
_rel_file="$(dirname "${BASH_SOURCE[0]}")/llama-releases"
LLAMA_RELEASE=${LLAMA_RELEASE:-$(awk '!/^#/ && NF { print $1; exit }' "$_rel_file")}
read -r LLAMA_TAG LLAMA_PKG LLAMA_COMMIT < <(awk -v t="$LLAMA_RELEASE" '!/^#/ && $1 == t { print $1, $2, $3 }' "$_rel_file") || true
if [ -z "${LLAMA_COMMIT:-}" ]; then
	echo "llama-release: unknown LLAMA_RELEASE '$LLAMA_RELEASE' (scripts/llama-releases has:$(awk '!/^#/ && NF { printf " %s", $1 }' "$_rel_file"))" >&2
	exit 2
fi
LLAMA_SRC_DEFAULT=ext/llama.cpp-$LLAMA_TAG
