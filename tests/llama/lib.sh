# tests/llama/lib.sh — shared by the llama.cpp test drivers (sourced).
#
# Ranks are real pprpcd processes on 127.0.0.1 with ephemeral ports, each
# serving one device (RANK_DEVICE, default ggml:CPU), started here and stopped by PID.  Their logs
# stay in a temporary directory, printed when a test fails.
#
# Environment: BUILD (pprpc build tree, default build), LLAMA_BIN (llama.cpp
# binaries, default ext/llama.cpp-<tag>/build-cpu/bin of the default release), GGML_ON (0 = skip: the
# llama.cpp build is absent), RANK_THREADS (threads per rank, default 1).

BUILD=${BUILD:-build}
LLAMA_BIN=${LLAMA_BIN:-$(. scripts/llama-release.sh && echo "$LLAMA_SRC_DEFAULT")/build-cpu/bin}
PPRPCD=${PPRPCD:-$BUILD/bin/pprpcd}
PPRPCCTL=${PPRPCCTL:-$BUILD/bin/pprpcctl}
PLUGIN=${PLUGIN:-$BUILD/lib/libggml-pprpc.so}
# the device each rank serves (ggml:CUDA0 on a GPU host, with LLAMA_BIN a CUDA
# build of the pinned llama.cpp on LD_LIBRARY_PATH)
RANK_DEVICE=${RANK_DEVICE:-ggml:CPU}
RANK_THREADS=${RANK_THREADS:-1}

TMP_ROOT=$(mktemp -d /tmp/pprpc-llama-XXXXXX)
RANK_PIDS=()
RANK_ADDRS=()
RANK_DIRS=()
FAILED=0

# Skip (exit 0 with the reason) when the pinned llama.cpp build is absent.
require_llama() {
	local what=$1; shift
	if [ "${GGML_ON:-1}" = 0 ]; then
		echo "$what: skipped: pprpc built without the pinned llama.cpp (GGML_ON=0; run \`make llama\`)"
		exit 0
	fi
	for f in "$@" "$PLUGIN" "$PPRPCD"; do
		if [ ! -e "$f" ]; then
			# from make (GGML_ON=1) the llama.cpp build is there: a missing
			# piece is a broken build, not a reason to skip
			[ "${GGML_ON:-}" = 1 ] && fail "$f is missing"
			echo "$what: skipped: $f is missing (run \`make llama\` then \`make\`)"
			exit 0
		fi
	done
}

# start_rank [extra pprpcd flags...]: appends to RANK_PIDS / RANK_ADDRS.
# A rank started after stop_ranks gets a directory of its own.
start_rank() {
	local i=${#RANK_DIRS[@]}
	local dir=$TMP_ROOT/rank$i
	mkdir -p "$dir"
	rm -f "$dir/port"
	"$PPRPCD" --listen 127.0.0.1:0 --port-file "$dir/port" --devices "$RANK_DEVICE" \
		--threads "$RANK_THREADS" --memory-floor-mib 256 --log-level info "$@" >"$dir/log" 2>&1 &
	local pid=$!
	for _ in $(seq 1 2000); do
		if [ -s "$dir/port" ]; then
			RANK_PIDS+=("$pid")
			RANK_ADDRS+=("127.0.0.1:$(cat "$dir/port")")
			RANK_DIRS+=("$dir")
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			break
		fi
		sleep 0.01
	done
	echo "rank $i did not start listening; its log:" >&2
	cat "$dir/log" >&2
	kill "$pid" 2>/dev/null
	return 1
}

# The PPRPC_RANKS value for the ranks started so far.
ranks_env() {
	local IFS=,
	echo "${RANK_ADDRS[*]}"
}

dump_rank_logs() {
	for d in "${RANK_DIRS[@]}"; do
		echo "---- $d/log ----" >&2
		tail -n 60 "$d/log" >&2
	done
}

# Stop every rank started (SIGTERM, then SIGKILL after 10 s), by PID.
stop_ranks() {
	for pid in "${RANK_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${RANK_PIDS[@]}"; do
		for _ in $(seq 1 1000); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.01
		done
		if kill -0 "$pid" 2>/dev/null; then
			kill -KILL "$pid" 2>/dev/null
		fi
		wait "$pid" 2>/dev/null
	done
	RANK_PIDS=()
}

# start_rpc_ranks N DEV LOGPREFIX: N ggml-rpc-server ($RS) on 127.0.0.1, ephemeral
# ports, serving DEV, logs LOGPREFIX0.log ...; sets RPC_PIDS and RPC_ADDRS
# (a comma list for --rpc) once every one listens.  stop_rpc_ranks stops them
# by PID (cleanup does too).
RPC_PIDS=()
RPC_ADDRS=
start_rpc_ranks() {
	local n=$1 dev=$2 log=$3 i port ports=()
	for ((i = 0; i < n; i++)); do
		port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		"$RS" -H 127.0.0.1 -p "$port" -d "$dev" >"$log$i.log" 2>&1 &
		RPC_PIDS+=($!)
		ports+=("$port")
	done
	RPC_ADDRS=$(printf '127.0.0.1:%s,' "${ports[@]}")
	RPC_ADDRS=${RPC_ADDRS%,}
	for port in "${ports[@]}"; do
		for i in $(seq 1 1000); do
			(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
			sleep 0.01
		done
	done
}

stop_rpc_ranks() {
	[ ${#RPC_PIDS[@]} -gt 0 ] || return 0
	kill "${RPC_PIDS[@]}" 2>/dev/null
	wait "${RPC_PIDS[@]}" 2>/dev/null
	RPC_PIDS=()
}

cleanup() {
	local st=$? d
	stop_ranks
	stop_rpc_ranks
	# a sanitized rank (make SANITIZE=... test-llama) that reported, at
	# exit (LeakSanitizer) or on the way, fails the test whatever it printed
	for d in "${RANK_DIRS[@]}"; do
		if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$d/log" 2>/dev/null; then
			echo "FAIL: a rank's sanitizer report ($d/log):" >&2
			grep -m 8 -A 6 -E "ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:" "$d/log" >&2
			FAILED=1
		fi
	done
	if [ "$FAILED" != 0 ] || [ -n "${PPRPC_KEEP_LOGS:-}" ]; then
		dump_rank_logs
		echo "(logs kept in $TMP_ROOT)" >&2
	else
		rm -rf "$TMP_ROOT"
	fi
	[ "$FAILED" = 0 ] || [ "$st" != 0 ] || exit 1
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	FAILED=1
	exit 1
}

# vocab_model ARCH SEED OUT: a random-weight model of ARCH saved by
# test-llama-archs (-o; its dense variant, else its MoE one) with a
# vocabulary added (gguf-add-vocab), so llama-completion can tokenize.
# Needs TLA and VOCAB (the callers' require_llama checked them).
# The tools of the scripts that run llama-completion on a model with a
# vocabulary (vocab_model): TLA, LC, VOCAB set, or skip as require_llama does.
require_completion_tools() {
	TLA=$LLAMA_BIN/test-llama-archs
	LC=$LLAMA_BIN/llama-completion
	VOCAB=$BUILD/tests/gguf-add-vocab
	require_llama "$1" "$TLA" "$LC" "$VOCAB"
}

vocab_model() {
	local arch=$1 seed=$2 out=$3 src
	mkdir -p "$TMP_ROOT/models"
	"$TLA" -o "$TMP_ROOT/models" -a "$arch" -s "$seed" >"$TMP_ROOT/save.log" 2>&1 ||
		{ cat "$TMP_ROOT/save.log" >&2; fail "test-llama-archs -o failed"; }
	src=$TMP_ROOT/models/$arch-dense.gguf
	[ -f "$src" ] || src=$TMP_ROOT/models/$arch-moe.gguf
	"$VOCAB" "$src" "$out" || fail "gguf-add-vocab failed"
}

# Run a llama.cpp tool with the plugin and the ranks (env for the command).
with_plugin() {
	GGML_BACKEND_PATH=$(realpath "$PLUGIN") PPRPC_RANKS=$(ranks_env) "$@"
}
