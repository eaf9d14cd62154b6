#!/usr/bin/env bash
# bench/ggml_gdn_gpu.sh STEP... — ggml's GATED_DELTA_NET on pprpc's CUDA
# kernels (ggml-native-gdn, doc/ggml.md) on a CUDA host, each step
# printing what it measured:
#   parity   test-backend-ops -o GATED_DELTA_NET -b PPRPC0 against a ggml:CUDA0
#            rank with the setting off, on and auto: the suite's verdicts (and
#            its error for a failing case) and the rank's GATED_DELTA_NET counters
#   archs    test-llama-archs -a kimi-linear (a whole random-weight Kimi-Linear,
#            128 tokens) on a ggml:CUDA0 rank, off and on: PPRPC0's NMSE against
#            the CPU and the counters
#   bench    bench-ggml_gdn: ggml-cuda's kernel against pprpc's, in process,
#            Kimi-Linear shapes (KDA, S = 128, H = 32 and 96, T 512..8192) and
#            GDN, median ms and parity (BENCH_ARGS overrides the shapes)
#   refcpu   bench-ggml_gdn --ref-cpu at T = 2048, H = 32: both CUDA kernels
#            against ggml-cpu
# Environment: BUILD (pprpc build with CUDA, default build-gpu), LLAMA_CUDA_BIN
# (a CUDA build of the pinned llama.cpp, default ext/llama.cpp-<tag>/build-cuda/bin:
# its libggml*.so go on LD_LIBRARY_PATH, so pprpcd's ggml has CUDA0), DEVICE
# (the ggml device, default CUDA0; CPU tries the script on a CPU build).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-gpu}
DEVICE=${DEVICE:-CUDA0}
LB=$(realpath "${LLAMA_CUDA_BIN:-$(. scripts/llama-release.sh && echo "$LLAMA_SRC_DEFAULT")/build-cuda/bin}")
export LD_LIBRARY_PATH=$LB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
PLUGIN=$(realpath "$BUILD/lib/libggml-pprpc.so")
TMP=$(mktemp -d /tmp/ggml-gdn-gpu-XXXXXX)
PID=

stop() {
	[ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	PID=
}
trap 'stop; rm -rf "$TMP"' EXIT

# start MODE: one rank serving ggml:$DEVICE with --ggml-native-gdn MODE; sets ADDR
start() {
	rm -f "$TMP/port"
	"$BUILD/bin/pprpcd" --listen 127.0.0.1:0 --port-file "$TMP/port" --devices "ggml:$DEVICE" \
		--ggml-native-gdn "$1" --log-level info >"$TMP/rank-$1.log" 2>&1 &
	PID=$!
	for _ in $(seq 1 600); do
		[ -s "$TMP/port" ] && break
		kill -0 "$PID" 2>/dev/null || break
		sleep 0.1
	done
	[ -s "$TMP/port" ] || { cat "$TMP/rank-$1.log"; echo "rank did not start"; exit 1; }
	ADDR=127.0.0.1:$(cat "$TMP/port")
}

counters() {
	"$BUILD/bin/pprpcctl" stats --rank "$ADDR" | grep "GATED_DELTA_NET" | sed 's/^ */    /'
}

plugin() {
	GGML_BACKEND_PATH=$PLUGIN PPRPC_RANKS=$ADDR "$@"
}

for step in "$@"; do
	case $step in
	parity)
		for mode in off on auto; do
			start "$mode"
			echo "== test-backend-ops -o GATED_DELTA_NET -b PPRPC0, ggml:$DEVICE, ggml-native-gdn $mode"
			plugin "$LB/test-backend-ops" test -o GATED_DELTA_NET -b PPRPC0 2>"$TMP/tbo.log" |
				sed 's/\x1b\[[0-9;]*m//g' | grep -E "FAIL|ERR|tests passed|not supported"
			counters
			stop
		done
		;;
	archs)
		for mode in off on; do
			start "$mode"
			echo "== test-llama-archs -a kimi-linear, ggml:$DEVICE, ggml-native-gdn $mode"
			plugin "$LB/test-llama-archs" -a kimi-linear -s 42 2>"$TMP/tla.log" |
				sed 's/\x1b\[[0-9;]*m//g' | grep "^|"
			counters
			stop
		done
		;;
	bench)
		# shellcheck disable=SC2086
		"$BUILD/bin/bench-ggml_gdn" --device "$DEVICE" ${BENCH_ARGS:---T 512,2048,8192 --H 32,96 --kinds kda,gdn --reps 10}
		;;
	refcpu)
		"$BUILD/bin/bench-ggml_gdn" --device "$DEVICE" --T 2048 --H 32 --kinds kda,gdn --reps 3 --ref-cpu
		;;
	*)
		echo "unknown step '$step' (parity, archs, bench, refcpu)"
		exit 2
		;;
	esac
done
