#!/usr/bin/env bash
# tests/gpu/qwen-model.sh OUT — issue 31's model class, made once per
# machine: a qwen3 of 3.75 B parameters (Qwen3-8B's widths with 13 layers),
# random weights, seed 1, quantized to Q4_K_M (`make-models --arch qwen3
# --preset h200 --set n_layer=13 --types q4_k`), in /tmp/models.  Prints its
# path; make-models' report goes to OUT/make-models.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$1
mkdir -p "$out" /tmp/models
# (made once: later calls on the same warm machine reuse it)
rep=/tmp/models/qwen3-q4k.json
[ -s "$rep" ] || bench/model-gen/make-models --arch qwen3 --preset h200 --set n_layer=13 --seed 1 \
	--types q4_k --no-check -o /tmp/models >"$rep.tmp" 2>"$out/make-models.err" ||
	{ tail "$out/make-models.err" >&2; exit 1; }
[ -s "$rep" ] || mv "$rep.tmp" "$rep"
cp "$rep" "$out/make-models.json"
model=$(python3 -c 'import json, sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j.get("type") == "q4_k":
        print(j["path"])' "$out/make-models.json")
[ -n "$model" ] || { echo "qwen-model: make-models named no Q4_K_M file: $(cat "$out/make-models.json")" >&2; exit 1; }
echo "$model"
