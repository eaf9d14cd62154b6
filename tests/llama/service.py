#!/usr/bin/env python3
"""tests/llama/service.py — llama-server over two ranks as a service, while a
rank fails (issue 29).  Called by tests/llama/service.sh (make test), or by
hand with --rpc for the same runs over ggml-rpc (a report, nothing asserted).

A supervisor thread runs llama-server the way systemd's Restart=on-failure
does (systemd/pprpc-llama-server@.service): when it exits with a non-zero
status it is started again after RESTART_S.  Four streaming /completion
requests (greedy, token ids returned) run at once; once each has some
tokens, one rank gets kill -9, SIGTERM or SIGSTOP.  Asserted (pprpc):

  * every stream ends with an SSE error event within the fault's bound
    (kill 5 s, SIGTERM 15 s: the rank's drain-ms is 10 s, SIGSTOP 10 s);
  * every token a client received equals the run without a fault at its
    position (no token computed from bytes a rank did not produce);
  * llama-server exits with status 75, by no signal (no core); the ranks
    that were not hit exit 0 when stopped at the end; a SIGTERMed rank 0;
  * the rank back (restarted on its port, or SIGCONT) -> the service gives
    the run without a fault's tokens again within RECOVER_S; the time from
    the rank's return to that first good reply is printed;
  * a rank stopped while no request runs: llama-server exits 75 within 10 s
    (the watchdog; /health would say "ok" with a rank it cannot compute on),
    and serves again after SIGCONT;
  * llama-server started while a rank is down waits (its log says so), and
    serves once the rank comes.
"""

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

N_STREAMS = 4
MIN_TOKENS = 16          # tokens each stream has before the fault
N_PREDICT = 3000         # the streams would run long past the fault
REF_TOKENS = 256         # the run without a fault: tokens per stream
RESTART_S = 0.5          # the supervisor's RestartSec
PROMPTS = ["the quick brown fox jumps over", "once upon a time there was a",
           "in a galaxy far far away the", "to be or not to be that is"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def now():
    return time.monotonic()


class Fail(Exception):
    pass


class Rank:
    """One rank (pprpcd or ggml-rpc-server) on a fixed port, restartable."""

    def __init__(self, a, index, port):
        self.a, self.index, self.port = a, index, port
        self.addr = "127.0.0.1:%d" % port
        self.proc = None
        self.starts = 0
        self.exits = []          # (how it ended, returncode)

    def start(self):
        log = open(os.path.join(self.a.dir, "rank%d.log" % self.index), "a")
        log.write("==== start %d\n" % self.starts)
        log.flush()
        if self.a.rpc:
            cmd = [self.a.rpc_server, "-H", "127.0.0.1", "-p", str(self.port), "-t", "1"]
        else:
            cmd = [self.a.pprpcd, "--listen", self.addr, "--devices", "ggml:CPU", "--threads", "1",
                   "--memory-floor-mib", "256", "--log-level", "info"]
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1
        t_end = now() + 30
        while now() < t_end:
            if self.proc.poll() is not None:
                raise Fail("rank %d exited with %d at start (log %s)" % (self.index, self.proc.returncode, log.name))
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise Fail("rank %d not listening on %d after 30 s" % (self.index, self.port))

    def signal(self, sig):
        self.proc.send_signal(sig)

    def reap(self, how, timeout=30):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            how += " (did not exit: killed)"
        self.exits.append((how, rc))
        return rc

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            return self.reap("stopped at the end")
        return None


class Supervisor(threading.Thread):
    """llama-server, restarted on a non-zero exit (systemd Restart=on-failure)."""

    def __init__(self, a, ranks, port):
        super().__init__(daemon=True)
        self.a, self.ranks, self.port = a, ranks, port
        self.exits = []          # (time, returncode)
        self.proc = None
        self.quit = False
        self.lock = threading.Lock()
        self.log = os.path.join(a.dir, "llama-server.log")

    def cmd(self):
        c = [self.a.server, "-m", self.a.model, "--host", "127.0.0.1", "--port", str(self.port), "-c", "8192",
             "-np", str(N_STREAMS), "-t", "1", "--no-warmup", "-ngl", "99"]
        if self.a.rpc:
            c += ["--rpc", ",".join(r.addr for r in self.ranks), "-dev", "RPC0,RPC1"]
        else:
            c += ["-dev", "PPRPC0,PPRPC1"]
        return c

    def run(self):
        env = dict(os.environ)
        if not self.a.rpc:
            env.update(GGML_BACKEND_PATH=self.a.plugin, PPRPC_RANKS=",".join(r.addr for r in self.ranks))
            env.setdefault("PPRPC_WAIT_RANKS_MS", "120000")
        while not self.quit:
            with open(self.log, "a") as log:
                log.write("==== start at %.3f\n" % now())
                log.flush()
                with self.lock:
                    self.proc = subprocess.Popen(self.cmd(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                                 start_new_session=True)
                rc = self.proc.wait()
                log.write("==== exit %d at %.3f\n" % (rc, now()))
            self.exits.append((now(), rc))
            if self.quit or rc == 0:
                break
            time.sleep(RESTART_S)

    def stop(self):
        self.quit = True
        with self.lock:
            p = self.proc
        if p and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        self.join(timeout=40)

    def log_text(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""


def request(port, body, timeout):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", "/completion", json.dumps(body), {"Content-Type": "application/json"})
    return c, c.getresponse()


def health(port):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", "/health")
        r = c.getresponse()
        r.read()
        c.close()
        return r.status
    except OSError:
        return None


def complete(port, prompt, n, timeout=120):
    """A plain /completion: (tokens, error text)."""
    body = {"prompt": prompt, "n_predict": n, "temperature": 0, "ignore_eos": True, "return_tokens": True,
            "cache_prompt": False}
    try:
        c, r = request(port, body, timeout)
        data = r.read()
        c.close()
    except OSError as e:
        return None, "transport: %s" % e
    try:
        j = json.loads(data)
    except ValueError:
        return None, "not JSON: %r" % data[:200]
    if r.status != 200 or "error" in j:
        return None, "HTTP %d: %s" % (r.status, json.dumps(j.get("error", j))[:300])
    return j.get("tokens", []), None


class Stream(threading.Thread):
    """One streaming /completion; records tokens and how and when it ended."""

    def __init__(self, port, prompt, n):
        super().__init__(daemon=True)
        self.port, self.prompt, self.n = port, prompt, n
        # (tokens_predicted, tokens) of each event: a token that is not whole
        # UTF-8 is held back and left out of the next event's "tokens", so
        # positions come from tokens_predicted, not from counting
        self.events = []
        self.count = 0
        self.end = None          # "error" | "done" | "eof" | "transport"
        self.error = ""
        self.t_end = None

    def run(self):
        body = {"prompt": self.prompt, "n_predict": self.n, "temperature": 0, "ignore_eos": True,
                "return_tokens": True, "stream": True, "cache_prompt": False}
        try:
            c, r = request(self.port, body, 300)
            if r.status != 200:
                self.end, self.error = "error", "HTTP %d: %s" % (r.status, r.read()[:300])
                return
            while True:
                line = r.readline()
                if not line:
                    self.end = self.end or "eof"
                    break
                line = line.decode(errors="replace").strip()
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    self.end = "done"
                    break
                ev = json.loads(line[6:])
                if "error" in ev:
                    self.end, self.error = "error", json.dumps(ev["error"])[:400]
                    break
                n = ev.get("tokens_predicted", 0)
                if ev.get("tokens"):
                    self.events.append((n, ev["tokens"]))
                    self.count = max(self.count, n)
                if ev.get("stop"):
                    self.end = "done"
            c.close()
        except (OSError, http.client.HTTPException, ValueError) as e:
            self.end, self.error = "transport", "%s: %s" % (type(e).__name__, e)
        finally:
            self.t_end = now()


def matches(stream, ref):
    """True when every token the stream delivered is ref's at its position;
    None when it delivered more than ref holds (cannot tell)."""
    if stream.count > len(ref):
        return None
    return all(toks == ref[n - len(toks):n] for n, toks in stream.events)


def streams(port, n):
    ss = [Stream(port, p, n) for p in PROMPTS[:N_STREAMS]]
    for s in ss:
        s.start()
    return ss


def concurrent_completions(port, n):
    """The prompts as N_STREAMS plain requests at once: their tokens (None: failed)."""
    out = [None] * N_STREAMS

    def one(i):
        out[i] = complete(port, PROMPTS[i], n, timeout=600)[0]
    ts = [threading.Thread(target=one, args=(i,)) for i in range(N_STREAMS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def wait_ready(port, ref, bound, what):
    """Until the service gives ref's tokens for prompt 0 (short form); the time."""
    t0 = now()
    last = ""
    while now() - t0 < bound:
        if health(port) == 200:
            toks, err = complete(port, PROMPTS[0], 32)
            if toks is not None:
                if toks != ref[0][:32]:
                    raise Fail("%s: the first reply differs from the run without a fault: %s vs %s"
                               % (what, toks[:8], ref[0][:8]))
                return now() - t0
            last = err
        time.sleep(0.1)
    raise Fail("%s: no good reply within %.0f s (last: %s)" % (what, bound, last))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True, help="llama.cpp's bin folder")
    ap.add_argument("--pprpcd")
    ap.add_argument("--plugin")
    ap.add_argument("--model", required=True)
    ap.add_argument("--dir", required=True, help="logs")
    ap.add_argument("--rpc", action="store_true", help="ggml-rpc-server ranks: report only")
    ap.add_argument("--faults", default="kill,term,stop,idle-stop,start-down")
    ap.add_argument("--stop-cap", type=float, default=60, help="--rpc: give up on a SIGSTOP after this")
    a = ap.parse_args()
    a.server = os.path.join(a.bin, "llama-server")
    a.rpc_server = os.path.join(a.bin, "ggml-rpc-server")
    bounds = {"kill": float(os.environ.get("BOUND_KILL_S", 5)), "term": float(os.environ.get("BOUND_TERM_S", 15)),
              "stop": float(os.environ.get("BOUND_STOP_S", 10)), "idle": float(os.environ.get("BOUND_IDLE_S", 10))}
    recover_s = float(os.environ.get("RECOVER_S", 60))
    side = "ggml-rpc" if a.rpc else "pprpc"
    ranks = [Rank(a, i, free_port()) for i in range(2)]
    sup = None
    problems = []
    report = []

    def check(cond, msg):
        if not cond:
            problems.append(msg)
            print("  FAIL: " + msg, flush=True)

    def recovery(line, what, how):
        """The time from the rank's return to the first good reply, into line."""
        try:
            dt = wait_ready(port, ref, recover_s, what)
            print("  %s: the service answered the run without a fault's tokens %.2f s later" % (how, dt), flush=True)
            line["recovered_s"] = dt
            return True
        except Fail as e:
            print("  " + str(e), flush=True)
            line["recovered_s"] = None
            if not a.rpc:
                problems.append(str(e))
            return False

    try:
        for r in ranks:
            r.start()
        port = free_port()
        sup = Supervisor(a, ranks, port)
        sup.start()
        # the run without a fault: the reference tokens
        t0 = now()
        while health(port) != 200:
            if now() - t0 > 120:
                raise Fail("llama-server not healthy after 120 s:\n" + sup.log_text()[-2000:])
            time.sleep(0.1)
        # (plain requests: a stream holds back a last token that is not whole UTF-8)
        ref = concurrent_completions(port, REF_TOKENS)
        again = concurrent_completions(port, REF_TOKENS)
        for i in range(N_STREAMS):
            if ref[i] is None or len(ref[i]) != REF_TOKENS:
                raise Fail("the run without a fault: request %d gave %s" % (i, ref[i]))
        stable = again == ref
        print("%s: run without a fault: %d concurrent requests x %d tokens%s" % (side, N_STREAMS, REF_TOKENS,
              ", equal in a second run" if stable else ""), flush=True)
        if not stable:
            raise Fail("two runs without a fault gave different tokens: the comparison would mean nothing")
        # and streamed the same way as under the faults, they check against it
        ss = streams(port, 64)
        for s in ss:
            s.join(600)
        if not all(s.end == "done" and s.count == 64 and matches(s, ref[i]) for i, s in enumerate(ss)):
            raise Fail("four streams without a fault do not match the plain requests: %s"
                       % [(s.end, s.count, matches(s, ref[i])) for i, s in enumerate(ss)])
        report.append({"reference": ref})

        for fault in [f for f in a.faults.split(",") if f in ("kill", "term", "stop")]:
            victim = ranks[1] if fault != "term" else ranks[0]
            n_exits = len(sup.exits)
            ss = streams(port, N_PREDICT)
            t_end = now() + 120
            while now() < t_end and not all(s.count >= MIN_TOKENS or s.end for s in ss):
                time.sleep(0.005)
            if not all(s.count >= MIN_TOKENS for s in ss):
                raise Fail("%s: the streams did not get %d tokens each: %s"
                           % (fault, MIN_TOKENS, [(s.count, s.end, s.error) for s in ss]))
            before = [s.count for s in ss]
            sig = {"kill": signal.SIGKILL, "term": signal.SIGTERM, "stop": signal.SIGSTOP}[fault]
            t_f = now()
            victim.signal(sig)
            cap = a.stop_cap if a.rpc else bounds[fault] + 20
            for s in ss:
                s.join(max(0.1, t_f + cap - now()))
            print("%s: %s of rank %d (%s) with %d streams running (%s tokens each):" % (
                side, {"kill": "kill -9", "term": "SIGTERM", "stop": "SIGSTOP"}[fault], victim.index,
                victim.addr, N_STREAMS, "/".join(map(str, before))), flush=True)
            line = {"fault": fault, "side": side, "streams": []}
            for i, s in enumerate(ss):
                good = matches(s, ref[i])
                dt = (s.t_end - t_f) if s.t_end else None
                print("  stream %d: %s, %d tokens (%s)%s" % (
                    i, "%s after %.2f s" % (s.end, dt) if dt is not None else "still running %.0f s after the fault" % cap,
                    s.count,
                    "all equal to the run without a fault" if good else
                    "UNCHECKED: more than the reference" if good is None else "WRONG TOKENS",
                    (": " + s.error[:160]) if s.error else ""), flush=True)
                line["streams"].append({"end": s.end, "after_s": dt, "tokens": s.count, "good": good,
                                        "error": s.error, "events": s.events})
                if not a.rpc:
                    check(s.end == "error", "%s: stream %d ended %s, not with an error event" % (fault, i, s.end))
                    check(dt is not None and dt <= bounds[fault],
                          "%s: stream %d ended after %s s, bound %.0f s" % (fault, i, dt, bounds[fault]))
                    check(good is True, "%s: stream %d: tokens not those of the run without a fault" % (fault, i))
            # the server: exits 75, then is restarted by the supervisor
            t_x = now() + 30
            while now() < t_x and len(sup.exits) <= n_exits:
                time.sleep(0.05)
            exits = sup.exits[n_exits:]
            if exits:
                rc = exits[0][1]
                print("  llama-server exited with %s %.2f s after the fault" % (
                    "status %d" % rc if rc >= 0 else "signal %d (%s)" % (-rc, signal.Signals(-rc).name),
                    exits[0][0] - t_f), flush=True)
                line["server_exit"] = rc
            else:
                print("  llama-server still running 30 s after the fault", flush=True)
                line["server_exit"] = None
            if not a.rpc:
                check(bool(exits) and exits[0][1] == 75, "%s: llama-server did not exit with status 75: %s"
                      % (fault, exits))
            # the rank returns
            if fault == "stop":
                victim.signal(signal.SIGCONT)
                how = "SIGCONT"
            else:
                rc = victim.reap(fault)
                if fault == "term":
                    print("  the SIGTERMed rank exited with %d" % rc, flush=True)
                    if not a.rpc:
                        check(rc == 0, "term: the rank exited with %d, not 0" % rc)
                victim.start()
                how = "restarted on its port"
            if not recovery(line, fault, "rank " + how) and a.rpc:
                # restart llama-server by hand so the next fault starts clean
                with sup.lock:
                    p = sup.proc
                if p and p.poll() is None:
                    p.kill()
                wait_ready(port, ref, recover_s, fault + " (after a manual restart)")
            report.append(line)

        if "idle-stop" in a.faults.split(","):
            # no request in flight: the watchdog alone finds the stopped rank, and the
            # process exits so its supervisor sees it (/health would say "ok")
            victim = ranks[1]
            n_exits = len(sup.exits)
            t_f = now()
            victim.signal(signal.SIGSTOP)
            t_unhealthy = None
            cap = a.stop_cap if a.rpc else bounds["idle"] + 10
            while now() - t_f < cap and len(sup.exits) <= n_exits:
                if t_unhealthy is None and health(port) != 200:
                    t_unhealthy = now() - t_f
                time.sleep(0.05)
            exits = sup.exits[n_exits:]
            print("%s: SIGSTOP of rank 1 (%s) while idle: %s; /health %s" % (
                side, victim.addr,
                "llama-server exited with %d %.2f s later" % (exits[0][1], exits[0][0] - t_f) if exits
                else "llama-server still running %.0f s later" % cap,
                "stopped answering 200 %.2f s later" % t_unhealthy if t_unhealthy is not None
                else "answered 200 until the process exited" if exits else "still answered 200"), flush=True)
            line = {"fault": "idle-stop", "side": side, "server_exit": exits[0][1] if exits else None,
                    "exit_after_s": exits[0][0] - t_f if exits else None}
            if not a.rpc:
                check(bool(exits) and exits[0][1] == 75 and exits[0][0] - t_f <= bounds["idle"],
                      "idle-stop: llama-server did not exit with status 75 within %.0f s: %s"
                      % (bounds["idle"], [(t - t_f, rc) for t, rc in exits]))
            victim.signal(signal.SIGCONT)
            recovery(line, "idle-stop", "rank SIGCONT")
            report.append(line)

        if "start-down" in a.faults.split(","):
            sup.stop()
            victim = ranks[1]
            victim.signal(signal.SIGTERM)
            victim.reap("stopped for start-down")
            sup = Supervisor(a, ranks, port)
            sup.start()
            time.sleep(4)
            waiting = sup.proc is not None and sup.proc.poll() is None
            txt = sup.log_text()
            said = "waiting for rank 1" in txt
            print("%s: llama-server started with rank 1 down: after 4 s %s; %s; exits so far %s" % (
                side, "still running" if waiting else "not running",
                "its log says it waits for rank 1" if said else "its log does not say it waits",
                [rc for _, rc in sup.exits]), flush=True)
            if not a.rpc:
                check(waiting and said, "start-down: llama-server is not waiting for rank 1")
            victim.start()
            line = {"fault": "start-down", "side": side}
            recovery(line, "start-down", "rank 1 started")
            line["exits"] = list(sup.exits)
            report.append(line)
    except Fail as e:
        problems.append(str(e))
        print("FAIL: " + str(e), flush=True)
    finally:
        if sup:
            sup.stop()
            for t, rc in sup.exits:
                if rc < 0 and rc != -signal.SIGTERM:
                    msg = "llama-server ended by signal %d (%s)" % (-rc, signal.Signals(-rc).name)
                    print(msg, flush=True)
                    if not a.rpc:
                        problems.append(msg)
        for r in ranks:
            rc = r.stop()
            if rc not in (None, 0) and not a.rpc:
                problems.append("rank %d exited with %d when stopped at the end" % (r.index, rc))
        with open(os.path.join(a.dir, "report.json"), "w") as f:
            json.dump(report, f, indent=1)
    if problems:
        print("service (%s): FAILED: %d problem(s); logs in %s" % (side, len(problems), a.dir), flush=True)
        return 1
    print("service (%s): %s" % (side, "reported (nothing asserted)" if a.rpc else "passed"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
