#!/usr/bin/env bash
# tests/llama/generate.sh — end to end: llama.cpp's llama-completion, greedy,
# on a saved random model, over two pprpcd ranks through the plugin; the
# tokens must be identical to the CPU's.
#
# The model comes from test-llama-archs -o (random weights, fixed seed),
# with a small SentencePiece vocabulary added so the tool can tokenize a
# prompt (gguf-add-vocab).  Both runs: same prompt, 64 tokens, temperature
# 0, --ignore-eos.  The plugin run offloads every layer (-ngl 99) to
# PPRPC0 and PPRPC1 (-sm layer, the default), so llama.cpp pipelines the
# ubatches (-ub 8: the prompt is several of them) and the layer boundary
# crosses from rank 0 to rank 1 daemon to daemon.  Checked besides the
# tokens: llama.cpp says pipeline parallelism is on, both devices got
# layers, the graphs were created once and run many times (the daemons'
# own counters), and the boundary went SEND/RECV between the ranks.
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

require_completion_tools "generate"
ARCH=${PPRPC_GEN_ARCH:-llama}
SEED=${PPRPC_GEN_SEED:-3}

vocab_model "$ARCH" "$SEED" "$TMP_ROOT/model.gguf"

prompt="the quick brown fox jumps over the lazy dog, then it runs far away into the green hills"
gen=(-m "$TMP_ROOT/model.gguf" -p "$prompt" -n 64 --temp 0 --ignore-eos -c 256 -b 64 -ub 8
	-no-cnv -t 1 --simple-io --no-display-prompt --no-warmup)

"$LC" "${gen[@]}" -ngl 0 >"$TMP_ROOT/cpu.txt" 2>"$TMP_ROOT/cpu.log" || { tail "$TMP_ROOT/cpu.log" >&2; fail "CPU run failed"; }

start_rank || fail "cannot start rank 0"
start_rank || fail "cannot start rank 1"
# -dev: this llama.cpp build links its CPU backend in, so llama.cpp itself
# never calls ggml_backend_load_all(); naming devices makes the tool load
# every backend, GGML_BACKEND_PATH's included (README: Using pprpc from
# llama.cpp).  -lv 4: the model-loading lines checked below.
with_plugin "$LC" "${gen[@]}" -ngl 99 -dev PPRPC0,PPRPC1 -ts 1,1 -lv 4 >"$TMP_ROOT/pprpc.txt" 2>"$TMP_ROOT/pprpc.log"
rc=$?
[ $rc = 0 ] || { tail -n 30 "$TMP_ROOT/pprpc.log" >&2; fail "llama-completion over the ranks exited with $rc"; }

echo "CPU:   $(head -c 200 "$TMP_ROOT/cpu.txt")"
echo "pprpc: $(head -c 200 "$TMP_ROOT/pprpc.txt")"
[ -s "$TMP_ROOT/cpu.txt" ] || fail "the CPU run generated nothing"
cmp -s "$TMP_ROOT/cpu.txt" "$TMP_ROOT/pprpc.txt" || fail "tokens differ from the CPU run"

grep -q "pipeline parallelism enabled" "$TMP_ROOT/pprpc.log" || fail "llama.cpp did not enable pipeline parallelism"
# every offloaded op runs on the ranks, at every batch size: llama.cpp says
# so when a fused op (Flash Attention, ...) lands elsewhere, and gives a
# second split count when a single-token graph splits otherwise (the KV
# cache would then go through this process to the CPU every token)
# — unless llama.cpp does the same in a local run on the ggml device the
# ranks serve (RANK_DEVICE ggml:CUDA0: ggml-cuda itself lacks the kernel)
if grep -q "usually due to missing support" "$TMP_ROOT/pprpc.log"; then
	grep "usually due to missing support" "$TMP_ROOT/pprpc.log" | head -n 3 >&2
	[ "$RANK_DEVICE" != ggml:CPU ] || fail "llama.cpp fell back to the CPU for an op of an offloaded layer"
	"$LC" "${gen[@]}" -ngl 99 -dev "${RANK_DEVICE#ggml:}" -lv 4 >"$TMP_ROOT/local.txt" 2>"$TMP_ROOT/local.log" ||
		{ tail "$TMP_ROOT/local.log" >&2; fail "local ${RANK_DEVICE#ggml:} run failed"; }
	sed -n 's/.*but \(.*\) is assigned to device .* (usually due to missing support)/\1/p' "$TMP_ROOT/pprpc.log" |
		sort -u >"$TMP_ROOT/fallback-pprpc.txt"
	sed -n 's/.*but \(.*\) is assigned to device .* (usually due to missing support)/\1/p' "$TMP_ROOT/local.log" |
		sort -u >"$TMP_ROOT/fallback-local.txt"
	cmp -s "$TMP_ROOT/fallback-pprpc.txt" "$TMP_ROOT/fallback-local.txt" ||
		fail "llama.cpp fell back to the CPU for an op of an offloaded layer (a local ${RANK_DEVICE#ggml:} run does not: $(paste -sd, "$TMP_ROOT/fallback-local.txt"))"
	echo "as in a local ${RANK_DEVICE#ggml:} run, llama.cpp places on the CPU: $(paste -sd, "$TMP_ROOT/fallback-pprpc.txt") (ggml's own support)"
	cmp -s "$TMP_ROOT/local.txt" "$TMP_ROOT/pprpc.txt" || echo "note: the local ${RANK_DEVICE#ggml:} run's tokens differ from the ranks'"
fi
if grep -q "graph splits = .*(with bs=1)" "$TMP_ROOT/pprpc.log"; then
	grep "graph splits" "$TMP_ROOT/pprpc.log" | head -n 2 >&2
	fail "single-token graphs split differently: an op of an offloaded layer runs on the CPU"
fi
for dev in PPRPC0 PPRPC1; do
	grep -Eq "$dev model buffer size" "$TMP_ROOT/pprpc.log" ||
		fail "$dev got no part of the model"
done
grep "pipeline parallelism enabled\|model buffer size\|graph splits\|pprpc: PPRPC" "$TMP_ROOT/pprpc.log" | sed 's/^[0-9.]* [A-Z] //'

# the daemons' view (pprpcctl stats): graphs created once and re-run, the
# boundary daemon to daemon
for i in 0 1; do
	"$PPRPCCTL" stats --rank "${RANK_ADDRS[$i]}" >"$TMP_ROOT/stats$i.txt" || fail "pprpcctl stats rank $i"
	read -r creates runs < <(sed -n 's/.*graph creates \([0-9]*\), graph runs \([0-9]*\).*/\1 \2/p' "$TMP_ROOT/stats$i.txt" |
		awk '{c += $1; r += $2} END {print c + 0, r + 0}')
	echo "rank $i: graphs created $creates, run $runs"
	# ggml-cuda ranks hold the plugin's event_waits on the GPU (ggml-cpu's
	# queue holds them: no such line)
	grep -h "GPU-side timelines" "$TMP_ROOT/stats$i.txt" | sed "s/^ */rank $i: /" || true
	[ "$creates" -gt 0 ] && [ "$runs" -gt "$creates" ] || fail "rank $i: expected graphs run more often than created"
done
sent=$(awk '$2 == "send" {n += $4} END {print n + 0}' "$TMP_ROOT/stats0.txt")
recv=$(awk '$2 == "recv" {n += $4} END {print n + 0}' "$TMP_ROOT/stats1.txt")
echo "boundary: rank 0 sent $sent, rank 1 received $recv transfers daemon to daemon"
[ "$sent" -gt 0 ] && [ "$recv" -gt 0 ] || fail "no boundary transfers between the ranks"
# the same with a graph cache of 2 per device: graphs are evicted (GRAPH_FREE)
# and created again, the tokens stay the CPU's
PPRPC_GRAPH_CACHE=2 with_plugin "$LC" "${gen[@]}" -ngl 99 -dev PPRPC0,PPRPC1 -ts 1,1 -lv 4 \
	>"$TMP_ROOT/small.txt" 2>"$TMP_ROOT/small.log" || { tail "$TMP_ROOT/small.log" >&2; fail "run with PPRPC_GRAPH_CACHE=2 failed"; }
cmp -s "$TMP_ROOT/cpu.txt" "$TMP_ROOT/small.txt" || fail "PPRPC_GRAPH_CACHE=2: tokens differ from the CPU run"
freed=$(sed -n 's/.*pprpc: PPRPC0: graphs [0-9]* created, [0-9]* run ([0-9]* from the cache, [0-9]* of them unserialized), \([0-9]*\) freed.*/\1/p' "$TMP_ROOT/small.log")
echo "PPRPC_GRAPH_CACHE=2: $(grep -o 'PPRPC0: graphs [^;]*' "$TMP_ROOT/small.log"), tokens identical"
[ "${freed:-0}" -gt 0 ] || fail "PPRPC_GRAPH_CACHE=2 evicted no graph"
# a new graph's create queues its run and is not waited for (the default);
# PPRPC_GRAPH_CREATE_RUN=0 waits for each handle and sends GRAPH_RUN: the
# same tokens either way
PPRPC_GRAPH_CREATE_RUN=0 with_plugin "$LC" "${gen[@]}" -ngl 99 -dev PPRPC0,PPRPC1 -ts 1,1 -lv 4 \
	>"$TMP_ROOT/sync.txt" 2>"$TMP_ROOT/sync.log" || { tail "$TMP_ROOT/sync.log" >&2; fail "run with PPRPC_GRAPH_CREATE_RUN=0 failed"; }
cmp -s "$TMP_ROOT/cpu.txt" "$TMP_ROOT/sync.txt" || fail "PPRPC_GRAPH_CREATE_RUN=0: tokens differ from the CPU run"
waited=$(sed -n 's/.*pprpc: PPRPC0: graphs [0-9]* created, .* freed, \([0-9]*\) creates waited for.*/\1/p' "$TMP_ROOT/pprpc.log")
echo "creates not waited for: $(grep -o 'PPRPC0: graphs [^;]*' "$TMP_ROOT/pprpc.log"); PPRPC_GRAPH_CREATE_RUN=0: tokens identical"
[ -n "$waited" ] || fail "the plugin's counters lack the creates waited for"
# decode re-runs the last graph: recognised without serializing it (replay.c)
unser=$(sed -n 's/.*pprpc: PPRPC0: graphs [0-9]* created, [0-9]* run ([0-9]* from the cache, \([0-9]*\) of them unserialized).*/\1/p' "$TMP_ROOT/pprpc.log")
[ "${unser:-0}" -gt 0 ] || fail "no run of the last graph was recognised without serializing it"
# a create the rank refuses (a third rank with max-conn-graphs 2): the run
# queued with it fails the rank's streams, and the tool ends with the
# reason instead of going on with outputs nothing computed
start_rank --max-conn-graphs 2 || fail "cannot start rank 2"
GGML_BACKEND_PATH=$(realpath "$PLUGIN") PPRPC_RANKS=${RANK_ADDRS[2]} "$LC" "${gen[@]}" -ngl 99 -dev PPRPC0 -lv 4 \
	>"$TMP_ROOT/refused.txt" 2>"$TMP_ROOT/refused.log"
rc=$?
[ $rc != 0 ] || fail "a refused GGML_GRAPH_CREATE went unnoticed (the tool exited 0)"
grep -q "connection graph limit (2) reached" "$TMP_ROOT/refused.log" ||
	{ tail -n 5 "$TMP_ROOT/refused.log" >&2; fail "a refused create: the tool did not say why"; }
echo "refused create: exit $rc, $(grep -m1 -o 'pprpc: .*connection graph limit.*' "$TMP_ROOT/refused.log" | cut -c1-240)"
echo "generate: passed (64 tokens identical to the CPU with the default graph cache, with 2 graphs per device and with synchronous creates; a refused create ends the tool with its reason)"
