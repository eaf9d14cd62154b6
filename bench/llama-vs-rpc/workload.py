"""The llama.cpp workload, identical for every side except the device arguments:

  bench-pp    llama-bench -p P1,P2,... -n 0    prompt tok/s and TTFT per size
  bench-tg    llama-bench -p 0 -n G            decode tok/s
  hash        llama-completion, greedy         the generated token ids
  load        llama-completion -n 1 --no-warmup  its wall time: the model's load
  logits      llama-logits --tokens T          every position's logits of the local side's
                                               greedy sequence (teacher-forced), to a file

A side is pprpc (the plugin, GGML_BACKEND_PATH + PPRPC_RANKS, devices
PPRPC0..), rpc (--rpc, devices RPC0..) or local (this process on one device).
TTFT is the measured wall time of llama-bench's prompt run: the prompt decoded
in ubatches until the last token's logits are ready (llama_synchronize).
"""

import hashlib
import json
import os
import re
import struct
import subprocess
import time


class Side:
    def __init__(self, name, env, devs, rpc=None, split=None, kind=None, ngl=None):
        self.name, self.env, self.devs, self.rpc = name, env, devs, rpc  # devs: device names or ['none']
        self.split = split  # layer split over devs (-ts); None: one device
        self.kind = kind or name  # pprpc, rpc or local: what the ranks are (config.SIDES)
        # -ngl: None = 99 (every layer on devs); fewer keeps the first layers on
        # the client's CPU (--head on the CPU)
        self.ngl = ngl

    def dev_args(self, sep):
        a = []
        if self.rpc:
            a += ["--rpc", ",".join(self.rpc)]
        a += ["-dev", sep.join(self.devs)]
        return a


def prompt_text(seed, n_words):
    """Deterministic lowercase words; tokenizes to about 1.5 tokens a word with
    the generator's vocabulary (any text works with any vocabulary)."""
    h = hashlib.shake_256(("llama-vs-rpc prompt %d" % seed).encode()).digest(8 * n_words)
    abc = "abcdefghijklmnopqrstuvwxyz"
    return " ".join("".join(abc[c % 26] for c in h[8 * i + 1:8 * i + 2 + h[8 * i] % 6]) for i in range(n_words))


def _split(w, sep):
    return sep.join(("%g" % x) for x in w)


class Runner:
    """Runs one tool invocation for one side, logs it, returns its result."""

    def __init__(self, cfg, logdir):
        self.cfg, self.logdir, self.seq = cfg, logdir, 0

    def _run(self, side, tag, argv):
        self.seq += 1
        base = os.path.join(self.logdir, "%03d-%s-%s" % (self.seq, side.name, tag))
        env = dict(os.environ)
        env.update(self.cfg.tool_env)
        env.update(side.env)
        # with --net the client runs in its namespace (ip netns exec execs the tool)
        argv = self.cfg.client_prefix + argv
        with open(base + ".out", "w") as fo, open(base + ".err", "w") as fe:
            fe.write("# " + " ".join(argv) + "\n")
            fe.flush()
            t0 = time.monotonic()
            try:
                p = subprocess.run(argv, stdout=fo, stderr=fe, env=env, timeout=self.cfg.timeout,
                                   stdin=subprocess.DEVNULL)
                rc = p.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout after %d s" % self.cfg.timeout
            wall = time.monotonic() - t0
        with open(base + ".out", errors="replace") as f:
            out = f.read()
        with open(base + ".err", errors="replace") as f:
            err = f.read()
        return rc, out, err, wall, base

    def _common(self, side, sep, ub, b):
        c = self.cfg
        a = ["-m", c.model, "-t", str(side.threads), "-ub", str(ub), "-b", str(b)] + side.dev_args(sep)
        if side.devs != ["none"]:
            a += ["-ngl", str(99 if side.ngl is None else side.ngl), "-sm", "layer", "-ts", _split(side.split or [1], sep)]
        if c.flash_attn:
            a += ["-fa", c.flash_attn]
        return a

    def bench(self, side, prompts, gen, ub, b):
        """llama-bench; returns {'pp': {n: {'tps', 'ms'}}, 'tg': {'tps', 'ms_tok'}, 'sched': ...} or
        raises RunError.  The prompt runs are verbose (-v): llama.cpp's log of every context it
        creates says whether it pipelines (scheduler()); it prints nothing more during the
        timed runs on the CPU, a debug line per graph on ggml-cuda ("CUDA Graph id N reused"),
        which the decode runs, a graph per token, are spared."""
        argv = [self.cfg.llama_bench] + self._common(side, "/", ub, b) + [
            "-p", ",".join(str(p) for p in prompts) if prompts else "0", "-n", str(gen),
            "-r", str(self.cfg.reps), "-o", "json"] + (["-v"] if prompts else [])
        tag = "bench-pp" if prompts else "bench-tg"
        rc, out, err, wall, base = self._run(side, tag, argv)
        if rc != 0:
            raise RunError("%s %s: exit %s (log %s.err):\n%s" % (side.name, tag, rc, base, _tail(err)))
        try:
            tests = json.loads(out)
        except ValueError as e:
            raise RunError("%s %s: output is not JSON (%s), log %s.out" % (side.name, tag, e, base))
        res = {"pp": {}, "tg": None, "wall_s": wall, "log": base, "sched": scheduler(err) if prompts else None}
        for t in tests:
            samples = [s / 1e9 for s in t["samples_ns"]]
            med = sorted(samples)[len(samples) // 2]
            if t["n_prompt"] > 0 and t["n_gen"] == 0:
                res["pp"][t["n_prompt"]] = {"tps": t["n_prompt"] / med, "ms": med * 1e3, "samples_s": samples}
            elif t["n_gen"] > 0 and t["n_prompt"] == 0:
                res["tg"] = {"tps": t["n_gen"] / med, "ms_tok": med * 1e3 / t["n_gen"], "samples_s": samples}
        return res

    def tokens(self, side, prompt, n_gen, ub, b):
        """Greedy llama-completion; the token ids from its session file (prompt + generated)."""
        sess = os.path.join(self.logdir, "%03d-%s-session.bin" % (self.seq + 1, side.name))
        if os.path.exists(sess):
            os.unlink(sess)
        argv = [self.cfg.llama_completion] + self._common(side, ",", ub, b) + [
            "-p", prompt, "-n", str(n_gen), "-c", str(self.cfg.hash_ctx), "--temp", "0", "--seed", "1",
            "-no-cnv", "--ignore-eos", "-fit", "off", "--prompt-cache", sess, "--prompt-cache-all", "-v"]
        rc, out, err, wall, base = self._run(side, "hash", argv)
        if rc != 0:
            raise RunError("%s hash: exit %s (log %s.err):\n%s" % (side.name, rc, base, _tail(err)))
        try:
            with open(sess, "rb") as f:
                magic, version, n = struct.unpack("<III", f.read(12))
                ids = list(struct.unpack("<%di" % n, f.read(4 * n)))
        except (OSError, struct.error) as e:
            raise RunError("%s hash: no session file %s (%s)" % (side.name, sess, e))
        finally:
            if os.path.exists(sess):
                os.unlink(sess)  # it holds the whole state: large for large models
        if magic != 0x6767736E:
            raise RunError("%s hash: %s is not a llama session file" % (side.name, sess))
        info = scheduler(err)
        info["log"] = base
        return ids, info

    def logits(self, side, tokens_file, out, ub, b):
        """llama-logits (bench/llama-vs-rpc/llama-logits.cpp): the ids of tokens_file decoded
        teacher-forced with the hash run's arguments, every position's logits to out.
        {'s', 'log'} or raises RunError."""
        argv = [self.cfg.llama_logits] + self._common(side, ",", ub, b) + [
            "-c", str(self.cfg.hash_ctx), "-fit", "off", "--no-warmup", "--tokens", tokens_file,
            "--logits-out", out]
        rc, _, err, wall, base = self._run(side, "logits", argv)
        if rc != 0:
            raise RunError("%s logits: exit %s (log %s.err):\n%s" % (side.name, rc, base, _tail(err)))
        return {"s": wall, "log": base}

    def load(self, side, tag, ub, b):
        """The model's load: llama-completion with the side's devices and the
        hash run's arguments, one token of a short prompt, no warmup; its wall
        time from start to exit (process start, backends, the weights to every
        device, the context, one decode).  {'s', 'log'} or raises RunError."""
        argv = [self.cfg.llama_completion] + self._common(side, ",", ub, b) + [
            "-p", prompt_text(2, 4), "-n", "1", "-c", str(self.cfg.hash_ctx), "--temp", "0", "--seed", "1",
            "-no-cnv", "--no-warmup", "-fit", "off"]
        rc, out, err, wall, base = self._run(side, tag, argv)
        if rc != 0:
            raise RunError("%s %s: exit %s (log %s.err):\n%s" % (side.name, tag, rc, base, _tail(err)))
        return {"s": wall, "log": base}


def scheduler(err):
    """What llama.cpp's verbose log says its scheduler did, over every context
    the run created (llama-context.cpp): 'pipeline parallelism enabled' when
    the devices are split by layer, every layer is offloaded and every
    non-CPU device has async compute and events; 'retrying without pipeline
    parallelism' when its compute buffers did not fit; 'sched copies = N'
    at each reserve (N > 1: the input copies of a pipelined scheduler,
    GGML_SCHED_MAX_COPIES); 'splits = N' the graph splits (v0.5.0, the
    prompt graph's when they differ; v0.4.0: 'graph splits = N').  pipeline_parallel: enabled in every context
    and never dropped; None when the log says nothing (not verbose)."""
    enabled = err.count("pipeline parallelism enabled")
    dropped = err.count("retrying without pipeline parallelism")
    copies = [int(x) for x in re.findall(r"sched copies = (\d+)", err)]
    # "graph (pp bs=512, tg bs=1): nodes = A / B, splits = C / D" when they differ: C, the prompt's
    m = re.findall(r"graph splits = (\d+)|graph(?: \([^)]*\))?: nodes = [\d /]+, splits = (\d+)", err)
    m = [a or b for a, b in m]
    contexts = err.count("llama_context: constructing llama_context") or None
    # where the layers went ("layer N assigned to device X", debug level: verbose runs); the last
    # model loaded (llama-bench loads one per run here)
    layers = {}
    for il, dev in re.findall(r"load_tensors: layer +(\d+) assigned to device (\S+?),", err):
        if int(il) == 0:
            layers = {}
        layers[dev] = layers.get(dev, 0) + 1
    known = bool(copies) or enabled > 0
    return {"pipeline_parallel": (enabled > 0 and dropped == 0) if known else None,
            "pipeline_enabled": enabled, "pipeline_dropped": dropped,
            "sched_copies": sorted(set(copies)), "graph_splits": int(m[-1]) if m else None, "contexts": contexts,
            "layers": layers or None}


class RunError(Exception):
    pass


_ERR = re.compile(r"^[0-9.]+ E |error|failed|abort|assert", re.I)


def _tail(text, n=8):
    """The command, then its error lines (llama.cpp's E level and the like),
    else its last lines."""
    lines = [l for l in text.splitlines() if l.strip()]
    errs = [l for l in lines[1:] if _ERR.search(l)]
    return "\n".join("    " + l for l in lines[:1] + (errs[-n:] if errs else lines[1:][-n:]))


def token_hash(ids):
    return hashlib.sha256(struct.pack("<%di" % len(ids), *ids)).hexdigest()[:16]
