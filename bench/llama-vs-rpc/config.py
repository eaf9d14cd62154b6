"""Command line and paths: which binaries, which device, which workload."""

import argparse
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

USAGE = """\
llama-vs-rpc: llama.cpp over pprpc vs llama.cpp over its own RPC backend, one run.

Starts N pprpcd (--devices ggml:DEV) and N ggml-rpc-server (-d DEV) on
127.0.0.1 ephemeral ports, same threads, and runs the same llama.cpp workload
(llama-bench prompt and decode runs, a greedy llama-completion for the token
hash) through each, plus a local run on one device, in paired rounds of
alternating order.  Reports prompt tok/s per size, TTFT, decode tok/s, token
hashes (must be equal everywhere), rank memory, errors, graph creates vs runs
and stage boundaries (pprpc STATS), and pprpc/rpc as a paired geometric-mean
ratio with a bootstrap 95% interval; every side's teacher-forced logits of
the hash prompt + the local side's greedy tokens against the local side's
(llama-logits: NMSE, top-1 agreement, first divergence, max |diff|; on GPUs,
where greedy tokens may part ways, the measure that still compares); then an ubatch sweep that skips any ubatch
llama.cpp estimates would leave less than --margin-mib free on a rank (checked
before allocating).  Exit 0 when every run succeeded and every hash matched,
1 otherwise, 2 for bad usage.

Model load (--load-times, --load-only, --net RATE): the wall time of
llama-completion -n 1 --no-warmup, from its start to its exit, cold (page
cache of the model files dropped, fresh ranks, empty caches) and warm (at once
again), per side; the sides pprpc-file (pprpcd --model-dir, a copy of the
model per rank) and pprpc-cache (pprpcd --weights-cache) and rpc-c
(ggml-rpc-server -c) load weights on the rank's side.  --net puts the client
and every rank in a network namespace of its own behind links shaped to RATE
(doc/llama-vs-rpc.md, "Model load over a shaped network").

Environment: LLAMA_BIN (llama.cpp's bin folder, default
ext/llama.cpp-<tag>/build-cpu/bin of LLAMA_RELEASE or the default release), PPRPC_BUILD (default build).
"""


def parse(argv=None):
    ap = argparse.ArgumentParser(prog="llama-vs-rpc", description=USAGE,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="GGUF model (bench/model-gen makes them)")
    ap.add_argument("--ranks", type=int, default=2, help="ranks per side (default 2)")
    ap.add_argument("--device", default="cpu", help="cpu or cudaN: ranks serve ggml:CPU / ggml:CUDAN (default cpu)")
    ap.add_argument("--threads", type=int, default=1, help="CPU threads per rank (default 1)")
    ap.add_argument("--client-threads", type=int, default=1, help="llama.cpp threads in the client process (default 1)")
    ap.add_argument("--local-threads", type=int, help="threads of the local run (default: --threads on the CPU, --client-threads on a GPU)")
    ap.add_argument("--split", help="layer split, e.g. 1,1 (default even); with --head N+1 values, the head's first")
    ap.add_argument("--head", action="store_true",
                    help="the head's own device as the first stage of the pprpc and rpc sides: -dev CUDAn/PPRPC0/.. "
                         "and CUDAn/RPC0/.., the layers split over N+1 devices (local stays all-local).  On the CPU, "
                         "which has no -dev name, the head's share stays on the client's CPU through -ngl "
                         "(llama.cpp then does not pipeline: doc/llama-vs-rpc.md)")
    ap.add_argument("--prompts", default=None, help="prompt sizes (default 2048,4096,8192 on a GPU, 128,256,512 on the CPU)")
    ap.add_argument("--gen", type=int, default=None, help="decoded tokens per decode run (default 128 GPU, 32 CPU)")
    ap.add_argument("--hash-tokens", type=int, default=32, help="greedy tokens for the token hash (default 32)")
    ap.add_argument("--hash-words", type=int, default=48, help="words of prompt text for the token hash (default 48)")
    ap.add_argument("--ubatch", type=int, default=None, help="ubatch of the main rounds (default 512 GPU, 128 CPU)")
    ap.add_argument("--batch", type=int, default=None, help="batch (default: the largest prompt)")
    ap.add_argument("--rounds", type=int, default=3, help="paired rounds (default 3)")
    ap.add_argument("--reps", type=int, default=1, help="llama-bench -r per run (default 1)")
    ap.add_argument("--sides", default="pprpc,rpc,local",
                    help="subset of %s (default pprpc,rpc,local)" % ",".join(SIDES))
    ap.add_argument("--hold-lead-us", type=int, default=150,
                    help="the lead of the sides pprpc-hlead and pprpc-clead (pprpcd --land-hold-lead-us; default 150)")
    ap.add_argument("--sweep", default=None, help="ubatch sweep (default 512,1024,2048 GPU, 64,128,256 CPU; 'none' to skip)")
    ap.add_argument("--sweep-rounds", type=int, default=2, help="paired rounds per sweep ubatch (default 2)")
    ap.add_argument("--cpu-reference", choices=("on", "off"), default=None,
                    help="with a GPU device: also hash a local CPU run, as information (default on)")
    ap.add_argument("--no-logits", action="store_true",
                    help="skip the teacher-forced logits of every side against the local side's "
                         "(on by default when --sides has local; never with --load-only)")
    ap.add_argument("--llama-logits", default=None,
                    help="the llama-logits tool (default: PPRPC_BUILD/bin/llama-logits, else this tree's build/bin)")
    ap.add_argument("--no-boundary-probe", action="store_true",
                    help="skip the decode run on rank 0 alone (the per-boundary cost: N ranks vs one)")
    ap.add_argument("--margin-mib", type=int, default=1536, help="skip a configuration leaving less free on a rank (default 1536)")
    ap.add_argument("--flash-attn", default=None, help="-fa on|off|auto for every side (default: llama.cpp's)")
    ap.add_argument("--pprpcd-arg", action="append", default=[], help="extra pprpcd argument (repeatable)")
    ap.add_argument("--net", metavar="RATE",
                    help="the client and every rank in a network namespace of its own, joined by a bridge through "
                         "links shaped to RATE (tc syntax: 1gbit, 100mbit); needs root.  Measures load times")
    ap.add_argument("--disk-rate", metavar="MBPS",
                    help="the client and every rank read the model's disk as a disk of their own of MBPS MB/s "
                         "(block-I/O cgroups, needs root; diskrate.py): hosts with disks of their own, on one "
                         "machine")
    ap.add_argument("--load-only", action="store_true",
                    help="only model load times (cold and warm, --rounds) and one token hash per side: "
                         "no prompt/decode rounds, no sweep")
    ap.add_argument("--load-times", action="store_true",
                    help="measure model load times before the rounds (implied by --net and --load-only)")
    ap.add_argument("--rank-model", choices=("copy", "link"), default="copy",
                    help="pprpc-file: each rank's model-dir holds a copy of the model (blocks of its own: "
                         "on one host its cold reads add to the client's) or a hard link to it (one "
                         "page cache: a cold load reads the file once, as ranks on hosts of their own "
                         "read their disks while the client reads its own; default copy)")
    ap.add_argument("--weights-cache-mib", type=int, default=None,
                    help="pprpc-cache: each rank's --weights-cache-mib (default: the model's size + 256)")
    ap.add_argument("--json", help="write the results as JSON")
    ap.add_argument("--svg", help="SVG of the pipeline in the last round (a traced extra round, see README)")
    ap.add_argument("--svg-phase", default="pp", choices=("pp", "tg"),
                    help="what the traced round runs: the prompt run (default) or a decode run")
    ap.add_argument("--workdir", help="logs (default build/llama-vs-rpc/run-TIME)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per llama.cpp invocation (default 900)")
    with open(os.path.join(ROOT, "scripts", "llama-releases")) as f:  # the default release: the first
        tag = os.environ.get("LLAMA_RELEASE") or [l.split()[0] for l in f if l.strip() and not l.startswith("#")][0]
    ap.add_argument("--llama-bin", default=os.environ.get("LLAMA_BIN", os.path.join(ROOT, "ext", "llama.cpp-" + tag, "build-cpu", "bin")))
    ap.add_argument("--pprpc-build", default=os.environ.get("PPRPC_BUILD", os.path.join(ROOT, "build")))
    return ap.parse_args(argv)


# Every side: what its ranks are (pprpcd or ggml-rpc-server) and what they get besides
# the devices.  The order is the order of a round (alternated every other round).
SIDES = {
    "pprpc": "pprpc",        # the plugin; the weights travel from the client over the link
    "pprpc-link": "pprpc",   # the plugin with PPRPC_HOST_PAGES=0: outputs come back over the link too
    "pprpc-hold": "pprpc",   # ranks with --land-hold 1: a landed RECV held on the GPU, the next graph behind it
    "pprpc-noreuse": "pprpc",  # ranks with --ggml-graph-reuse 0: graphs without an id, ggml-cuda compares their nodes every run
    "pprpc-gsend": "pprpc",  # ranks with --land-gpu-send 1: a SEND behind a graph put into the next stage's slot by the GPU
    "pprpc-chain": "pprpc",  # ranks with --land-gpu-send 1 --land-hold 1: no CPU between two stages' graphs
    "pprpc-hlead": "pprpc",  # ranks with --land-hold 1 --land-hold-lead-us N (--hold-lead-us): held only N us before the bytes are due
    "pprpc-clead": "pprpc",  # the chain with that lead
    "pprpc-file": "pprpc",   # + --model-dir DIR: each rank its own copy of the model file
    "pprpc-cache": "pprpc",  # + --weights-cache DIR --weights-cache-mib N: run cold (empty) and warm
    "rpc": "rpc",            # ggml-rpc-server
    "rpc-c": "rpc",          # ggml-rpc-server -c: its file cache, in LLAMA_CACHE/rpc/ (rank's own)
    "local": "local",        # llama.cpp alone, one device
}
# sides whose ranks keep a cache: the cold load starts from an empty one
CACHE_SIDES = ("pprpc-cache", "rpc-c")


class Device:
    def __init__(self, spec):
        s = spec.lower()
        if s == "cpu":
            self.pprpc, self.rpc, self.local, self.gpu_index = "ggml:CPU", "CPU", ["none"], None
        elif s.startswith("cuda") and s[4:].isdigit():
            n = int(s[4:])
            self.pprpc, self.rpc, self.local, self.gpu_index = "ggml:CUDA%d" % n, "CUDA%d" % n, ["CUDA%d" % n], n
        else:
            raise ValueError("--device: cpu or cudaN, not %r" % spec)
        self.gpu = self.gpu_index is not None
        self.spec = s
        # the head's own device under --head: its -dev name (None on the CPU:
        # llama.cpp gives the CPU no -dev name, the head keeps layers by -ngl)
        self.head = self.local[0] if self.gpu else None


class Config:
    def __init__(self, a):
        self.a = a
        self.device = Device(a.device)
        gpu = self.device.gpu
        self.model = os.path.abspath(a.model)
        self.llama_bin = os.path.abspath(a.llama_bin)
        b = lambda n: os.path.join(self.llama_bin, n)
        self.llama_bench, self.llama_completion, self.rpc_server = b("llama-bench"), b("llama-completion"), b("ggml-rpc-server")
        self.fit_params = b("llama-fit-params") if os.access(b("llama-fit-params"), os.X_OK) else None
        pb = os.path.abspath(a.pprpc_build)
        self.pprpcd, self.pprpcctl = os.path.join(pb, "bin/pprpcd"), os.path.join(pb, "bin/pprpcctl")
        self.plugin = os.path.join(pb, "lib/libggml-pprpc.so")
        # llama-logits is built with pprpc (make, when the pinned llama.cpp is
        # there); a --pprpc-build without it (another tree's daemon and plugin)
        # falls back to this tree's own build
        self.llama_logits = a.llama_logits or next(
            (p for p in (os.path.join(pb, "bin/llama-logits"), os.path.join(ROOT, "build/bin/llama-logits"))
             if os.access(p, os.X_OK)), os.path.join(pb, "bin/llama-logits"))
        self.sides = [s.strip() for s in a.sides.split(",") if s.strip()]
        for s in self.sides:
            if s not in SIDES:
                raise ValueError("--sides: unknown side %r (%s)" % (s, ", ".join(SIDES)))
        self.sides = [s for s in SIDES if s in self.sides]  # no duplicates
        self.net_rate = a.net
        if a.net:
            import netns
            netns.parse_rate(a.net)  # ValueError: bad usage
            if a.svg:
                raise ValueError("--svg is not available with --net (its proxies run in the root namespace)")
        self.disk_rate = None
        if a.disk_rate is not None:
            import diskrate
            self.disk_rate = diskrate.parse_rate(a.disk_rate)  # ValueError: bad usage
        self.load_only = a.load_only
        # teacher-forced logits against local: the local side is the reference,
        # and --load-only measures loads (one token hash per side), nothing more
        self.logits_skip = ("--no-logits" if a.no_logits else "--load-only" if a.load_only else
                            "no local side in --sides (the reference)" if "local" not in self.sides else None)
        self.logits = self.logits_skip is None
        self.load_times = a.load_times or a.load_only or bool(a.net)
        # set by the benchmark when it runs: the command prefix of client-side
        # tools (ip netns exec NS with --net) and the ranks' shared key
        self.client_prefix = []
        self.rank_prefix = None  # i -> a command prefix for rank i (--disk-rate)
        self.auth_key = None
        self.n = a.ranks
        if self.n < 1:
            raise ValueError("--ranks must be >= 1")
        # --head: the client's own device is the first stage of the remote sides
        self.head = a.head
        nsplit = self.n + 1 if self.head else self.n
        self.split = [float(x) for x in a.split.split(",")] if a.split else [1.0] * nsplit
        if len(self.split) != nsplit or any(x < 0 for x in self.split) or sum(self.split) <= 0:
            raise ValueError("--split needs %d values >= 0%s" % (nsplit, " (the head's first)" if self.head else ""))
        # On the CPU the head has no -dev name: its share stays on the CPU through
        # -ngl, which needs the model's layer count (head_layers: what it keeps)
        self.n_layer = None
        self.head_layers = None
        if self.head and not gpu:
            import gguf_meta
            try:
                self.n_layer = gguf_meta.n_layer(a.model)
            except (OSError, gguf_meta.GGUFError) as e:
                raise ValueError("--head on the CPU needs the model's layer count: %s" % e)
            self.head_layers = head_layers(self.split, self.n_layer)
            if not 0 < self.head_layers <= self.n_layer:
                raise ValueError("--head on the CPU: the split %s gives the head %d of the model's %d layers + the "
                                 "output layer; it must keep at least one and leave the ranks at least the output "
                                 "layer" % (",".join("%g" % x for x in self.split), self.head_layers, self.n_layer))
        self.prompts = [int(x) for x in (a.prompts or ("2048,4096,8192" if gpu else "128,256,512")).split(",")]
        self.gen = a.gen or (128 if gpu else 32)
        self.ubatch = a.ubatch or (512 if gpu else 128)
        self.batch = a.batch or max(self.prompts)
        sw = a.sweep or ("512,1024,2048" if gpu else "64,128,256")
        self.sweep = [] if sw == "none" else [int(x) for x in sw.split(",")]
        self.reps, self.timeout, self.flash_attn = a.reps, a.timeout, a.flash_attn
        self.threads = a.threads
        self.client_threads = a.client_threads
        self.local_threads = a.local_threads or (a.client_threads if gpu else a.threads)
        self.cpu_reference = a.cpu_reference == "on" or (gpu and a.cpu_reference != "off")
        self.hash_ctx = 64 + a.hash_tokens + 3 * a.hash_words
        self.start_timeout = 60
        # The ranks and the tools load the same ggml: the one next to the tools.
        ld = self.llama_bin + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")
        self.rank_env = dict(os.environ, LD_LIBRARY_PATH=ld)
        self.tool_env = {"LD_LIBRARY_PATH": ld}

    def missing(self):
        """Files a requested side needs that are not there."""
        need = [self.model, self.llama_bench, self.llama_completion]
        kinds = set(SIDES[s] for s in self.sides)
        if "rpc" in kinds:
            need.append(self.rpc_server)
        if "pprpc" in kinds:
            need += [self.pprpcd, self.pprpcctl, self.plugin]
        if self.logits:
            need.append(self.llama_logits)
        return [p for p in need if not os.path.exists(p)]


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def head_layers(split, n_layer):
    """How many of llama.cpp's n_layer + 1 layers (the output layer last) the
    first of the split's devices gets, computed as llama-model.cpp's
    load_tensors does in float: layer il goes to the first device whose
    cumulative share exceeds il / (n_layer + 1)."""
    n = n_layer + 1
    total = 0.0
    for w in split:
        total = _f32(total + _f32(w))
    s0 = _f32(_f32(split[0]) / total)
    return sum(1 for il in range(n) if s0 > _f32(il / n))


def which(name):
    return shutil.which(name)
