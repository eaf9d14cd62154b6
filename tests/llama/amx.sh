#!/usr/bin/env bash
# tests/llama/amx.sh — llama.cpp on a CPU with AMX, on any CPU: ggml-cpu's AMX
# extra buffer type emulated (amx_emul.so, an LD_PRELOAD shim; see its header)
# for the local run of the main job (llama-completion -dev none on the
# generated kimi-linear model of `make run`) and for a llama model.
#
#   1. AMX's rule as released: the run aborts (bash reports the abort) with the scheduler's
#      GGML_ASSERT(*cur_backend_id != -1), as reported on an AMX Xeon — the
#      emulation reproduces the failure, so step 2 is a test of the fix;
#   2. the rule with scripts/llama-patches/amx-2d-weights.patch: both models
#      run, weights were placed in the AMX buffer type, the nodes that use
#      them were accepted (none broadcasts a weight) and the tokens are those
#      of a run without the shim.
#
# On a host with AMX the patched ggml-cpu itself runs (the sapphirerapids
# variant); this test is what a host without AMX can check.
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

LC=$LLAMA_BIN/llama-completion
SHIM=$BUILD/tests/amx_emul.so
GEN=bench/model-gen/gen-model
require_llama "amx" "$LC" "$SHIM"

prompt="the quick brown fox jumps over the lazy dog"
gen=(-p "$prompt" -n 16 --temp 0 --ignore-eos -c 256 -b 64 -ub 16 -no-cnv -t 1 --simple-io --no-display-prompt
	--no-warmup -dev none -lv 4)

for arch in kimi-linear llama; do
	model=$TMP_ROOT/$arch.gguf
	LLAMA_DIR=$(dirname "$(dirname "$LLAMA_BIN")") "$GEN" --arch "$arch" --preset tiny --seed 1 -o "$model" >/dev/null ||
		fail "$GEN --arch $arch failed"
	"$LC" -m "$model" "${gen[@]}" >"$TMP_ROOT/$arch-plain.txt" 2>"$TMP_ROOT/$arch-plain.log" ||
		{ tail "$TMP_ROOT/$arch-plain.log" >&2; fail "$arch: the run without the shim failed"; }
	[ -s "$TMP_ROOT/$arch-plain.txt" ] || fail "$arch: the run without the shim generated nothing"

	PPRPC_AMX_RULE=upstream LD_PRELOAD=$(realpath "$SHIM") "$LC" -m "$model" "${gen[@]}" \
		>"$TMP_ROOT/$arch-up.txt" 2>"$TMP_ROOT/$arch-up.log"
	rc=$?
	if [ $arch = kimi-linear ]; then
		[ $rc != 0 ] && grep -q 'GGML_ASSERT(\*cur_backend_id != -1) failed' "$TMP_ROOT/$arch-up.log" ||
			{ tail "$TMP_ROOT/$arch-up.log" >&2; fail "$arch: AMX's released rule did not reproduce the scheduler's abort (exit $rc)"; }
		echo "$arch, AMX's rule as released: exit $rc, $(grep -o 'GGML_ASSERT.*' "$TMP_ROOT/$arch-up.log")"
	else
		[ $rc = 0 ] || { tail "$TMP_ROOT/$arch-up.log" >&2; fail "$arch: failed under AMX's released rule (exit $rc)"; }
	fi

	LD_PRELOAD=$(realpath "$SHIM") "$LC" -m "$model" "${gen[@]}" >"$TMP_ROOT/$arch-amx.txt" 2>"$TMP_ROOT/$arch-amx.log"
	rc=$?
	[ $rc = 0 ] || { tail "$TMP_ROOT/$arch-amx.log" >&2; fail "$arch: failed under the patched AMX rule (exit $rc)"; }
	line=$(grep -o 'amx-emul: rule patched: .*' "$TMP_ROOT/$arch-amx.log")
	read -r bufs accepted < <(echo "$line" | sed -n 's/.*: \([0-9]*\) AMX buffers, \([0-9]*\) nodes.*/\1 \2/p')
	echo "$arch, patched rule: $line"
	[ "${bufs:-0}" -gt 0 ] && [ "${accepted:-0}" -gt 0 ] || fail "$arch: nothing went to the AMX buffer type (the test would prove nothing)"
	grep -q "AMX model buffer size" "$TMP_ROOT/$arch-amx.log" || fail "$arch: llama.cpp reports no AMX model buffer"
	cmp -s "$TMP_ROOT/$arch-plain.txt" "$TMP_ROOT/$arch-amx.txt" || fail "$arch: tokens differ from the run without the shim"
done
echo "amx: passed (AMX's released rule aborts the kimi-linear run as reported; with the patch both models run, tokens unchanged)"
