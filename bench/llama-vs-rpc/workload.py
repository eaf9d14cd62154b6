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
    def __init__(self, name, env, devs, rpc=None, split=None, kind=None):
        self.name, self.env, self.devs, self.rpc = name, env, devs, rpc  # devs: device names or ['none']
        self.split = split  # layer split over devs (-ts); None: one device
        self.kind = kind or name  # pprpc, rpc or local: what the ranks are (config.SIDES)

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
            a += ["-ngl", "99", "-sm", "layer", "-ts", _split(side.split or [1], sep)]
        if c.flash_attn:
            a += ["-fa", c.flash_attn]
        return a

    def bench(self, side, prompts, gen, ub, b):
        """llama-bench; returns {'pp': {n: {'tps', 'ms'}}, 'tg': {'tps', 'ms_tok'}} or raises RunError."""
        argv = [self.cfg.llama_bench] + self._common(side, "/", ub, b) + [
            "-p", ",".join(str(p) for p in prompts) if prompts else "0", "-n", str(gen),
            "-r", str(self.cfg.reps), "-o", "json"]
        tag = "bench-pp" if prompts else "bench-tg"
        rc, out, err, wall, base = self._run(side, tag, argv)
        if rc != 0:
            raise RunError("%s %s: exit %s (log %s.err):\n%s" % (side.name, tag, rc, base, _tail(err)))
        try:
            tests = json.loads(out)
        except ValueError as e:
            raise RunError("%s %s: output is not JSON (%s), log %s.out" % (side.name, tag, e, base))
        res = {"pp": {}, "tg": None, "wall_s": wall, "log": base}
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
        # what llama.cpp decided (its verbose log): pipelined or not, graph splits
        # v0.4.0: "graph splits = N"; v0.5.0: "sched_reserve: graph: nodes = M, splits = N"
        m = re.findall(r"graph splits = (\d+)|graph: nodes = \d+, splits = (\d+)", err)
        m = [a or b for a, b in m]
        info = {"pipeline_parallel": "pipeline parallelism enabled" in err,
                "graph_splits": int(m[-1]) if m else None, "log": base}
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
