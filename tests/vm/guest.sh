#!/bin/sh
# tests/vm/guest.sh — runs inside the Soft-RoCE guest (tests/vm/run.sh).
#
# 1. rxe0 on dummy0 (10.0.0.1, MTU 9000 -> RDMA MTU 4096)
# 2. the ring/credit unit tests (test_rdma_ring) on the guest
# 3. two pprpcd with --transport rdma; bench-rdma moves 256 MiB A -> B,
#    bit-exact, and proves from both daemons' STATS that the link is RDMA
# 4. ib_write_bw / ib_write_lat on the same device for comparison
# 5. pp-fence-test (--transfer p2p) on two more RDMA daemons: PASS with
#    parity, and both ends' STATS show the boundary link and path as rdma
# 6. the memlock ladder: daemons as an unprivileged user under ulimit -l
#    16 MiB, 8 MiB, 1 MiB -> smaller depth, one 256 KiB chunk, TCP fallback;
#    every transfer still bit-exact
# SECTIONS=all|bench|fence|ladder runs one part (for development).
# Prints CHECK lines and one RDMA-SUMMARY line; exit 0 iff all passed.
IP=10.0.0.1
MIN_RATIO=${MIN_RATIO:-80}
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
head -c 32 /dev/urandom > $KEY 2>/dev/null || printf 'pprpc-guest-key-%016d' 0 > $KEY
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
start() {
	rm -f /tmp/$1.port
	cmd="pprpcd --listen $IP:$2 --port-file /tmp/$1.port --memory-floor-mib 0 --staging-mib 64 --threads 1 --transport $3 --log-level info --auth-key-file $KEY"
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
case "${SECTIONS:-all}" in all|bench)
start A 7001 rdma && start B 7002 rdma
check daemons_rdma_start $?

# pair NAME SERVER CLIENT: both must exit 0; the client's output in /tmp/NAME.cli
pair() {
	timeout 60 sh -c "$2" > /tmp/$1.srv 2>&1 & s=$!
	sleep 0.5
	timeout 60 sh -c "$3" > /tmp/$1.cli 2>&1; c=$?
	wait $s; sv=$?
	[ $c = 0 ] && [ $sv = 0 ]
}
ibbw() { # message size -> Gb/s (BW average) of a 2 s ib_write_bw on rxe0
	BW="-d rxe0 -x $GID -F --report_gbits -D 2 -s $1"
	pair ib_write_bw_$1 "ib_write_bw $BW" "ib_write_bw $BW $IP" || { echo 0; return 1; }
	awk '/^ *#bytes/{h=1; next} h && NF>=4 {print $4; exit}' /tmp/ib_write_bw_$1.cli
}
median3() { echo "$1 $2 $3" | tr ' ' '\n' | sort -n | sed -n 2p; }

# Throughput, paired: this machine is shared and TCG is noisy, so each
# round runs ib_write_bw (64 KiB messages, its default) and then our 256 MiB
# transfer back to back; the ratio is taken per round, and the median of
# three rounds is reported.
BAD=0
for r in 1 2 3; do
	b=$(ibbw 65536) || BAD=1
	timeout 200 bench-rdma --ranks $IP:7001,$IP:7002 --size 268435456 --reps 1 --lat-iters 5 --expect rdma > /tmp/bench$r.log 2>&1 || BAD=1
	o=$(sed -n 's/^BENCH-RDMA: .*best_gbps=\([0-9.]*\).*/\1/p' /tmp/bench$r.log)
	q=$(awk -v a="${o:-0}" -v b="${b:-0}" 'BEGIN{ if (b > 0) printf "%.0f", 100 * a / b; else print 0 }')
	echo "INFO round $r: ib_write_bw ${b} Gb/s, ours 256 MiB ${o} Gb/s, ratio ${q}%"
	eval "IB$r=${b:-0} OU$r=${o:-0} RA$r=$q"
done
cat /tmp/bench1.log
check transfer_256MiB_over_rdma_x3_bitexact $BAD
IBBW=$(median3 $IB1 $IB2 $IB3)
OURS=$(median3 $OU1 $OU2 $OU3)
RATIO=$(median3 $RA1 $RA2 $RA3)
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
grep -hE 'RDMA|rdma|link up|over' /tmp/A.log /tmp/B.log
stop A B
;; esac

# ---- pp-fence-test with 2 daemons over RDMA -------------------------------------------------
# Pipelined vs sequential through two stages whose boundary goes daemon to
# daemon (--transfer p2p): PASS needs parity and sentinels.  The link is
# proved from both daemons' STATS, not assumed: F2's outbound link to F1 and
# F1's inbound peer connection must both say rdma, and each side's boundary
# row must show the fence's transfers on the p2p-rdma path.  Sizes are small
# (TCG runs the matmuls): 4 micro-batches of 64 tokens x 256 channels, so
# each boundary is 64 KiB.
FENCE=skipped FENCE_LINK=?
case "${SECTIONS:-all}" in all|fence)
start F1 7011 rdma && start F2 7012 rdma
check fence_daemons_rdma_start $?
timeout 300 pp-fence-test --ranks $IP:7011,$IP:7012 --ubatches 4 --tokens 256 --width 256 \
	--layers-per-stage 1 --repeat 1 --transfer p2p > /tmp/fence.log 2>&1
rc=$?
cat /tmp/fence.log
grep -q '^pp-fence-test: PASS (parity ok' /tmp/fence.log && [ $rc = 0 ] && FENCE=PASS || FENCE=FAIL
[ $FENCE = PASS ]
check pp_fence_test_p2p_pass_parity $? "rc=$rc $(grep '^pp-fence-test: [PF]' /tmp/fence.log)"
pprpcctl stats --rank $IP:7011 > /tmp/F1.stats 2>&1; pprpcctl stats --rank $IP:7012 > /tmp/F2.stats 2>&1
echo "---- pprpcctl stats (F1, then F2)"; cat /tmp/F1.stats /tmp/F2.stats
# F2 (stage 1) pulls from F1: its "link F1" row, F1's "conn pprpcd-peer@" row.
l2=$(awk '$1 == "link" {print $3; exit}' /tmp/F2.stats)
l1=$(awk '$1 == "conn" && $2 ~ /^pprpcd-peer@/ {print $3; exit}' /tmp/F1.stats)
b2=$(awk '$2 == "recv" && $3 == "p2p-rdma" && $4 > 0 {print $4; exit}' /tmp/F2.stats)
b1=$(awk '$2 == "send" && $3 == "p2p-rdma" && $4 > 0 {print $4; exit}' /tmp/F1.stats)
echo "INFO fence link: F2 link ${l2:-none}, F1 peer conn ${l1:-none}, boundary transfers p2p-rdma recv ${b2:-0} send ${b1:-0}"
[ "$l1" = rdma ] && [ "$l2" = rdma ] && [ -n "$b1" ] && [ -n "$b2" ] && FENCE_LINK=rdma || FENCE_LINK="${l2:-none}/${l1:-none}"
[ "$FENCE_LINK" = rdma ]
check pp_fence_test_boundary_over_rdma $? "link=$FENCE_LINK"
if [ "$FENCE" != PASS ] || [ "$FENCE_LINK" != rdma ]; then
	echo "---- failed: daemon logs and kernel messages"; tail -n 30 /tmp/F1.log /tmp/F2.log; dmesg | tail -n 15
else
	grep -hE 'RDMA|rdma|link up' /tmp/F1.log /tmp/F2.log
fi
stop F1 F2
;; esac

# ---- memlock ladder ------------------------------------------------------------------------
LADDER=""
case "${SECTIONS:-all}" in all|ladder)
port=7100
for kib in 16384 8192 1024; do
	port=$((port + 2))
	if [ $kib = 1024 ]; then exp=tcp; else exp=rdma; fi
	start L$kib $port auto $kib && start M$kib $((port + 1)) auto $kib
	rc=$?
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
	check "memlock_${kib}KiB_${exp}_bitexact" $rc "step=${step:-?}"
	LADDER="$LADDER ${kib}K=${step:-?}"
	stop L$kib M$kib
done
;; esac

if [ "$LINK" != skipped ]; then
	[ "$LINK" = rdma ] && [ "${RATIO:-0}" -ge "$MIN_RATIO" ]
	check "throughput_vs_ib_write_bw_ge_${MIN_RATIO}pct" $? "${RATIO}%"
fi
[ $FAILS = 0 ] && R=PASS || R=FAIL
echo "RDMA-SUMMARY: transport=$LINK ours_256MiB=${OURS}Gb/s ib_write_bw=${IBBW}Gb/s ratio=${RATIO}% (median of 3 paired rounds: ${RA1}% ${RA2}% ${RA3}%) ours_lat_p50=${OURS_LAT}us ib_write_lat=${IBLAT}us fence_test=$FENCE fence_link=$FENCE_LINK memlock_ladder:${LADDER} failed_checks=$FAILS result=$R"
[ $FAILS = 0 ]
