#!/usr/bin/env bash
# tests/llama/netbench.sh — the model-load benchmark over a shaped network, short
# form: bench/llama-vs-rpc/llama-vs-rpc --net 1gbit --load-only on the tiny llama,
# one round.  Passes when the benchmark exits 0 (every load and hash run
# succeeded, the token hash is equal on every side), its JSON holds a cold and a
# warm load time for every side, pprpc-file's CPU ranks mapped their copies
# (the plugin's summary), and every network namespace it made is gone
# afterwards.  Needs root and iproute2 (ip netns, veth, tc tbf); without them it
# says why and skips.  Then, where block-I/O cgroups are to be had, the same
# with --disk-rate (a disk of its own for the client and each rank).
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

# Every side: local, pprpc pushing the weights, pprpc with rank-side weights
# (a copy in model-dir; the cache cold, then restarted, then warm), ggml-rpc.
SIDES=${NETBENCH_SIDES:-local,pprpc,pprpc-file,pprpc-cache,rpc}

skip() { echo "netbench: skipped: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "not root (network namespaces, veth and tc need it)"
command -v ip >/dev/null || skip "no ip(8) (iproute2)"
command -v tc >/dev/null || skip "no tc(8) (iproute2)"
command -v python3 >/dev/null || skip "no python3"
probe=pprpc-netbench-probe-$$
ip netns add "$probe" 2>/dev/null || skip "cannot create a network namespace (ip netns add failed)"
ip netns del "$probe"
require_llama "netbench" "$LLAMA_BIN/llama-completion" "$LLAMA_BIN/llama-bench" "$LLAMA_BIN/ggml-rpc-server"

LLAMA_DIR=$(dirname "$(dirname "$LLAMA_BIN")") bench/model-gen/gen-model --arch llama --preset tiny --seed 1 -j 1 \
	-o "$TMP_ROOT/model.gguf" >/dev/null || fail "gen-model failed"

# in the background only to know its PID: the namespaces are named lvr<PID>-*
bench/llama-vs-rpc/llama-vs-rpc --model "$TMP_ROOT/model.gguf" --llama-bin "$LLAMA_BIN" --pprpc-build "$BUILD" \
	--net 1gbit --load-only --rounds 1 --sides "$SIDES" --workdir "$TMP_ROOT/bench" \
	--json "$TMP_ROOT/bench.json" >"$TMP_ROOT/bench.out" 2>"$TMP_ROOT/bench.err" &
pid=$!
wait "$pid"
rc=$?
cat "$TMP_ROOT/bench.out"

left=$(ip netns list | awk '{ print $1 }' | grep -E "^lvr$pid-" || true)
if [ -f "$TMP_ROOT/bench.json" ]; then
	named=$(python3 - "$TMP_ROOT/bench.json" <<'PY'
import json, sys
n = json.load(open(sys.argv[1]))["config"]["net"]
print("\n".join([n["switch"], n["client"]["ns"]] + list(n["ranks"])))
PY
)
	for ns in $named; do
		ip netns list | awk '{ print $1 }' | grep -qx "$ns" && left="$left $ns"
	done
fi
if [ -n "$left" ]; then
	for ns in $left; do ip netns del "$ns" 2>/dev/null; done
	fail "namespaces left after the benchmark: $left"
fi

if [ "$rc" != 0 ]; then
	tail -n 30 "$TMP_ROOT/bench.err" >&2
	fail "llama-vs-rpc --net exited with $rc"
fi
python3 - "$TMP_ROOT/bench.json" "$SIDES" <<'PY' || fail "the load figures are incomplete"
import json, sys
r = json.load(open(sys.argv[1]))
L = r["summary"]["load"]["sides"]
for s in sys.argv[2].split(","):
    d = L.get(s)
    if not d or not d["cold_s"] or not d["warm_s"] or d["cold_s"] <= 0 or d["warm_s"] <= 0:
        sys.exit("%s: no cold/warm load time: %s" % (s, d))
if not r["summary"]["hash_match"]:
    sys.exit("token hashes differ")
if not r["config"]["net"]["ranks"] or r["link_check"]["bits_per_s"] <= 0:
    sys.exit("no rank namespaces or no link check")
print("netbench: load cold/warm s: " + ", ".join("%s %.2f/%.2f" % (s, L[s]["cold_s"], L[s]["warm_s"])
                                               for s in sys.argv[2].split(",")))
PY
if echo ",$SIDES," | grep -q ",pprpc-file,"; then
	n=$(cat "$TMP_ROOT"/bench/*-pprpc-file-load-warm.err | grep -c "pprpc: weights loaded: rank [01] .* MiB mapped in 1 ranges")
	[ "$n" = 2 ] || { grep -h "pprpc: weights" "$TMP_ROOT"/bench/*-pprpc-file-load-warm.err >&2
		fail "pprpc-file: the two ranks did not both map their copy ($n summaries say so)"; }
fi
# Disks of their own (--disk-rate), where this host has block-I/O cgroups and the model a
# block device: local and pprpc-file, one round, every cgroup gone afterwards.
why=$(python3 - "$TMP_ROOT/model.gguf" <<'PY'
import sys
sys.path.insert(0, "bench/llama-vs-rpc")
import diskrate
why = diskrate.unavailable()
if not why:
    try:
        diskrate.disk_of(sys.argv[1])
    except (OSError, diskrate.DiskError) as e:
        why = str(e)
print(why or "")
PY
)
if [ -n "$why" ]; then
	echo "netbench: --disk-rate skipped: $why"
else
	bench/llama-vs-rpc/llama-vs-rpc --model "$TMP_ROOT/model.gguf" --llama-bin "$LLAMA_BIN" --pprpc-build "$BUILD" \
		--disk-rate 200 --load-only --rounds 1 --sides local,pprpc-file --workdir "$TMP_ROOT/bench-disk" \
		--json "$TMP_ROOT/bench-disk.json" >"$TMP_ROOT/bench-disk.out" 2>"$TMP_ROOT/bench-disk.err" &
	dpid=$!
	wait "$dpid"
	drc=$?
	[ "$drc" = 0 ] || { tail -n 30 "$TMP_ROOT/bench-disk.err" >&2; fail "llama-vs-rpc --disk-rate exited with $drc"; }
	cg=$(ls -d /sys/fs/cgroup/lvr"$dpid"-* /sys/fs/cgroup/*/lvr"$dpid"-* 2>/dev/null || true)
	[ -z "$cg" ] || fail "--disk-rate: cgroups left after the benchmark: $cg"
	grep -q "each process reading the model's disk as one of its own at 200 MB/s" "$TMP_ROOT/bench-disk.out" ||
		fail "--disk-rate: the report does not say the disks' rate"
	python3 - "$TMP_ROOT/bench-disk.json" <<'PY' || fail "--disk-rate: the load figures are incomplete"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["config"]["disk"]["rate_mbps"] == 200, r["config"]["disk"]
L = r["summary"]["load"]["sides"]
assert all(L[s]["cold_s"] and L[s]["warm_s"] for s in ("local", "pprpc-file")), L
assert r["summary"]["hash_match"]
print("netbench: --disk-rate 200: load cold/warm s: " + ", ".join("%s %.2f/%.2f" % (s, L[s]["cold_s"], L[s]["warm_s"])
                                                             for s in ("local", "pprpc-file")))
PY
fi
echo "netbench: passed (namespaces: $(echo $named | wc -w) made, none left)"
