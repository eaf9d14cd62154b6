#!/usr/bin/env bash
# tests/fuzz/seed-ggml-graphs.sh — llama.cpp's own graphs as seeds of the
# ggml engine's fuzzer: test-llama-archs (random-weight models of the
# architectures below) and llama-completion on the generated kimi-linear
# model run through the plugin against one pprpcd rank, the plugin dumping
# every graph it creates (PPRPC_DUMP_GRAPHS); each distinct graph becomes a
# corpus input tests/fuzz/corpus/fuzz_ggml_graph/llama-<arch>-<hash>: byte 0
# = 6 (a packed message, run it, buffers sized to it), byte 1 = a fill seed.
# At most PER_ARCH (default 4) graphs per architecture, the largest.
#
#   tests/fuzz/seed-ggml-graphs.sh [ARCH...]     (make fuzz-seed-ggml)
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh
TLA=$LLAMA_BIN/test-llama-archs
LC=$LLAMA_BIN/llama-completion
require_llama "seed-ggml-graphs" "$TLA" "$LC"
out=tests/fuzz/corpus/fuzz_ggml_graph
per=${PER_ARCH:-4}
archs=${*:-"llama qwen3 qwen3moe qwen35 qwen35moe qwen3next kimi-linear deepseek2 gemma3 mamba2 granitehybrid t5 minimax-m3 qwen4exp"}

start_rank || fail "cannot start the rank"
n=0
for a in $archs kimi-linear-gen; do
	dump=$TMP_ROOT/dump-$a
	mkdir -p "$dump"
	if [ $a = kimi-linear-gen ]; then
		LLAMA_DIR=$(dirname "$(dirname "$LLAMA_BIN")") bench/model-gen/gen-model --arch kimi-linear --preset tiny \
			--seed 1 -o "$TMP_ROOT/k.gguf" >/dev/null || fail "gen-model failed"
		PPRPC_DUMP_GRAPHS=$dump with_plugin "$LC" -m "$TMP_ROOT/k.gguf" -p "the quick brown fox" -n 4 -c 256 \
			-b 64 -ub 16 -no-cnv -t 1 --simple-io --no-warmup -ngl 99 >/dev/null 2>&1 || fail "llama-completion failed"
	else
		PPRPC_DUMP_GRAPHS=$dump with_plugin "$TLA" -a "$a" -s 42 >/dev/null 2>&1 || echo "note: test-llama-archs -a $a exited $?"
	fi
	# the largest distinct graphs of this architecture
	for f in $(ls -S "$dump"/*.pb 2>/dev/null); do
		h=$(sha256sum <"$f" | cut -c1-12)
		[ -e "$out/llama-$a-$h" ] && continue
		[ "$(ls "$out"/llama-$a-* 2>/dev/null | wc -l)" -lt "$per" ] || break
		{ printf '\006'; printf "\\$(printf '%03o' $((0x${h:0:2} & 0x7f)))"; cat "$f"; } >"$out/llama-$a-$h"
		n=$((n + 1))
	done
done
echo "seed-ggml-graphs: $n new inputs in $out ($(ls "$out"/llama-* | wc -l) llama-* in all)"
