#!/usr/bin/env bash
# tests/llama/run.sh [--full] — llama.cpp's own suites through the plugin
# (make test-llama / make test-llama-full; make test runs the first):
#   backend-ops.sh   test-backend-ops -b PPRPC0 (a fixed subset covering every op; --full: all cases)
#   backend-ops-gdn.sh  test-backend-ops -o GATED_DELTA_NET -b PPRPC0 on pprpc's own kernels
#                    (--ggml-native-gdn on, then auto): every case, and the counters
#   archs.sh         test-llama-archs with two ranks (a fixed list of architectures; --full: all)
#   generate.sh      greedy generation with llama-completion over two ranks = the CPU's tokens
#   logits.sh        llama-logits (the benchmark's teacher-forced logits) over two ranks = the CPU's,
#                    bit for bit, and its refusals (~17 s here)
#   trace.sh         the request trace: trace-file on two ranks, PPRPC_TRACE in llama-completion, the
#                    ids matched, token-trace.py finds a decoded token's hops and its boundary (~2 s)
#   server.sh        llama-server over two ranks, HTTP /completion plain and streamed = the CPU server's
#   rank-loss.sh     a rank killed during generation: clear error within a bound, the other serves on
#   service.sh       llama-server as a service under four streams: kill -9, SIGTERM, SIGSTOP of a rank
#                    (error events within bounds, no wrong token, exit 75, served again once the rank
#                    is back), and a start with a rank down
#   weights.sh       rank-side weights: the model's copy and the cache give the CPU's tokens without sending the
#                    weights; a differing, truncated, changed, symlinked copy and a bad entry are refused and sent
#   netbench.sh      the load benchmark over 1 Gbit/s links in network namespaces, short form (tiny model)
#   amx.sh           the local side on a CPU with AMX (emulated): the scheduler abort of an AMX Xeon, fixed
#   release.sh       the plugin refuses a ggml of another release; the tools list its devices
# Each starts its own pprpcd ranks on 127.0.0.1 and stops them.
# LLAMA_FULL_ONLY=1 with --full runs only the suites that have a full form
# (make test ran the others just before, identically); LLAMA_FULL_SUITES
# names which of those run in full (default both: backend-ops archs).
set -u
cd "$(dirname "$0")/../.."
mode=${1:-}
if [ "${GGML_ON:-1}" = 0 ]; then
	echo "test-llama: skipped: pprpc built without the pinned llama.cpp (GGML_ON=0; \`make llama\` builds it)"
	exit 0
fi
rc=0
for t in backend-ops backend-ops-gdn archs generate logits trace server rank-loss service weights netbench amx release; do
	case $t in backend-ops|archs)
		if [ "$mode" = --full ] && ! grep -qw "$t" <<<"${LLAMA_FULL_SUITES:-backend-ops archs}"; then
			echo "== tests/llama/$t.sh: not in LLAMA_FULL_SUITES (${LLAMA_FULL_SUITES:-}); its subset ran in make test"
			continue
		fi ;;
	*)
		if [ "$mode" = --full ] && [ "${LLAMA_FULL_ONLY:-0}" = 1 ]; then
			echo "== tests/llama/$t.sh: no full form, ran in make test (LLAMA_FULL_ONLY=1)"
			continue
		fi ;;
	esac
	echo "== tests/llama/$t.sh $mode"
	case $t in
	backend-ops|archs) tests/llama/$t.sh $mode || rc=1 ;;
	*) tests/llama/$t.sh || rc=1 ;;
	esac
done
[ $rc = 0 ] && echo "test-llama: all passed" || echo "test-llama: FAILED"
exit $rc
