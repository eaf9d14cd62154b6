#!/usr/bin/env bash
# tests/llama/rank-loss.sh — a rank lost during generation: the llama.cpp
# tool must end with a clear error within a bound (no hang), and the
# surviving rank must keep serving.
#
# 1. killed: llama-completion generates up to 3000 tokens over two ranks
#    (the same random model as generate.sh); once it has printed some,
#    rank 1 gets SIGKILL.  Required: the tool exits non-zero within
#    LOSS_BOUND_S (default 20) seconds, its stderr has the plugin's error
#    naming rank 1 and its address; then rank 0 still answers pprpcctl
#    status, and a new generation on rank 0 alone gives the CPU's tokens.
# 2. hung: the same over rank 0 and a new rank 2, and rank 2 gets SIGSTOP
#    (its socket stays open, its kernel acknowledges, nothing answers).
#    Required: the plugin's liveness watchdog names rank 2 (no answer to
#    PING) and the tool exits with status 75 (the rank fault) within
#    HUNG_BOUND_S (default 10) seconds, with the default settings (the
#    per-reply timeout, PPRPC_TIMEOUT_MS, is 120 s).
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

require_completion_tools "rank-loss"
BOUND=${LOSS_BOUND_S:-20}
HUNG_BOUND=${HUNG_BOUND_S:-10}

vocab_model llama 3 "$TMP_ROOT/model.gguf"

start_rank || fail "cannot start rank 0"
start_rank || fail "cannot start rank 1"

long=(-m "$TMP_ROOT/model.gguf" -p "the quick brown fox" -n 3000 --temp 0 --ignore-eos -c 4096
	-no-cnv -t 1 --simple-io --no-display-prompt --no-warmup -ngl 99 -dev PPRPC0,PPRPC1 -ts 1,1)
with_plugin "$LC" "${long[@]}" >"$TMP_ROOT/gen.txt" 2>"$TMP_ROOT/gen.log" &
tool=$!

# wait for generation to be under way (some tokens printed)
for _ in $(seq 1 3000); do
	[ "$(wc -c <"$TMP_ROOT/gen.txt")" -ge 20 ] && break
	kill -0 $tool 2>/dev/null || break
	sleep 0.01
done
kill -0 $tool 2>/dev/null || { tail "$TMP_ROOT/gen.log" >&2; fail "the tool ended before the rank was killed"; }
[ "$(wc -c <"$TMP_ROOT/gen.txt")" -ge 20 ] || fail "no tokens after 30 s"

victim=${RANK_PIDS[1]}
kill -KILL "$victim"
wait "$victim" 2>/dev/null
t0=$(date +%s%N)
dead=0
for _ in $(seq 1 $((BOUND * 20))); do
	if ! kill -0 $tool 2>/dev/null; then dead=1; break; fi
	sleep 0.05
done
if [ $dead = 0 ]; then
	kill -KILL $tool 2>/dev/null
	fail "the tool still ran ${BOUND}s after rank 1 was killed (hang)"
fi
wait $tool
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
secs=$(printf "%d.%03d" $((ms / 1000)) $((ms % 1000)))
echo "tool ended ${secs}s after the kill, exit status $rc, having printed $(wc -c <"$TMP_ROOT/gen.txt") bytes"
grep "pprpc" "$TMP_ROOT/gen.log" | grep -v "^.*pprpc: PPRPC[0-9]* = " | tail -n 3
[ $rc = 75 ] || fail "the tool exited with $rc, not 75 (the rank fault), although a rank died"
# the tool's error names rank 1, or rank 0's SEND to it (whichever noticed first)
grep -Eq "rank 1 .*${RANK_ADDRS[1]}|SEND of transfer [0-9]* to ${RANK_ADDRS[1]} failed" "$TMP_ROOT/gen.log" ||
	fail "no error naming rank 1 (${RANK_ADDRS[1]})"

# the survivor
"$PPRPCCTL" status --rank "${RANK_ADDRS[0]}" >"$TMP_ROOT/status.txt" 2>&1 || { cat "$TMP_ROOT/status.txt" >&2; fail "rank 0 does not answer"; }
short=(-m "$TMP_ROOT/model.gguf" -p "the quick brown fox" -n 16 --temp 0 --ignore-eos -c 256
	-no-cnv -t 1 --simple-io --no-display-prompt --no-warmup)
"$LC" "${short[@]}" -ngl 0 >"$TMP_ROOT/cpu.txt" 2>/dev/null || fail "CPU run failed"
GGML_BACKEND_PATH=$(realpath "$PLUGIN") PPRPC_RANKS=${RANK_ADDRS[0]} "$LC" "${short[@]}" -ngl 99 -dev PPRPC0 \
	>"$TMP_ROOT/after.txt" 2>"$TMP_ROOT/after.log" || { tail "$TMP_ROOT/after.log" >&2; fail "rank 0 cannot serve a new run"; }
cmp -s "$TMP_ROOT/cpu.txt" "$TMP_ROOT/after.txt" || fail "rank 0 alone: tokens differ from the CPU"
echo "rank-loss: killed rank: clear error in ${secs}s; rank 0 kept serving: a new run matched the CPU"

# 2. a rank that stops answering without closing its socket
start_rank || fail "cannot start rank 2"
GGML_BACKEND_PATH=$(realpath "$PLUGIN") PPRPC_RANKS=${RANK_ADDRS[0]},${RANK_ADDRS[2]} \
	"$LC" "${long[@]}" >"$TMP_ROOT/gen2.txt" 2>"$TMP_ROOT/gen2.log" &
tool=$!
for _ in $(seq 1 3000); do
	[ "$(wc -c <"$TMP_ROOT/gen2.txt")" -ge 20 ] && break
	kill -0 $tool 2>/dev/null || break
	sleep 0.01
done
kill -0 $tool 2>/dev/null || { tail "$TMP_ROOT/gen2.log" >&2; fail "the tool ended before rank 2 was stopped"; }
kill -STOP "${RANK_PIDS[2]}"
t0=$(date +%s%N)
dead=0
for _ in $(seq 1 $((HUNG_BOUND * 20))); do
	if ! kill -0 $tool 2>/dev/null; then dead=1; break; fi
	sleep 0.05
done
kill -CONT "${RANK_PIDS[2]}"
if [ $dead = 0 ]; then
	kill -KILL $tool 2>/dev/null
	fail "the tool still ran ${HUNG_BOUND}s after rank 2 stopped answering (hang)"
fi
wait $tool
rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
secs2=$(printf "%d.%03d" $((ms / 1000)) $((ms % 1000)))
echo "tool ended ${secs2}s after rank 2 stopped answering, exit status $rc"
grep "^pprpc: " "$TMP_ROOT/gen2.log" | grep -v "PPRPC[0-9]* = " | tail -n 3
[ $rc = 75 ] || fail "the tool exited with $rc, not 75 (the rank fault), although a rank hung"
grep -q "pprpc: rank [0-9]* [^ ]* (${RANK_ADDRS[2]}) .*liveness: no answer to PING" "$TMP_ROOT/gen2.log" ||
	fail "no liveness error naming rank 2 (${RANK_ADDRS[2]}) from the plugin"
echo "rank-loss: passed (killed: clear error in ${secs}s, survivor served; hung: clear error in ${secs2}s)"
