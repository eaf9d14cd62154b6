#!/bin/sh
# tests/vm/guest.sh — runs inside the Soft-RoCE guest (tests/vm/run.sh).
#
# 1. rxe0 on dummy0 (10.0.0.1, MTU 9000 -> RDMA MTU 4096)
# 2. the ring/credit unit tests (test_rdma_ring) on the guest
# 3. two pprpcd with --transport rdma; bench-rdma moves 256 MiB A -> B,
#    bit-exact, and proves from both daemons' STATS that the link is RDMA
#    on both large-payload paths (RDMA READ of bulk slots, message slots)
# 4. ib_write_bw / ib_read_bw / ib_write_lat on the same device for comparison
# 5. pp-fence-test (--transfer p2p) on two more RDMA daemons: PASS with
#    parity, and both ends' STATS show the boundary link and path as rdma
# 6. the memlock ladder: daemons as an unprivileged user under ulimit -l
#    64 MiB, 16 MiB, 8 MiB, 1 MiB -> requested (bulk slots, no zero-copy
#    region), smaller depth, one 256 KiB chunk, TCP fallback;
#    every transfer still bit-exact
# SECTIONS=all|bench|fence|ladder runs one part (for development).
# Prints CHECK lines and one RDMA-SUMMARY line; exit 0 iff all passed.
IP=10.0.0.1
# The throughput ratio to ib_write_bw is a measurement, printed, not a
# check: under TCG on a shared 2-core machine one boot gave 70%, 64% and
# 106% in three paired rounds.  MIN_RATIO=80 makes it a check again (on
# KVM, for a regression hunt).
MIN_RATIO=${MIN_RATIO:-}
FAILS=0
check() { # name rc [detail]
	if [ "$2" = 0 ]; then echo "CHECK PASS $1 $3"; else echo "CHECK FAIL $1 (rc=$2) $3"; FAILS=$((FAILS + 1)); fi
}
up() { cut -d' ' -f1 /proc/uptime; }

# 10.0.0.1 is not loopback, so the daemons insist on a shared key, as on a
# real cluster network: each daemon gets --auth-key-file, and every client
# (bench-rdma, pprpcctl) finds it through PPRPC_AUTH_KEY_FILE.  The ladder's
# daemons run as `user`, so the key file is that user's, mode 600.
KEY=/tmp/pprpc.key
# 48 bytes: a key file's trailing CR/LF are not part of the key, and 32
# random bytes ending in one would leave a key shorter than the 32 needed
head -c 48 /dev/urandom > $KEY 2>/dev/null || printf 'pprpc-guest-key-%016d' 0 > $KEY
chown 1000:1000 $KEY && chmod 600 $KEY
export PPRPC_AUTH_KEY_FILE=$KEY

# OpenBLAS (the CPU device's matmul) picks its kernels from CPUID; under
# TCG's qemu64 model it picked one that traps with an invalid opcode in the
# first MUL_MAT.  Prescott (SSE3) is what qemu64 really implements.
export OPENBLAS_CORETYPE=Prescott

ulimit -l unlimited
ip link set lo up
# (loading the dummy module may already have created dummy0)
[ -e /sys/class/net/dummy0 ] || ip link add dummy0 type dummy
ip link set dummy0 mtu "${MTU:-9000}" && ip addr add $IP/24 dev dummy0 && ip link set dummy0 up
rdma link add rxe0 type rxe netdev dummy0
check rxe_device $?
echo "RXE-READY at $(up)s"
GID=-1
for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
	i=${g##*/}
	[ "$(cat "$g" 2>/dev/null)" = "0000:0000:0000:0000:0000:ffff:0a00:0001" ] &&
		[ "$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/"$i" 2>/dev/null)" = "RoCE v2" ] && { GID=$i; break; }
done
echo "INFO rxe0 RoCE v2 GID index for $IP: $GID; $(ibv_devinfo -d rxe0 | grep -E 'active_mtu' | tr -s ' ')"

# ---- unit tests of the ring state machine -----------------------------------------------
test_rdma_ring > /tmp/unit.log 2>&1
check unit_test_rdma_ring $? "$(grep -E 'PASSED|FAILED' /tmp/unit.log | head -1)"

# ---- two daemons over RDMA ------------------------------------------------------------
# start NAME PORT TRANSPORT [MEMLOCK_KIB]: a daemon (as uid 1000 under a memlock
# limit when MEMLOCK_KIB is given); waits for its port file.
# DARGS: more daemon options.
start() {
	rm -f /tmp/$1.port
	cmd="pprpcd --listen $IP:$2 --port-file /tmp/$1.port --memory-floor-mib 0 --staging-mib 64 --threads 1 --transport $3 --log-level info --auth-key-file $KEY $DARGS"
	if [ -n "$4" ]; then
		su user -c "ulimit -l $4; exec /opt/pprpc/$cmd" > /tmp/$1.log 2>&1 &
	else
		$cmd > /tmp/$1.log 2>&1 &
	fi
	eval "PID_$1=$!"
	for i in $(seq 100); do [ -f /tmp/$1.port ] && return 0; sleep 0.1; done
	echo "daemon $1 did not start:"; cat /tmp/$1.log
	return 1
}
stop() { for n in "$@"; do eval "kill \$PID_$n 2>/dev/null; wait \$PID_$n 2>/dev/null"; done; }

case "${SECTIONS:-all}" in all|bench) ;; *) OURS=0; IBBW=0; RATIO=0; LINK=skipped ;; esac
# The default large-payload path (PPRPC_RDMA_BULK) as this build ships it.
DEF_BULK=$(pprpcd --check-config 2>/dev/null | sed -n 's/^rdma-bulk = //p')
case "${SECTIONS:-all}" in all|bench)
# A/B move large payloads by RDMA READ, C/D through the message slots.
DARGS="--rdma-bulk read"; start A 7001 rdma && start B 7002 rdma; rc=$?
DARGS="--rdma-bulk off"; [ $rc = 0 ] && start C 7003 rdma && start D 7004 rdma; rc=$?
DARGS=
check daemons_rdma_start $rc

# pair NAME SERVER CLIENT: both must exit 0; the client's output in /tmp/NAME.cli
pair() {
	timeout 60 sh -c "$2" > /tmp/$1.srv 2>&1 & s=$!
	sleep 0.5
	timeout 60 sh -c "$3" > /tmp/$1.cli 2>&1; c=$?
	wait $s; sv=$?
	[ $c = 0 ] && [ $sv = 0 ]
}
ibbw() { # [TOOL] message size -> Gb/s (BW average) of a 2 s ib_write_bw (or TOOL) on rxe0
	t=ib_write_bw; [ $# = 2 ] && { t=$1; shift; }
	BW="-d rxe0 -x $GID -F --report_gbits -D 2 -s $1"
	pair ${t}_$1 "$t $BW" "$t $BW $IP" || { echo 0; return 1; }
	# Let rxe finish tearing down perftest's QPs and MRs: measured, the
	# transfer right after ib_write_bw ran 55-70% of it without this pause
	# and 89-94% with 3 s (whichever of our paths came first).
	sleep $SETTLE
	awk '/^ *#bytes/{h=1; next} h && NF>=4 {print $4; exit}' /tmp/${t}_$1.cli
}
SETTLE=${SETTLE:-3}
pct() { awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN{ if (b > 0) printf "%.0f", 100 * a / b; else print 0 }'; }
gbps() { sed -n 's/^BENCH-RDMA: .*best_gbps=\([0-9.]*\).*/\1/p' "$1"; }
median3() { echo "$1 $2 $3" | tr ' ' '\n' | sort -n | sed -n 2p; }

# Throughput, paired: this machine is shared and TCG is noisy, so each
# round runs ib_write_bw (64 KiB messages, its default), our 256 MiB
# transfer through the message slots (C -> D), the same by RDMA READ of
# bulk slots (A -> B) and ib_read_bw, back to back in that order (each of
# ours next to its verbs baseline); ratios are taken per round, and the
# median of three rounds is reported.  The pass mark applies to the
# default path.
BAD=0
for r in 1 2 3; do
	b=$(ibbw 65536) || BAD=1
	timeout 200 bench-rdma --ranks $IP:7003,$IP:7004 --size 268435456 --reps 1 --lat-iters 5 --expect rdma > /tmp/benchs$r.log 2>&1 || BAD=1
	timeout 200 bench-rdma --ranks $IP:7001,$IP:7002 --size 268435456 --reps 1 --lat-iters 5 --expect rdma > /tmp/bench$r.log 2>&1 || BAD=1
	rb=$(ibbw ib_read_bw 65536) || BAD=1
	o=$(gbps /tmp/bench$r.log) so=$(gbps /tmp/benchs$r.log)
	q=$(pct "$o" "$b") sq=$(pct "$so" "$b") rq=$(pct "$o" "$rb")
	echo "INFO round $r: ib_write_bw ${b} Gb/s, ib_read_bw ${rb} Gb/s; ours 256 MiB: read path ${o} Gb/s (${q}% of write, ${rq}% of read), slot path ${so} Gb/s (${sq}% of write)"
	eval "IB$r=${b:-0} IR$r=${rb:-0} OR$r=${o:-0} OS$r=${so:-0} RR$r=$q RS$r=$sq RQ$r=$rq"
done
cat /tmp/bench1.log /tmp/benchs1.log
check transfer_256MiB_over_rdma_x3_bitexact_both_paths $BAD
# Which path moved the bytes, from B's and D's link counters (read_in).
rin=$(sed -n 's/^  B link to .* read_in=\([0-9]*\).*/\1/p' /tmp/bench1.log)
sin=$(sed -n 's/^  B link to .* read_in=\([0-9]*\).*/\1/p' /tmp/benchs1.log)
[ "${rin:-0}" -ge 268435456 ] && [ "${sin:-1}" = 0 ]
check bytes_by_path_read_vs_slots $? "read path: ${rin:-?} B by READ; slot path: ${sin:-?} B by READ"
IBBW=$(median3 $IB1 $IB2 $IB3)
IBRD=$(median3 $IR1 $IR2 $IR3)
OURS_READ=$(median3 $OR1 $OR2 $OR3) RATIO_READ=$(median3 $RR1 $RR2 $RR3) RATIO_READ_RD=$(median3 $RQ1 $RQ2 $RQ3)
OURS_SLOTS=$(median3 $OS1 $OS2 $OS3) RATIO_SLOTS=$(median3 $RS1 $RS2 $RS3)
if [ "$DEF_BULK" = read ]; then
	OURS=$OURS_READ RATIO=$RATIO_READ RA1=$RR1 RA2=$RR2 RA3=$RR3
else
	OURS=$OURS_SLOTS RATIO=$RATIO_SLOTS RA1=$RS1 RA2=$RS2 RA3=$RS3
fi
LINK=$(sed -n 's/^BENCH-RDMA: link=\([a-z?]*\).*/\1/p' /tmp/bench1.log)
echo "INFO ib_write_bw 512 KiB messages (our chunk size): $(ibbw 524288) Gb/s"

# Small-message latency: our whole 64 B stage-boundary path (client RPCs,
# daemon queues, the RDMA link) next to ib_write_lat's raw verbs round trip.
timeout 200 bench-rdma --ranks $IP:7001,$IP:7002 --size 4096 --reps 1 --lat-iters 200 --expect rdma > /tmp/lat.log 2>&1
check latency_run $? "$(grep '^latency' /tmp/lat.log)"
OURS_LAT=$(sed -n 's/^BENCH-RDMA: .*lat_p50_us=\([0-9.]*\).*/\1/p' /tmp/lat.log)
LAT="-d rxe0 -x $GID -F -s 64 -n 2000"
pair ib_write_lat "ib_write_lat $LAT" "ib_write_lat $LAT $IP"
check ib_write_lat $?
IBLAT=$(awk '/^ *#bytes/{h=1; next} h && NF>=5 {print $5; exit}' /tmp/ib_write_lat.cli)
echo "INFO ib_write_lat 64 B: t_typical ${IBLAT} us"

echo "---- pprpcctl stats (A, then B)"
pprpcctl stats --rank $IP:7001; pprpcctl stats --rank $IP:7002
echo "---- daemon logs (transport lines)"
grep -hE 'RDMA|rdma|link up|over' /tmp/A.log /tmp/B.log /tmp/C.log /tmp/D.log
stop A B C D
;; esac

# ---- large-payload paths head to head (SECTIONS=pathcmp, for tuning) ------------------------
# Alternating 256 MiB transfers on the READ path (P -> Q) and the slot path
# (R -> S), ROUNDS pairs; prints the per-round ratio read/slots.
case "${SECTIONS:-all}" in pathcmp)
DARGS="--rdma-bulk read"; start P 7021 rdma && start Q 7022 rdma
DARGS="--rdma-bulk off"; start R 7023 rdma && start S 7024 rdma
DARGS=
for r in $(seq ${ROUNDS:-6}); do
	bench-rdma --ranks $IP:7021,$IP:7022 --size 268435456 --reps 1 --lat-iters 2 --expect rdma > /tmp/pr.log 2>&1 || echo "read path run $r FAILED"
	bench-rdma --ranks $IP:7023,$IP:7024 --size 268435456 --reps 1 --lat-iters 2 --expect rdma > /tmp/ps.log 2>&1 || echo "slot path run $r FAILED"
	a=$(sed -n 's/^BENCH-RDMA: .*best_gbps=\([0-9.]*\).*/\1/p' /tmp/pr.log)
	b=$(sed -n 's/^BENCH-RDMA: .*best_gbps=\([0-9.]*\).*/\1/p' /tmp/ps.log)
	echo "INFO pathcmp round $r: read ${a} Gb/s, slots ${b} Gb/s, read/slots $(awk -v a=${a:-0} -v b=${b:-1} 'BEGIN{printf "%.0f", 100*a/b}')%"
done
grep -h "B link" /tmp/pr.log /tmp/ps.log
stop P Q R S
;; esac

# ---- this build against a baseline pprpcd (SECTIONS=abtest, PPRPCD_BASELINE) ---------------
# Alternating 256 MiB transfers between two baseline daemons (U -> V) and
# two candidates (this build, or PPRPCD_CANDIDATE) with the default
# settings (W -> X), ROUNDS pairs, the order swapped every round: a
# regression check of the transport, paired in one boot.
case "${SECTIONS:-all}" in abtest)
for n in U:7031:baseline V:7032:baseline W:7033:candidate X:7034:candidate; do
	d=${n%%:*} p=${n#*:}; p=${p%%:*}
	pprpcd-${n##*:} --listen $IP:$p --port-file /tmp/$d.port --memory-floor-mib 0 --staging-mib 64 \
		--threads 1 --transport rdma --log-level info --auth-key-file $KEY > /tmp/$d.log 2>&1 &
	eval "PID_$d=$!"
done
sleep 2
# odd rounds baseline first, even rounds the candidate first
for r in $(seq ${ROUNDS:-6}); do
	for w in $((r % 2)) $(((r + 1) % 2)); do
		if [ $w = 1 ]; then rk=$IP:7031,$IP:7032 out=/tmp/ab0.log; else rk=$IP:7033,$IP:7034 out=/tmp/ab1.log; fi
		bench-rdma --ranks $rk --size 268435456 --reps 1 --lat-iters 2 --expect rdma > $out 2>&1 || echo "run $r on $rk FAILED"
	done
	a=$(sed -n 's/^BENCH-RDMA: .*best_gbps=\([0-9.]*\).*/\1/p' /tmp/ab0.log)
	b=$(sed -n 's/^BENCH-RDMA: .*best_gbps=\([0-9.]*\).*/\1/p' /tmp/ab1.log)
	echo "INFO abtest round $r: baseline ${a} Gb/s, candidate ${b} Gb/s, candidate/baseline $(awk -v a=${a:-1} -v b=${b:-0} 'BEGIN{printf "%.0f", 100*b/a}')%"
done
stop U V W X
;; esac

# ---- pp-fence-test with 2 daemons over RDMA -------------------------------------------------
# Pipelined vs sequential through two stages whose boundary goes daemon to
# daemon (--transfer p2p): PASS needs parity and sentinels.  The link is
# proved from both daemons' STATS, not assumed: the second daemon's
# outbound link to the first and the first's inbound peer connection must
# both say rdma, and each side's boundary row must show the fence's
# transfers on the p2p-rdma path.  Sizes are small (TCG runs the matmuls):
# 4 micro-batches of 64 tokens x 256 channels, so each boundary is 64 KiB.
# Run twice: with the default settings, and with the bulk path forced on
# below the boundary size (--rdma-bulk read --rdma-bulk-threshold 16K),
# where the link's counters must show the boundaries moved by RDMA READ.
# fence N1 N2 PORT1 PORT2 BULK(default|read): sets FENCE, FENCE_LINK, FENCE_READ
fence() {
	if [ $5 = read ]; then DARGS="--rdma-bulk read --rdma-bulk-threshold 16K"; fi
	start $1 $3 rdma && start $2 $4 rdma; rc=$?
	DARGS=
	check fence_${5}_daemons_rdma_start $rc
	timeout 300 pp-fence-test --ranks $IP:$3,$IP:$4 --ubatches 4 --tokens 256 --width 256 \
		--layers-per-stage 1 --repeat 1 --transfer p2p > /tmp/fence$5.log 2>&1
	rc=$?
	cat /tmp/fence$5.log
	grep -q '^pp-fence-test: PASS (parity ok' /tmp/fence$5.log && [ $rc = 0 ] && FENCE=PASS || FENCE=FAIL
	[ $FENCE = PASS ]
	check pp_fence_test_p2p_pass_parity_$5 $? "rc=$rc $(grep '^pp-fence-test: [PF]' /tmp/fence$5.log)"
	pprpcctl stats --rank $IP:$3 > /tmp/$1.stats 2>&1; pprpcctl stats --rank $IP:$4 > /tmp/$2.stats 2>&1
	echo "---- pprpcctl stats ($1, then $2)"; cat /tmp/$1.stats /tmp/$2.stats
	# $2 (stage 1) pulls from $1: its "link" row, $1's "conn pprpcd-peer@" row.
	l2=$(awk '$1 == "link" {print $3; exit}' /tmp/$2.stats)
	l1=$(awk '$1 == "conn" && $2 ~ /^pprpcd-peer@/ {print $3; exit}' /tmp/$1.stats)
	b2=$(awk '$2 == "recv" && $3 == "p2p-rdma" && $4 > 0 {print $4; exit}' /tmp/$2.stats)
	b1=$(awk '$2 == "send" && $3 == "p2p-rdma" && $4 > 0 {print $4; exit}' /tmp/$1.stats)
	# bytes the link pulled by READ: its "bulk=" line, right after the link row
	FENCE_READ=$(awk '$1 == "link" {l = 1; next} l && /bytes_in read=/ {sub(/.*bytes_in read=/, ""); print $1 + 0; exit}' /tmp/$2.stats)
	echo "INFO fence ($5): $2 link ${l2:-none}, $1 peer conn ${l1:-none}, boundary transfers p2p-rdma recv ${b2:-0} send ${b1:-0}, ${FENCE_READ:-0} B by RDMA READ"
	[ "$l1" = rdma ] && [ "$l2" = rdma ] && [ -n "$b1" ] && [ -n "$b2" ] && FENCE_LINK=rdma || FENCE_LINK="${l2:-none}/${l1:-none}"
	[ "$FENCE_LINK" = rdma ]
	check pp_fence_test_boundary_over_rdma_$5 $? "link=$FENCE_LINK"
	if [ $5 = read ]; then
		[ "${FENCE_READ:-0}" -gt 0 ]
		check pp_fence_test_boundaries_by_rdma_read $? "${FENCE_READ:-0} B"
	fi
	if [ "$FENCE" != PASS ] || [ "$FENCE_LINK" != rdma ]; then
		echo "---- failed: daemon logs and kernel messages"; tail -n 30 /tmp/$1.log /tmp/$2.log; dmesg | tail -n 15
	else
		grep -hE 'RDMA|rdma|link up' /tmp/$1.log /tmp/$2.log
	fi
	stop $1 $2
}
FENCE=skipped FENCE_LINK=? FENCE_BULK=skipped
case "${SECTIONS:-all}" in all|fence)
fence G1 G2 7013 7014 read
FENCE_BULK="$FENCE/$FENCE_LINK/read=${FENCE_READ:-0}B"
fence F1 F2 7011 7012 default
;; esac

# ---- memlock ladder ------------------------------------------------------------------------
LADDER=""
case "${SECTIONS:-all}" in all|ladder)
port=7100
# The bulk path is on here (--rdma-bulk read): its slots and the staging
# region are registered only from what the rings leave of the budget, so
# at 64 MiB the rings and bulk slots fit but the 64 MiB staging region does
# not (bulk through the slots' copies), and below, bulk is off.
for kib in 65536 16384 8192 1024; do
	port=$((port + 2))
	if [ $kib = 1024 ]; then exp=tcp; else exp=rdma; fi
	DARGS="--rdma-bulk read"
	start L$kib $port auto $kib && start M$kib $((port + 1)) auto $kib
	rc=$?
	DARGS=
	if [ $rc = 0 ]; then
		timeout 120 bench-rdma --ranks $IP:$port,$IP:$((port + 1)) --size 33554432 --reps 1 --lat-iters 10 --expect $exp > /tmp/ladder$kib.log 2>&1
		rc=$?
	fi
	cat /tmp/ladder$kib.log
	grep -hE 'memlock|RDMA not used|link up' /tmp/L$kib.log /tmp/M$kib.log
	if [ $rc != 0 ]; then
		echo "---- failed: daemon logs and kernel messages"
		tail -n 25 /tmp/L$kib.log /tmp/M$kib.log; dmesg | tail -n 15
	fi
	step=$(grep -o 'memlock=[a-z0-9-]*' /tmp/ladder$kib.log | head -1 | cut -d= -f2)
	[ -n "$step" ] || step=$(grep -q 'transport=tcp fallback=' /tmp/ladder$kib.log && echo tcp-fallback)
	# bulk: read (slots registered, bytes moved by READ) or off
	rin=$(sed -n 's/^  B link to .* read_in=\([0-9]*\).*/\1/p' /tmp/ladder$kib.log)
	bulk=off; [ "${rin:-0}" -gt 0 ] && bulk=read
	if [ $kib = 65536 ] && [ $bulk != read ]; then rc=1; fi
	check "memlock_${kib}KiB_${exp}_bitexact" $rc "step=${step:-?} bulk=$bulk"
	sfx=; [ $exp = rdma ] && sfx=/bulk-$bulk
	LADDER="$LADDER ${kib}K=${step:-?}$sfx"
	stop L$kib M$kib
done
;; esac

if [ "$LINK" != skipped ]; then
	[ "$LINK" = rdma ]
	check bench_transport_is_rdma $? "link=$LINK"
	if [ -n "$MIN_RATIO" ]; then
		[ "${RATIO:-0}" -ge "$MIN_RATIO" ]
		check "throughput_vs_ib_write_bw_ge_${MIN_RATIO}pct" $? "${RATIO}%"
	else
		echo "MEASURE throughput_vs_ib_write_bw ${RATIO}% (not a check; MIN_RATIO=N makes it one)"
	fi
fi
[ $FAILS = 0 ] && R=PASS || R=FAIL
echo "RDMA-SUMMARY: transport=$LINK bulk_default=$DEF_BULK ours_256MiB=${OURS}Gb/s ib_write_bw=${IBBW}Gb/s ratio=${RATIO}% (median of 3 paired rounds: ${RA1}% ${RA2}% ${RA3}%) paths: read=${OURS_READ}Gb/s (${RATIO_READ}% of ib_write_bw, ${RATIO_READ_RD}% of ib_read_bw=${IBRD}Gb/s) slots=${OURS_SLOTS}Gb/s (${RATIO_SLOTS}%) ours_lat_p50=${OURS_LAT}us ib_write_lat=${IBLAT}us fence_test=$FENCE fence_link=$FENCE_LINK fence_bulk_read=$FENCE_BULK memlock_ladder:${LADDER} failed_checks=$FAILS result=$R"
[ $FAILS = 0 ]
