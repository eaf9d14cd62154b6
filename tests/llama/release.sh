#!/usr/bin/env bash
# tests/llama/release.sh — one llama.cpp release on both sides, said clearly
# when it is not (util/ggml_release.h), and the tools see the plugin's
# devices as the README says:
#   1. the plugin loaded into a llama.cpp whose ggml says it is another
#      release (ggml_version_shim.so) refuses to load, with the reason, and
#      the tool lists no PPRPC device;
#   2. a pprpcd whose ggml says it is another release refuses its ggml
#      devices and exits with the reason;
#   3. the plain case: `llama-server --list-devices` (no -dev) lists the
#      ranks' devices, as every tool of a GGML_BACKEND_DL build does.
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

LS=$LLAMA_BIN/llama-server
SHIM=$BUILD/tests/ggml_version_shim.so
require_llama "release" "$LS" "$SHIM"
fake=0.0.1

start_rank || fail "cannot start rank 0"

# 1. the plugin in a tool of another ggml
LD_PRELOAD=$(realpath "$SHIM") PPRPC_FAKE_GGML_VERSION=$fake with_plugin "$LS" --list-devices \
	>"$TMP_ROOT/foreign.txt" 2>&1
grep -q "pprpc: not loading the PPRPC backend: this process runs ggml $fake, but pprpc was built against ggml" \
	"$TMP_ROOT/foreign.txt" || { cat "$TMP_ROOT/foreign.txt" >&2; fail "the plugin did not refuse a ggml of another release"; }
grep -q "PPRPC0" "$TMP_ROOT/foreign.txt" && fail "a PPRPC device was listed in a tool of another ggml"
echo "plugin in ggml $fake: $(grep -o 'pprpc: not loading.*' "$TMP_ROOT/foreign.txt" | head -n 1 | cut -c1-160)..."

# 2. a rank of another ggml
LD_PRELOAD=$(realpath "$SHIM") PPRPC_FAKE_GGML_VERSION=$fake timeout 20 "$PPRPCD" --listen 127.0.0.1:0 \
	--devices ggml:CPU --log-level info >"$TMP_ROOT/rank-foreign.log" 2>&1
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || { cat "$TMP_ROOT/rank-foreign.log" >&2; fail "pprpcd with ggml $fake: exit $rc (expected a refusal)"; }
grep -q "this process runs ggml $fake" "$TMP_ROOT/rank-foreign.log" ||
	{ cat "$TMP_ROOT/rank-foreign.log" >&2; fail "pprpcd with ggml $fake did not say why it refused"; }
echo "pprpcd in ggml $fake: exit $rc, $(grep -o 'this process runs ggml.*' "$TMP_ROOT/rank-foreign.log" | head -n 1 | cut -c1-120)..."

# 3. the devices, listed without -dev
with_plugin "$LS" --list-devices >"$TMP_ROOT/list.txt" 2>&1 || { cat "$TMP_ROOT/list.txt" >&2; fail "llama-server --list-devices failed"; }
grep -q "PPRPC0" "$TMP_ROOT/list.txt" || { cat "$TMP_ROOT/list.txt" >&2; fail "llama-server --list-devices does not list PPRPC0"; }
echo "llama-server --list-devices: $(grep PPRPC0 "$TMP_ROOT/list.txt" | head -n 1 | sed 's/^ *//')"
echo "release: passed"
