#!/usr/bin/env bash
# tests/llama/weights.sh — weights from the ranks' own storage (issue 30):
# the same model loaded over two ranks with and without rank-side weights
# gives the CPU's tokens, and every way a rank's copy can be wrong falls
# back to sending the bytes with the reason said.
#
#   file        each rank has a copy of the model in its --model-dir: each
#               rank maps its share of it as one buffer (STATS map_bytes;
#               llama.cpp's buffer_from_host_ptr), the client sends almost
#               nothing; the regions its graphs read are read ahead
#               (ahead_asked), and not with --map-read-ahead 0
#   recall      the same ranks restarted: the plugin's connection makes each
#               read again what its last load's graphs read (map-recall)
#   file, read  the same with PPRPC_WEIGHTS_MAP=off: the ranks fill every
#               large weight from their copy (STATS file_bytes); and a rank
#               with --map-model-files 0 reads while the other maps
#   cache cold  --weights-cache, empty: the client sends, the ranks store
#   cache warm  the same folders again: filled from the cache, nothing sent
#   mismatch    the copy has the model's size and head but one byte differs
#               further on: its content hash differs, nothing is filled from it
#   truncated   the copy is shorter: no file with that identity
#   bad entry   a cache entry truncated: a miss, the entry removed (cache_bad)
#   outside     model-dir holds only a symlink to the model elsewhere: never
#               followed (strace, when there, shows the target never opened)
#   changed     the copy verified by a first load, then rewritten (same size):
#               the second load does not take it
# Every refusal is also a refused mapping (STATS maps 0, the plugin says
# why).  Every case: the tokens equal the CPU's.  The cache's kill -9 mid-write is
# test_weights' (tests/unit/test_weights.c).
set -u
cd "$(dirname "$0")/../.."
. tests/llama/lib.sh

LC=$LLAMA_BIN/llama-completion
require_llama "weights" "$LC"
command -v python3 >/dev/null || fail "python3 is needed"

LLAMA_DIR=$(dirname "$(dirname "$LLAMA_BIN")") bench/model-gen/gen-model --arch llama --preset tiny --seed 1 \
	-o "$TMP_ROOT/model.gguf" >/dev/null || fail "gen-model failed"
MODEL=$TMP_ROOT/model.gguf
SIZE=$(stat -c %s "$MODEL")
args=(-m "$MODEL" -p "the quick brown fox jumps over" -n 16 --temp 0 --ignore-eos -c 256 -no-cnv -t 1
	--simple-io --no-display-prompt --no-warmup)
"$LC" "${args[@]}" -ngl 0 >"$TMP_ROOT/cpu.txt" 2>"$TMP_ROOT/cpu.log" || fail "the CPU run failed"
[ -s "$TMP_ROOT/cpu.txt" ] || fail "the CPU run printed nothing"

# stat NAME FIELD...: a rank's weights counters and its clients' bytes_in, as "name=value" lines
rank_stats() {
	"$PPRPCCTL" stats --rank "$1" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
s = s[0] if isinstance(s, list) else s
w = s.get("weights", {})
print(" ".join("%s=%s" % (k, w.get(k, 0)) for k in ("maps", "map_bytes", "fills", "fills_failed", "file_bytes", "file_refused",
      "cache_hits", "cache_hit_bytes", "cache_misses", "cache_bad", "cache_stores", "cache_store_bytes",
      "ahead_asked", "ahead_bytes")))'
}
val() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# the weight bytes the plugin sent in run NAME (its summary lines, both ranks), in KiB
sent_kib() {
	sed -n 's/.*pprpc: weights loaded: rank [0-9]* .* \([0-9.]*\) MiB sent.*/\1/p' "$TMP_ROOT/$1.log" |
		awk '{ s += $1 } END { printf "%d\n", s * 1024 }'
}

# run NAME RANK_FLAGS_0 -- RANK_FLAGS_1: two fresh ranks, one generation, tokens vs the CPU; leaves
# STATS0/STATS1 and $TMP_ROOT/NAME.log
run() {
	local name=$1; shift
	local f0=() f1=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do f0+=("$1"); shift; done
	shift
	f1=("$@")
	stop_ranks
	RANK_PIDS=(); RANK_ADDRS=()
	start_rank "${f0[@]}" || fail "$name: cannot start rank 0"
	start_rank "${f1[@]}" || fail "$name: cannot start rank 1"
	with_plugin "$LC" "${args[@]}" -ngl 99 -dev PPRPC0,PPRPC1 -ts 1,1 >"$TMP_ROOT/$name.txt" 2>"$TMP_ROOT/$name.log" ||
		{ tail -n 20 "$TMP_ROOT/$name.log"; fail "$name: the run failed"; }
	cmp -s "$TMP_ROOT/cpu.txt" "$TMP_ROOT/$name.txt" || fail "$name: tokens differ from the CPU's"
	STATS0=$(rank_stats "${RANK_ADDRS[0]}")
	STATS1=$(rank_stats "${RANK_ADDRS[1]}")
	echo "$name: tokens = the CPU's; rank 0: $STATS0"
	echo "$name: rank 1: $STATS1"
	grep "pprpc: weights" "$TMP_ROOT/$name.log" | head -n 4
}

mkdir -p "$TMP_ROOT"/{md0,md1,c0,c1,bad,short,link0,outside}
cp "$MODEL" "$TMP_ROOT/md0/model.gguf"
cp "$MODEL" "$TMP_ROOT/md1/model.gguf"

# 1. the model's copy on each rank: mapped
run file --model-dir "$TMP_ROOT/md0" -- --model-dir "$TMP_ROOT/md1"
for s in "$STATS0" "$STATS1"; do
	# two maps: a page the plugin asks for first (does the rank have the file?), then the range
	[ "$(val "$s" maps)" = 2 ] && [ "$(val "$s" map_bytes)" -gt $((SIZE / 4)) ] ||
		fail "file: a rank mapped $(val "$s" map_bytes) bytes of its copy: $s"
	[ "$(val "$s" file_bytes)" = 0 ] && [ "$(val "$s" fills_failed)" = 0 ] || fail "file: read or failed fills: $s"
	# what the graphs read of the mapping, read ahead: a device's layers, not more than it mapped
	[ "$(val "$s" ahead_asked)" -gt $((SIZE / 4)) ] && [ "$(val "$s" ahead_asked)" -le "$(val "$s" map_bytes)" ] &&
		[ "$(val "$s" ahead_bytes)" -gt 0 ] || fail "file: the graphs' weights were not read ahead: $s"
done
grep -q "pprpc: weights loaded: rank 0 .* MiB mapped in 1 ranges .* of model.gguf" "$TMP_ROOT/file.log" ||
	fail "file: no summary of the load in the plugin's log"
# nothing sent: a mapped buffer holds every weight of the device, norms too
echo "file: the plugin sent $(sent_kib file) KiB of weights to the ranks (the model: $((SIZE / 1024)) KiB)"
[ "$(sent_kib file)" = 0 ] || fail "file: the client sent $(sent_kib file) KiB of weights"
[ -s "$TMP_ROOT/md0/model.gguf.pprpc-sum" ] || fail "file: no sidecar beside the rank's copy"

# 1a. the same ranks' next start: each kept what its graphs read (model-dir/.pprpc-last-load)
# and reads it again as soon as the plugin connects, before llama.cpp has read its own copy
FILE_STATS0=$STATS0
for d in md0 md1; do
	[ -s "$TMP_ROOT/$d/.pprpc-last-load" ] || fail "file: no record of the load in $d"
done
run recall --model-dir "$TMP_ROOT/md0" -- --model-dir "$TMP_ROOT/md1"
for i in 0 1; do
	log=${RANK_DIRS[$((${#RANK_DIRS[@]} - 2 + i))]}/log
	grep -q "weights: reading ahead what the last load read: model.gguf" "$log" ||
		fail "recall: rank $i did not read the last load's regions ahead: $(tail -n 5 "$log")"
done
# the recall's regions, then the graphs' own asks (found cached)
[ "$(val "$STATS0" ahead_asked)" -gt "$(val "$FILE_STATS0" ahead_asked)" ] ||
	fail "recall: rank 0 asked no more ahead than without a record: $STATS0"

# 1b. the same, read instead of mapped
export PPRPC_WEIGHTS_MAP=off
run file-read --model-dir "$TMP_ROOT/md0" -- --model-dir "$TMP_ROOT/md1"
unset PPRPC_WEIGHTS_MAP
for s in "$STATS0" "$STATS1"; do
	[ "$(val "$s" maps)" = 0 ] || fail "file-read: a rank mapped with PPRPC_WEIGHTS_MAP=off: $s"
	[ "$(val "$s" file_bytes)" -gt $((SIZE / 4)) ] || fail "file-read: a rank read $(val "$s" file_bytes) bytes from its copy"
	[ "$(val "$s" fills_failed)" = 0 ] || fail "file-read: fills failed: $s"
done
grep -q "pprpc: weights loaded: rank 0 .* read from its copy of model.gguf" "$TMP_ROOT/file-read.log" ||
	fail "file-read: no summary of the load in the plugin's log"
# the weights the client still sent: the tensors under PPRPC_WEIGHTS_MIN (norms), not the rest
echo "file-read: the plugin sent $(sent_kib file-read) KiB of weights to the ranks"
[ "$(sent_kib file-read)" -lt $((SIZE / 1024 / 20)) ] || fail "file-read: the client sent $(sent_kib file-read) KiB of weights"

run file-nomap --model-dir "$TMP_ROOT/md0" --map-model-files 0 -- --model-dir "$TMP_ROOT/md1" --map-read-ahead 0
[ "$(val "$STATS0" maps)" = 0 ] && [ "$(val "$STATS0" file_bytes)" -gt $((SIZE / 4)) ] ||
	fail "file-nomap: rank 0 (map-model-files 0) did not read its copy: $STATS0"
[ "$(val "$STATS1" maps)" = 2 ] || fail "file-nomap: rank 1 did not map its copy: $STATS1"
[ "$(val "$STATS1" ahead_asked)" = 0 ] || fail "file-nomap: rank 1 (map-read-ahead 0) read ahead: $STATS1"

# 2. the cache, cold then warm
run cache-cold --weights-cache "$TMP_ROOT/c0" -- --weights-cache "$TMP_ROOT/c1"
for s in "$STATS0" "$STATS1"; do
	[ "$(val "$s" cache_stores)" -gt 0 ] || fail "cache-cold: nothing stored: $s"
	[ "$(val "$s" cache_hits)" = 0 ] || fail "cache-cold: hits in an empty cache: $s"
done
run cache-warm --weights-cache "$TMP_ROOT/c0" -- --weights-cache "$TMP_ROOT/c1"
for s in "$STATS0" "$STATS1"; do
	[ "$(val "$s" cache_hits)" -gt 0 ] && [ "$(val "$s" fills_failed)" = 0 ] || fail "cache-warm: $s"
done
echo "cache-warm: the plugin sent $(sent_kib cache-warm) KiB of weights to the ranks"
[ "$(sent_kib cache-warm)" -lt $((SIZE / 1024 / 20)) ] || fail "cache-warm: the client sent $(sent_kib cache-warm) KiB"
[ "$(sent_kib cache-cold)" -gt $((SIZE / 1024 / 4)) ] || fail "cache-cold: the client sent only $(sent_kib cache-cold) KiB"

# 3. a copy that differs past its head: same size, same head hash
cp "$MODEL" "$TMP_ROOT/bad/model.gguf"
printf '\x5a' | dd of="$TMP_ROOT/bad/model.gguf" bs=1 seek=$((SIZE - 4096)) conv=notrunc 2>/dev/null
run mismatch --model-dir "$TMP_ROOT/bad" -- --model-dir "$TMP_ROOT/md1"
[ "$(val "$STATS0" file_bytes)" = 0 ] && [ "$(val "$STATS0" fills_failed)" -gt 0 ] && [ "$(val "$STATS0" maps)" = 0 ] ||
	fail "mismatch: rank 0 filled from or mapped a copy whose content differs: $STATS0"
grep -q "not filled by the rank" "$TMP_ROOT/mismatch.log" || fail "mismatch: the plugin did not say why it sent"
grep -q "no copy of model.gguf to map (.*other content)" "$TMP_ROOT/mismatch.log" ||
	fail "mismatch: the plugin did not say why it did not map"

# 4. a truncated copy
head -c $((SIZE - 65536)) "$MODEL" >"$TMP_ROOT/short/model.gguf"
run truncated --model-dir "$TMP_ROOT/short" -- --model-dir "$TMP_ROOT/md1"
[ "$(val "$STATS0" file_bytes)" = 0 ] && [ "$(val "$STATS0" fills_failed)" -gt 0 ] && [ "$(val "$STATS0" maps)" = 0 ] ||
	fail "truncated: rank 0 filled from or mapped a truncated copy: $STATS0"

# 5. a cache entry cut short (a host crash after the rename, a disk error)
entry=$(find "$TMP_ROOT/c0" -path '*/tmp' -prune -o -type f -size +64k -print | grep -v -e '/sums/' -e '\.pprpc-sum' | head -n 1)
[ -n "$entry" ] || fail "bad entry: no cache entry to damage in $TMP_ROOT/c0"
truncate -s $(($(stat -c %s "$entry") / 2)) "$entry"
run bad-entry --weights-cache "$TMP_ROOT/c0" -- --weights-cache "$TMP_ROOT/c1"
[ "$(val "$STATS0" cache_bad)" -ge 1 ] || fail "bad entry: the damaged entry was not found bad: $STATS0"

# 6. a symlink out of model-dir
cp "$MODEL" "$TMP_ROOT/outside/model.gguf"
ln -s "$TMP_ROOT/outside/model.gguf" "$TMP_ROOT/link0/model.gguf"
if command -v strace >/dev/null; then
	PPRPCD_REAL=$PPRPCD
	PPRPCD="$TMP_ROOT/pprpcd-traced"
	printf '#!/bin/sh\nexec strace -f -qq -e trace=open,openat,openat2 -o %s/strace.out %s "$@"\n' "$TMP_ROOT" \
		"$PPRPCD_REAL" >"$PPRPCD"
	chmod +x "$PPRPCD"
	run outside --model-dir "$TMP_ROOT/link0" -- --model-dir "$TMP_ROOT/md1"
	PPRPCD=$PPRPCD_REAL
	# the ranks' PIDs are strace's: stop the daemons it traces (a SIGTERM
	# to strace alone would detach and leave them running)
	for p in "${RANK_PIDS[@]}"; do pkill -TERM -P "$p"; done
	grep -q "outside/model.gguf" "$TMP_ROOT/strace.out" && fail "outside: a rank opened the file behind the symlink"
	echo "outside: strace: the symlink's target was never opened"
else
	run outside --model-dir "$TMP_ROOT/link0" -- --model-dir "$TMP_ROOT/md1"
	echo "outside: strace not installed: the target's opening is not traced"
fi
[ "$(val "$STATS0" file_bytes)" = 0 ] && [ "$(val "$STATS0" fills_failed)" -gt 0 ] && [ "$(val "$STATS0" maps)" = 0 ] ||
	fail "outside: rank 0 filled or mapped through a symlink out of model-dir: $STATS0"

# 7. a copy verified by a load, then rewritten with other bytes (same size)
run changed-before --model-dir "$TMP_ROOT/md0" -- --model-dir "$TMP_ROOT/md1"
[ "$(val "$STATS0" map_bytes)" -gt 0 ] || fail "changed: the first load did not use the copy"
cp "$TMP_ROOT/bad/model.gguf" "$TMP_ROOT/md0/model.gguf.new"
cat "$TMP_ROOT/md0/model.gguf.new" >"$TMP_ROOT/md0/model.gguf"   # in place: same inode, new bytes
rm -f "$TMP_ROOT/md0/model.gguf.new"
run changed --model-dir "$TMP_ROOT/md0" -- --model-dir "$TMP_ROOT/md1"
[ "$(val "$STATS0" file_bytes)" = 0 ] && [ "$(val "$STATS0" fills_failed)" -gt 0 ] && [ "$(val "$STATS0" maps)" = 0 ] ||
	fail "changed: rank 0 filled from or mapped a copy rewritten since it was verified: $STATS0"

echo "weights: passed (file mapped, file read, cache cold and warm: the CPU's tokens, the weights not sent; mismatch, truncated, bad cache entry, symlink out of model-dir, changed file: refused and sent)"
