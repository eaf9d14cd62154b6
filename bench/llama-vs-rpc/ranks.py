"""Rank processes: N pprpcd or N ggml-rpc-server on 127.0.0.1 ephemeral ports,
same threads and device each; their memory and (pprpcd) their STATS.
With --net each rank runs in a network namespace of its own (netns.py) on
its address there, port RANK_PORT, and pprpcd with the run's key."""

import json
import os
import signal
import socket
import subprocess
import time


RANK_PORT = 50052  # with --net: every rank has an address of its own


class RankError(Exception):
    pass


def _listening(pid, host, port):
    """Whether the process pid (in its own network namespace) has a TCP socket
    listening on host:port: its /proc/PID/net/tcp, which shows the namespace
    the process is in (no connection needed from this one)."""
    want = "%s:%04X" % ("".join("%02X" % int(x) for x in reversed(host.split("."))), port)
    try:
        with open("/proc/%d/net/tcp" % pid) as f:
            next(f)
            return any(l.split()[1] == want and l.split()[3] == "0A" for l in f)
    except (OSError, StopIteration, IndexError):
        return False


def _free_port():
    # ggml-rpc-server cannot bind port 0 and report it: take a free one from the
    # kernel and hand it over (nothing else on this host is racing for it).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port, proc, log, timeout):
    t_end = time.time() + timeout
    while time.time() < t_end:
        if proc.poll() is not None:
            raise RankError("exited with %d before listening; log %s:\n%s" % (proc.returncode, log, _tail(log)))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RankError("not listening on %d after %.0f s; log %s" % (port, timeout, log))


def _wait_listen(host, port, proc, log, timeout):
    t_end = time.time() + timeout
    while time.time() < t_end:
        if proc.poll() is not None:
            raise RankError("exited with %d before listening; log %s:\n%s" % (proc.returncode, log, _tail(log)))
        if _listening(proc.pid, host, port):
            return
        time.sleep(0.05)
    raise RankError("not listening on %s:%d after %.0f s; log %s" % (host, port, timeout, log))


def _tail(path, n=15):
    """The log's last lines; when it printed its usage (a bad option), what it said before it."""
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return ""
    u = next((i for i, l in enumerate(lines) if l.startswith(("usage:", "Usage:"))), None)
    if u:
        return "".join(lines[max(0, u - n):u]) + "(its usage text follows in %s)\n" % path
    return "".join(lines[-n:])


class Rank:
    """One daemon.  kind: 'pprpc' | 'rpc'."""

    def __init__(self, kind, index, device, proc, port, log, host="127.0.0.1", ns=None):
        self.kind, self.index, self.device, self.proc, self.port, self.log = kind, index, device, proc, port, log
        self.host, self.ns = host, ns
        self.addr = "%s:%d" % (host, port)

    def alive(self):
        return self.proc.poll() is None

    def status(self):
        """VmRSS / VmHWM (bytes) of the process, or {} when gone."""
        out = {}
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith(("VmRSS:", "VmHWM:")):
                        k, v = line.split(":", 1)
                        out[k] = int(v.split()[0]) * 1024
        except OSError:
            pass
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start(kind, n, device, threads, cfg, logdir, extra=(), name=None, hosts=None, per_rank=None):
    """Start n ranks of one kind; on any failure stop the ones started and raise.
    name: the side (logs; default kind); hosts: [(netns, address)] per rank
    (--net) or None (127.0.0.1); per_rank(i) -> (extra args, extra env)."""
    ranks = []
    name = name or kind
    proc = None
    try:
        for i in range(n):
            proc = None
            log = os.path.join(logdir, "%s-rank%d.log" % (name, i))
            lf = open(log, "w")
            ns, host = hosts[i] if hosts else (None, "127.0.0.1")
            pre = (cfg.rank_prefix(i) if cfg.rank_prefix else []) + (["ip", "netns", "exec", ns] if ns else [])
            args, env = per_rank(i) if per_rank else ([], {})
            env = dict(cfg.rank_env, **env)
            t0 = time.monotonic()
            if kind == "pprpc":
                pf = os.path.join(logdir, "%s-rank%d.port" % (name, i))
                if os.path.exists(pf):
                    os.unlink(pf)
                key = ["--auth-key-file", cfg.auth_key] if cfg.auth_key else []
                cmd = pre + [cfg.pprpcd, "--listen", "%s:%d" % (host, RANK_PORT if ns else 0), "--port-file", pf,
                             "--devices", device.pprpc, "--threads", str(threads)] + key + list(extra) + list(args)
                proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
                t_end = time.time() + cfg.start_timeout
                port = None
                while time.time() < t_end:
                    if proc.poll() is not None:
                        raise RankError("pprpcd rank %d (%s) exited with %d: %s\n%s" % (
                            i, name, proc.returncode, " ".join(cmd), _tail(log)))
                    try:
                        with open(pf) as f:
                            txt = f.read().strip()
                        if txt:
                            port = int(txt)
                            break
                    except (OSError, ValueError):
                        pass
                    time.sleep(0.05)
                if port is None:
                    proc.kill()
                    proc.wait()
                    raise RankError("pprpcd rank %d wrote no port file in %.0f s; log %s" % (i, cfg.start_timeout, log))
            else:
                port = RANK_PORT if ns else _free_port()
                cmd = pre + [cfg.rpc_server, "-H", host, "-p", str(port), "-t", str(threads),
                             "-d", device.rpc] + list(extra) + list(args)
                proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)
                try:
                    if ns:
                        _wait_listen(host, port, proc, log, cfg.start_timeout)
                    else:
                        _wait_port(port, proc, log, cfg.start_timeout)
                except RankError as e:
                    proc.kill()
                    proc.wait()
                    raise RankError("ggml-rpc-server rank %d: %s" % (i, e))
            lf.close()
            ranks.append(Rank(kind, i, device, proc, port, log, host, ns))
            ranks[-1].cmd = cmd
            ranks[-1].start_s = time.monotonic() - t0
    except BaseException:
        # the one being started too (Ctrl-C while it starts)
        if proc is not None and proc.poll() is None and all(r.proc is not proc for r in ranks):
            proc.kill()
            proc.wait()
        for r in ranks:
            r.stop()
        raise
    return ranks


def pprpc_stats(cfg, rank):
    """pprpcctl stats --json of one rank, parsed; raises RankError."""
    try:
        key = ["--auth-key-file", cfg.auth_key] if cfg.auth_key else []
        p = subprocess.run(cfg.client_prefix + [cfg.pprpcctl, "stats", "--rank", rank.addr, "--json"] + key,
                           capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise RankError("pprpcctl stats %s: timed out" % rank.addr)
    if p.returncode != 0:
        raise RankError("pprpcctl stats %s: exit %d: %s" % (rank.addr, p.returncode, p.stderr.strip()[-300:]))
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise RankError("pprpcctl stats %s: not JSON (%s): %s" % (rank.addr, e, p.stdout[:300]))


def stats_delta(before, after):
    """What one run did on a rank: device counters and boundaries, after - before."""
    d = {"graph_creates": 0, "graph_runs": 0, "errors": 0, "commands": 0, "gpu_sends": 0, "gpu_recvs": 0,
         "request_errors": after.get("request_errors", 0) - before.get("request_errors", 0),
         "protocol_errors": after.get("protocol_errors", 0) - before.get("protocol_errors", 0),
         "free_bytes_min": None, "boundaries": [], "exec": {}}
    # pprpcctl stats --json names every value as the proto does: the
    # device's name and free memory sit in its "info" message
    name = lambda x: x.get("name") or x.get("info", {}).get("name")
    bdev = {name(x): x for x in before.get("devices", [])}
    for dev in after.get("devices", []):
        b = bdev.get(name(dev), {})
        for k in ("graph_creates", "graph_runs", "errors", "commands", "gpu_sends", "gpu_recvs"):
            d[k] += dev.get(k, 0) - b.get(k, 0)
        f = dev.get("free_bytes", dev.get("info", {}).get("free_bytes"))
        if f is not None and (d["free_bytes_min"] is None or f < d["free_bytes_min"]):
            d["free_bytes_min"] = f
    # a boundary is (peer, direction); "path" is the link of its last transfer, not part of
    # its identity: keyed with it, a boundary whose prefill went p2p-ipc and whose decode goes
    # p2p-tcp had no "before", and the decode delta counted the prefill's transfers too
    bb = {(x["peer"], x["direction"]): x for x in before.get("boundaries", [])}
    for x in after.get("boundaries", []):
        b = bb.get((x["peer"], x["direction"]), {})
        row = {k: x[k] for k in ("peer", "direction", "path")}
        for k in ("transfers", "bytes", "time_us", "errors", "copy_us"):
            row[k] = x.get(k, 0) - b.get(k, 0)
        if row["transfers"] or row["errors"]:
            d["boundaries"].append(row)
    # where the rank's queues spent their time, by command type (all devices); of it, what
    # commands of loading clients took (load_*: before the connection's first graph request)
    be = {(x.get("device", 0), x["type"]): x for x in before.get("exec_times", [])}
    for x in after.get("exec_times", []):
        b = be.get((x.get("device", 0), x["type"]), {})
        n, ns = x.get("execs", 0) - b.get("execs", 0), x.get("ns", 0) - b.get("ns", 0)
        if n:
            e = d["exec"].setdefault(x["type"], {"execs": 0, "ns": 0, "load_execs": 0, "load_ns": 0})
            e["execs"] += n
            e["ns"] += ns
            e["load_execs"] += x.get("load_execs", 0) - b.get("load_execs", 0)
            e["load_ns"] += x.get("load_ns", 0) - b.get("load_ns", 0)
    # clients' requests by type, load and run, and the tensor bytes they named (a daemon
    # without request_counts: None, the run is not split)
    if "request_counts" in after:
        d["requests"] = {}
        br = {x["type"]: x for x in before.get("request_counts", [])}
        for x in after["request_counts"]:
            b = br.get(x["type"], {})
            v = {k: x.get(k, 0) - b.get(k, 0) for k in ("load_requests", "load_bytes", "run_requests", "run_bytes")}
            if v["load_requests"] or v["run_requests"]:
                d["requests"][x["type"]] = v
    else:
        d["requests"] = None
    # weights filled from the rank's own files or cache (pprpc-file, pprpc-cache): load only
    wa, wb = after.get("weights") or {}, before.get("weights") or {}
    if wa:
        d["weights"] = {k: wa.get(k, 0) - wb.get(k, 0) for k in ("fills", "fills_failed", "file_bytes",
                                                                 "cache_hit_bytes", "file_ns", "cache_ns")}
    return d
