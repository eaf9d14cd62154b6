#!/usr/bin/env bash
# tests/llama/server.sh — llama-server over two pprpcd ranks, driven over
# HTTP: a greedy /completion (plain and streamed) equals llama-server's on
# the CPU alone, and /health answers.  The model: bench/model-gen's llama
# of the tiny preset (random weights whose greedy text varies; 16 tokens,
# all UTF-8: a few tokens later comes one that is not, which v0.4.0's server
# answers with an error 500).
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

LS=$LLAMA_BIN/llama-server
require_llama "server" "$LS"
command -v python3 >/dev/null || fail "python3 is needed for the HTTP client"

LLAMA_DIR=$(dirname "$(dirname "$LLAMA_BIN")") bench/model-gen/gen-model --arch llama --preset tiny --seed 1 \
	-o "$TMP_ROOT/model.gguf" >/dev/null || fail "gen-model failed"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
SERVER_PID=
stop_server() { [ -z "$SERVER_PID" ] || { kill -TERM "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=; }; }
trap 'stop_server; cleanup' EXIT
# start_server NAME ARGS...: llama-server on 127.0.0.1, waits for /health 200
start_server() {
	local name=$1; shift
	PORT=$(free_port)
	"$@" -m "$TMP_ROOT/model.gguf" --host 127.0.0.1 --port "$PORT" -c 512 -t 1 --no-warmup \
		>"$TMP_ROOT/$name.log" 2>&1 &
	SERVER_PID=$!
	for _ in $(seq 1 600); do
		if python3 - "$PORT" 2>/dev/null <<'PY'
import sys, urllib.request
sys.exit(0 if urllib.request.urlopen("http://127.0.0.1:%s/health" % sys.argv[1], timeout=1).status == 200 else 1)
PY
		then return 0; fi
		kill -0 "$SERVER_PID" 2>/dev/null || break
		sleep 0.1
	done
	tail -n 20 "$TMP_ROOT/$name.log" >&2
	fail "llama-server ($name) did not become healthy"
}
# complete OUT: /completion, plain then streamed; OUT.plain and OUT.stream hold the text
complete() {
	python3 - "$PORT" "$1" <<'PY' || fail "HTTP client failed"
import json, sys, urllib.request
port, out = sys.argv[1], sys.argv[2]
req = {"prompt": "the quick brown fox jumps over", "n_predict": 16, "temperature": 0, "ignore_eos": True}
def post(body):
    r = urllib.request.Request("http://127.0.0.1:%s/completion" % port, json.dumps(body).encode(),
                               {"Content-Type": "application/json"})
    return urllib.request.urlopen(r, timeout=120)
plain = json.load(post(req))["content"]
text, stopped = "", False
for line in post(dict(req, stream=True)):
    line = line.decode().strip()
    if line.startswith("data: "):
        ev = json.loads(line[6:])
        text += ev.get("content", "")
        stopped = stopped or ev.get("stop", False)
if not stopped:
    sys.exit("the stream ended without its last event")
open(out + ".plain", "w").write(plain)
open(out + ".stream", "w").write(text)
PY
}

start_server cpu "$LS" -dev none
complete "$TMP_ROOT/cpu"
stop_server
start_rank || fail "cannot start rank 0"
start_rank || fail "cannot start rank 1"
start_server pprpc with_plugin "$LS" -dev PPRPC0,PPRPC1 -ngl 99
complete "$TMP_ROOT/pprpc"
stop_server
[ -s "$TMP_ROOT/cpu.plain" ] || fail "the CPU server generated nothing"
echo "CPU:   $(cat "$TMP_ROOT/cpu.plain")"
echo "pprpc: $(cat "$TMP_ROOT/pprpc.plain")"
cmp -s "$TMP_ROOT/cpu.plain" "$TMP_ROOT/pprpc.plain" || fail "the ranks' completion differs from the CPU's"
cmp -s "$TMP_ROOT/cpu.stream" "$TMP_ROOT/pprpc.stream" || fail "the ranks' streamed completion differs from the CPU's"
cmp -s "$TMP_ROOT/pprpc.plain" "$TMP_ROOT/pprpc.stream" || fail "streamed and plain completions differ"
echo "server: passed (llama-server over two ranks: /completion plain and streamed = the CPU's)"
