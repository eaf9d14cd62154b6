#!/usr/bin/env bash
# tests/gpu/amx-probe.sh — on a lent machine whose CPU has AMX (the H200
# hosts' Xeons): the local side of the main job with ggml-cpu's real AMX
# buffer type, released and patched (scripts/llama-patches/amx-2d-weights.patch).
#
#   tests/gpu/amx-probe.sh DIR
#
# DIR (made here, carried): bin/ with llama-completion, libllama*, libggml*,
# every libggml-cpu-*.so and libgomp; libggml-cpu-sapphirerapids.{upstream,patched}.so;
# gguf-py/gguf/constants.py for the model generator.  Runs the kimi-linear
# and llama models of `make run` / tests/llama/amx.sh with -dev none, with
# each sapphirerapids build in turn, and prints exit status, the scheduler
# assert if any, llama.cpp's AMX buffer line and a hash of the tokens.
set -u
cd "$(dirname "$0")/../.."
dir=$(realpath "$1")
export LD_LIBRARY_PATH=$dir/bin
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "AMX flags: $(grep -m1 -o -w 'amx_tile\|amx_int8\|amx_bf16' /proc/cpuinfo | tr '\n' ' ')"
tmp=$(mktemp -d)
gen=(-p "the quick brown fox jumps over the lazy dog" -n 16 --temp 0 --ignore-eos -c 256 -b 64 -ub 16 -no-cnv -t 4
	--simple-io --no-display-prompt --no-warmup -dev none -lv 4)
for arch in kimi-linear llama; do
	GGUF_PY=$dir/gguf-py bench/model-gen/gen-model --arch $arch --preset tiny --seed 1 -o "$tmp/$arch.gguf" >/dev/null ||
		{ echo "gen-model $arch failed"; continue; }
	for v in upstream patched; do
		cp "$dir/libggml-cpu-sapphirerapids.$v.so" "$dir/bin/libggml-cpu-sapphirerapids.so"
		"$dir/bin/llama-completion" -m "$tmp/$arch.gguf" "${gen[@]}" >"$tmp/out" 2>"$tmp/log"
		rc=$?
		echo "$arch $v: exit $rc, CPU features: $(grep -o 'AVX512 = 1\|AMX_INT8 = 1' "$tmp/log" | sort -u | tr '\n' ' ')buffers: $(grep -o '[A-Za-z_]* model buffer size = *[0-9.]* MiB' "$tmp/log" | sed 's/ model buffer size = */=/' | tr '\n' ' ') $(grep -o 'GGML_ASSERT.*' "$tmp/log" | head -n 1) tokens $(sha256sum <"$tmp/out" | cut -c1-16)"
	done
	"$dir/bin/llama-completion" -m "$tmp/$arch.gguf" "${gen[@]}" -nr >"$tmp/out" 2>"$tmp/log"
	echo "$arch --no-repack (no extra buffer types): exit $?, tokens $(sha256sum <"$tmp/out" | cut -c1-16)"
done
rm -rf "$tmp"
