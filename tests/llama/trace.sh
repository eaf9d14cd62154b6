#!/usr/bin/env bash
# tests/llama/trace.sh — the request trace end to end: llama-completion
# over two pprpcd ranks with trace-file on both and PPRPC_TRACE in the
# client, then bench/llama-vs-rpc/token-trace.py on the three files.
#
# Checked: a rank started without trace-file writes no file; the files
# exist; each rank traced GRAPH_RUN executions with start <= end; every
# request id the client sent to a rank is one that rank saw arrive (same
# type); the merger finds a decoded token and prints both ranks' hops and
# the boundary (the peer link's requests on rank 1).
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

require_completion_tools "trace"

# TRACE_MODEL=FILE: another model (doc/llama.md's figures: gen-model's
# tiny llama); PPRPC_KEEP_LOGS=1 keeps the traces.
model=${TRACE_MODEL:-$TMP_ROOT/model.gguf}
if [ -z "${TRACE_MODEL:-}" ]; then
	vocab_model llama 3 "$model"
fi

T=$TMP_ROOT/trace
mkdir -p "$T"
start_rank --trace-file "$T/rank0.trace" || fail "cannot start rank 0"
start_rank --trace-file "$T/rank1.trace" || fail "cannot start rank 1"
# off by default: a third rank without the setting, used by the same run
# (PPRPC_RANKS names only the first two, so it serves one HELLO: pprpcctl)
start_rank || fail "cannot start rank 2"
"$PPRPCCTL" status --rank "${RANK_ADDRS[2]}" >"$TMP_ROOT/ctl.txt" 2>&1 || fail "pprpcctl status of rank 2 failed"

prompt="the quick brown fox jumps over the lazy dog"
gen=(-m "$model" -p "$prompt" -n 24 --temp 0 --ignore-eos -c 256 -b 64 -ub 16
	-no-cnv -t 1 --simple-io --no-display-prompt --no-warmup -ngl 99 -dev PPRPC0,PPRPC1 -ts 1,1)
RANK_ADDRS_ALL=("${RANK_ADDRS[@]}")
RANK_ADDRS=("${RANK_ADDRS_ALL[0]}" "${RANK_ADDRS_ALL[1]}")
PPRPC_TRACE=$T/client with_plugin "$LC" "${gen[@]}" >"$TMP_ROOT/out.txt" 2>"$TMP_ROOT/lc.log" ||
	{ tail -n 30 "$TMP_ROOT/lc.log" >&2; fail "llama-completion over the ranks failed"; }
RANK_ADDRS=("${RANK_ADDRS_ALL[@]}")
stop_ranks   # SIGTERM: the ranks write what they kept and close the files

ls "$T" >"$TMP_ROOT/files.txt"
clientf=$(ls "$T"/client.* 2>/dev/null | head -n 1)
[ -s "$T/rank0.trace" ] && [ -s "$T/rank1.trace" ] || fail "a rank's trace-file is missing or empty ($(paste -sd' ' "$TMP_ROOT/files.txt"))"
[ -n "$clientf" ] && [ -s "$clientf" ] || fail "PPRPC_TRACE wrote no client.PID file ($(paste -sd' ' "$TMP_ROOT/files.txt"))"
[ "$(wc -l <"$TMP_ROOT/files.txt")" = 3 ] || fail "expected three trace files, found: $(paste -sd' ' "$TMP_ROOT/files.txt")"
# off by default: rank 2 (no trace-file) wrote nothing beside its log and port
[ "$(ls "${RANK_DIRS[2]}" | paste -sd' ')" = "log port" ] || fail "rank 2 without trace-file wrote: $(ls "${RANK_DIRS[2]}")"
! grep -q "tracing every request" "${RANK_DIRS[2]}/log" || fail "rank 2 traces without trace-file"
grep -q "^# end: 0 records dropped" "$T/rank0.trace" || fail "rank 0's trace has no end line (not flushed at SIGTERM?) or dropped records"

# each rank executed GRAPH_RUNs, every one with exec_start <= exec_end
for r in 0 1; do
	awk '$5 == "GRAPH_RUN" && $7 == "exec_start" { s[$3" "$6] = $1 }
	     $5 == "GRAPH_RUN" && $7 == "exec_end" { n++; k = $3" "$6; if (!(k in s) || s[k] > $1) bad++ }
	     END { if (n < 10 || bad) { printf "%d GRAPH_RUN execs, %d without start <= end\n", n, bad; exit 1 } }' \
		"$T/rank$r.trace" || fail "rank $r: GRAPH_RUN execs not traced right"
done
# every request the client sent has the rank's arrival under the same type and id
python3 - "$T/rank0.trace" "$T/rank1.trace" "$clientf" <<'PY' || fail "client and rank request ids do not match"
import sys
seen, addr = {}, {}
for p in sys.argv[1:3]:
    for l in open(p):
        w = l.split()
        if l.startswith("# pprpcd"):
            a = w[w.index("listen") + 1]
        elif not l.startswith("#") and w[3] == "client" and w[6] == "arrive":
            seen.setdefault(a, set()).add((w[4], w[5]))
n = bad = 0
for l in open(sys.argv[3]):
    w = l.split()
    if l.startswith("#") or w[6] != "send":
        continue
    n += 1
    if (w[4], w[5]) not in seen.get(w[2], ()):
        bad += 1
print("client requests: %d sent, %d without the rank's arrival" % (n, bad))
sys.exit(1 if bad or n < 100 else 0)
PY

python3 bench/llama-vs-rpc/token-trace.py "$T"/* >"$TMP_ROOT/token.txt" || { cat "$TMP_ROOT/token.txt"; fail "token-trace.py failed"; }
cat "$TMP_ROOT/token.txt"
grep -q "^token-trace: decoded token 10 of" "$TMP_ROOT/token.txt" || fail "no decoded token found"
grep -Eq "^ +[0-9.]+ +rank0 +GRAPH_RUN .*exec_start .*exec_end" "$TMP_ROOT/token.txt" || fail "no rank 0 GRAPH_RUN hops"
grep -Eq "^ +[0-9.]+ +rank1 +GRAPH_RUN .*exec_start .*exec_end" "$TMP_ROOT/token.txt" || fail "no rank 1 GRAPH_RUN hops"
grep -Eq "^ +rank0 SEND #[0-9]+ .* -> rank1 RECV #[0-9]+" "$TMP_ROOT/token.txt" || fail "no boundary rank0 SEND -> rank1 RECV"
grep -Eq "PULL .*a peer's request" "$TMP_ROOT/token.txt" || fail "the boundary's PULL (peer link) is not in the token"
echo "trace: OK"
