#!/usr/bin/env bash
# tests/llama/service.sh — llama-server over two pprpcd ranks as a service
# while a rank fails: kill -9, SIGTERM and SIGSTOP under four concurrent
# streams, the rank's return, and a start with a rank down (issue 29).
# tests/llama/service.py does the work and says what it asserts.
# SERVICE_RPC=1: the same runs over ggml-rpc-server ranks, a report only.
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

LS=$LLAMA_BIN/llama-server
require_llama "service" "$LS"
command -v python3 >/dev/null || fail "python3 is needed for the HTTP client"

LLAMA_DIR=$(dirname "$(dirname "$LLAMA_BIN")") bench/model-gen/gen-model --arch llama --preset tiny --seed 1 \
	-o "$TMP_ROOT/model.gguf" >/dev/null || fail "gen-model failed"
mkdir -p "$TMP_ROOT/service"
args=(--bin "$LLAMA_BIN" --pprpcd "$PPRPCD" --plugin "$(realpath "$PLUGIN")" --model "$TMP_ROOT/model.gguf"
	--dir "$TMP_ROOT/service")
[ "${SERVICE_RPC:-0}" = 1 ] && args+=(--rpc)
[ -n "${SERVICE_FAULTS:-}" ] && args+=(--faults "$SERVICE_FAULTS")
if ! python3 tests/llama/service.py "${args[@]}"; then
	for f in "$TMP_ROOT"/service/*.log; do
		echo "---- $f (last 40 lines)"
		tail -n 40 "$f"
	done
	fail "service: see above"
fi
