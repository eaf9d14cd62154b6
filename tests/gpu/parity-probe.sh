#!/usr/bin/env bash
# tests/gpu/parity-probe.sh MODEL OUT [DEV] — where the greedy tokens of a
# model part: llama-completion --temp 0 -n 40 on the same prompt, six ways:
# local / pprpc (two pprpcd ranks serving ggml:DEV) / ggml-rpc (two
# ggml-rpc-server ranks on DEV), each with Flash Attention on and off.  For
# each: the first 160 characters, how many characters it shares with
# local (FA on), and what llama.cpp and the ranks said about where the ops
# went (ops llama.cpp moved to the CPU, the plugin's refusals at debug
# level, the ranks' request errors).  Logs are kept in OUT.
# Environment as for tests/llama/lib.sh (BUILD, LLAMA_BIN, PPRPCD, PLUGIN).
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh
if [ $# -lt 2 ] || [ ! -f "$1" ]; then
	echo "usage: tests/gpu/parity-probe.sh MODEL.gguf OUT [DEV]" >&2
	exit 2
fi
model=$1 out=$2 dev=${3:-CUDA0}
local_dev=${LOCAL_DEV:-$dev} # none: the CPU alone (a check of this script on a CPU host)
mkdir -p "$out"
LC=$LLAMA_BIN/llama-completion
RS=$LLAMA_BIN/ggml-rpc-server
require_llama "parity-probe" "$LC" "$RS"
RANK_DEVICE=ggml:$dev

prompt="the quick brown fox jumps over the lazy dog, then it runs far away into the green hills and"
gen=(-m "$model" -p "$prompt" -n 40 --temp 0 --ignore-eos -c 1024 -no-cnv --simple-io
	--no-display-prompt --no-warmup -ngl 99 -lv 4)

start_rank --log-level debug || fail "cannot start rank 0"
start_rank --log-level debug || fail "cannot start rank 1"
start_rpc_ranks 2 "$dev" "$out/rpc-rank"

run() { # NAME FA ARGS...
	local name=$1 fa=$2; shift 2
	local t0=$(date +%s%N)
	"$@" "${gen[@]}" -fa "$fa" >"$out/$name.txt" 2>"$out/$name.log"
	local rc=$?
	printf '%-14s exit %d, %.1f s\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))e-3"
}
for fa in on off; do
	run local-fa$fa $fa "$LC" -dev "$local_dev"
	for i in 0 1; do "$PPRPCCTL" stats --rank "${RANK_ADDRS[$i]}" >"$out/pprpc-fa$fa-stats$i.before" 2>&1; done
	run pprpc-fa$fa $fa with_plugin "$LC" -dev PPRPC0,PPRPC1 -ts 1,1
	for i in 0 1; do "$PPRPCCTL" stats --rank "${RANK_ADDRS[$i]}" >"$out/pprpc-fa$fa-stats$i.after" 2>&1; done
	run rpc-fa$fa $fa "$LC" --rpc "$RPC_ADDRS" -dev RPC0,RPC1 -ts 1,1
done
echo
echo "text (first 160 characters) and characters in common with local-faon:"
ref=$(cat "$out/local-faon.txt")
for n in local-faon local-faoff pprpc-faon pprpc-faoff rpc-faon rpc-faoff; do
	t=$(cat "$out/$n.txt")
	common=$(python3 -c 'import os, sys; print(len(os.path.commonprefix([sys.argv[1], sys.argv[2]])))' "$ref" "$t")
	printf '%-12s %4s  %s\n' "$n" "$common" "$(printf '%s' "$t" | head -c 160 | tr '\n' ' ')"
done
echo
for n in local-faon local-faoff pprpc-faon pprpc-faoff rpc-faon rpc-faoff; do
	echo "== $n: llama.cpp's placement and attention"
	grep -E "flash_attn|Flash Attention|usually due to missing support|graph splits|pipeline parallelism" "$out/$n.log" |
		sed 's/^[0-9.]* [A-Z] //' | sort | uniq -c | head -n 12
	grep -E "pprpc: .*(not supported|not offered|refused)" "$out/$n.log" | sed 's/^[0-9.]* [A-Z] //' |
		sort | uniq -c | sort -rn | head -n 12
done

# Teacher-forced logits of every configuration on one token sequence (the
# prompt and local's FA-on text), each against local FA on and local FA off.
LL=${LLAMA_LOGITS:-$BUILD/bin/llama-logits}
text="$prompt$(cat "$out/local-faon.txt")"
lg=(-m "$model" -p "$text" -c 1024 -ngl 99 --no-warmup -lv 2)
for fa in on off; do
	"$LL" "${lg[@]}" -fa $fa -dev "$local_dev" --logits-out "$out/L-local-fa$fa.bin" >"$out/L-local-fa$fa.log" 2>&1 ||
		echo "llama-logits local fa $fa failed"
	with_plugin "$LL" "${lg[@]}" -fa $fa -dev PPRPC0,PPRPC1 -ts 1,1 --logits-out "$out/L-pprpc-fa$fa.bin" \
		>"$out/L-pprpc-fa$fa.log" 2>&1 || echo "llama-logits pprpc fa $fa failed"
	"$LL" "${lg[@]}" -fa $fa --rpc "$RPC_ADDRS" -dev RPC0,RPC1 -ts 1,1 \
		--logits-out "$out/L-rpc-fa$fa.bin" >"$out/L-rpc-fa$fa.log" 2>&1 || echo "llama-logits rpc fa $fa failed"
done
echo
echo "teacher-forced logits, every position of the prompt + local-faon's text, against local FA on | off:"
python3 - "$out" <<'PY'
import os, sys
sys.path.insert(0, "bench/llama-vs-rpc")
import logits
out = sys.argv[1]
print("%-12s | %-38s | %-38s" % ("", "vs local-faon: NMSE top-1 1st-diff", "vs local-faoff: NMSE top-1 1st-diff"))
for n in ("local-faon", "local-faoff", "pprpc-faon", "pprpc-faoff", "rpc-faon", "rpc-faoff"):
    cells = []
    for ref in ("local-faon", "local-faoff"):
        try:
            r = logits.compare(os.path.join(out, "L-%s.bin" % n), os.path.join(out, "L-%s.bin" % ref))
            cells.append("%10.3g %3d/%-3d %8s" % (r["nmse"], r["top1_agree"], r["positions"],
                                                  r["first_divergence"] if r["first_divergence"] is not None else "none"))
        except Exception as e:
            cells.append(str(e)[:38])
    print("%-12s | %-38s | %-38s" % (n, cells[0], cells[1]))
PY

# Every node's sum (llama-eval-callback: the graph computed node by node,
# each result read back) on a short prompt: the first node where pprpc
# parts from local, with the same FA setting.
EC=$LLAMA_BIN/llama-eval-callback
if [ -x "$EC" ]; then
	ec=(-m "$model" -p "the quick brown fox" -n 1 -c 256 -ngl 99)
	for fa in on off; do
		"$EC" "${ec[@]}" -fa $fa -dev "$local_dev" >"$out/E-local-fa$fa.log" 2>&1 || echo "eval-callback local fa $fa failed"
		with_plugin "$EC" "${ec[@]}" -fa $fa -dev PPRPC0,PPRPC1 -ts 1,1 >"$out/E-pprpc-fa$fa.log" 2>&1 ||
			echo "eval-callback pprpc fa $fa failed"
	done
	python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
def nodes(path):
    res, cur = [], None
    for line in open(path, errors="replace"):
        m = re.search(r"common_debug_cb_eval:\s+(.*?) = \((\w+)\)\s+(\w+)\((.*)\) = \{(.*)\}", line)
        if m:
            cur = [m.group(1), m.group(3), m.group(5), m.group(4)]
            continue
        m = re.search(r"sum = (\S+)", line)
        if m and cur:
            res.append(cur + [float(m.group(1))])
            cur = None
    return res
for fa in ("on", "off"):
    for a, b in (("local", "pprpc"),):
        A, B = nodes("%s/E-%s-fa%s.log" % (out, a, fa)), nodes("%s/E-%s-fa%s.log" % (out, b, fa))
        print("eval-callback FA %s: %s %d nodes, %s %d nodes" % (fa, a, len(A), b, len(B)))
        shown = 0
        for i, (x, y) in enumerate(zip(A, B)):
            if x[0] != y[0] or x[1] != y[1]:
                print("  node %d: %s %s vs %s %s: the graphs differ here" % (i, x[0], x[1], y[0], y[1]))
                break
            if x[4] != y[4]:
                rel = abs(x[4] - y[4]) / max(abs(x[4]), 1e-30)
                print("  node %d %s %s {%s} (%s): sum %r vs %r (rel %.2g)" % (i, x[0], x[1], x[2], x[3][:80], x[4], y[4], rel))
                shown += 1
                if shown >= 6:
                    break
        else:
            print("  every common node's sum equal")
PY
fi
stop_rpc_ranks

echo
echo "== the ranks' request errors and what their logs say of refusals"
for i in 0 1; do
	grep -iE "request_errors|request errors" "$out"/pprpc-fa*-stats$i.* | head -n 8
	grep -iE "refus|invalid|error|warn" "${RANK_DIRS[$i]}/log" | grep -v " 0 errors$" | sed 's/^[^ ]* //' | sort | uniq -c | sort -rn | head -n 12
	cp "${RANK_DIRS[$i]}/log" "$out/pprpc-rank$i.log"
done
rm -f "$out"/*.bin
tar -czf "$out.tgz" -C "$(dirname "$out")" "$(basename "$out")" && rm -rf "$out"
