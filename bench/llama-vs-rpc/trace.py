"""The pipeline picture: one extra round with a recording TCP proxy in front of
every rank, drawn as an SVG (one panel per side, one lane per connection of a
rank, one bar per request from its first byte to its last reply byte).

The proxy decodes only the framing, both protocols being self-delimiting:
  pprpc     32-byte header (type at 6, flags at 8, meta and bulk lengths, request id)
  ggml-rpc  request  | cmd u8 | size u64 | data |, reply | size u64 | data |,
            replies in order for the commands that have one
It adds a little latency to every message, so this round is not part of the
table: it shows where the time goes, not how much there is.
"""

import json
import os
import re
import socket
import struct
import threading
import time

import workload
from config import ROOT

RPC_CMDS = ["ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE", "FREE_BUFFER", "BUFFER_CLEAR",
            "SET_TENSOR", "SET_TENSOR_HASH", "GET_TENSOR", "COPY_TENSOR", "GRAPH_COMPUTE", "GET_DEVICE_MEMORY",
            "INIT_TENSOR", "GET_ALLOC_SIZE", "HELLO", "DEVICE_COUNT", "GRAPH_RECOMPUTE", "MEMSET_TENSOR"]
# ggml-rpc.cpp (protocol 6.0): the commands the server answers.
RPC_REPLIES = {"HELLO", "DEVICE_COUNT", "ALLOC_BUFFER", "GET_ALLOC_SIZE", "GET_ALIGNMENT", "GET_MAX_SIZE",
               "BUFFER_GET_BASE", "SET_TENSOR_HASH", "GET_TENSOR", "COPY_TENSOR", "GET_DEVICE_MEMORY"}
F_REPLY, F_QUEUED, F_MORE = 1, 8, 16

CATEGORY = [
    ("compute", "#4e79a7", ("GRAPH_RUN", "GRAPH_COMPUTE", "GRAPH_RECOMPUTE", "GGML_GRAPH_CREATE", "GRAPH_CREATE")),
    ("to rank", "#59a14f", ("TENSOR_SET", "SET_TENSOR", "SET_TENSOR_HASH", "MEMSET_TENSOR", "BUFFER_CLEAR")),
    ("from rank", "#f28e2b", ("TENSOR_GET", "GET_TENSOR")),
    ("boundary", "#e15759", ("SEND", "RECV", "PULL", "PULL_RELEASE", "COPY_TENSOR", "TENSOR_COPY")),
    ("sync", "#b07aa1", ("FENCE", "HOST_WAIT", "WAIT", "SIGNAL", "SUBSCRIBE")),
]


def _pprpc_names():
    names = {}
    try:
        with open(os.path.join(ROOT, "proto/msgtype.h")) as f:
            for m in re.finditer(r"MSG_([A-Z0-9_]+)\s*=\s*(\d+)", f.read()):
                names[int(m.group(2))] = m.group(1)
    except OSError:
        pass
    return names


class Conn:
    def __init__(self, proxy, cid, kind, t0):
        self.proxy, self.cid, self.kind, self.t0 = proxy, cid, kind, t0
        self.events = []   # (name, t_start, t_end, bytes, queued)
        self.pending = {}  # pprpc: req id -> [name, t0, bytes, queued]
        self.fifo = []     # ggml-rpc: requests awaiting a reply
        self.lock = threading.Lock()


class _Reader:
    """Cuts a byte stream into frames: feed(data, now) -> [(header info, t_first, t_last)]."""

    def __init__(self, kind, to_server):
        self.kind, self.to_server = kind, to_server
        self.buf = b""
        self.need = None
        self.t_first = None
        self.hello_done = False

    def feed(self, data, now):
        out = []
        self.buf += data
        if self.t_first is None and self.buf:
            self.t_first = now
        while True:
            if self.need is None:
                hlen = 32 if self.kind == "pprpc" else (9 if self.to_server else 8)
                if len(self.buf) < hlen:
                    break
                if self.kind == "pprpc":
                    typ, flags, mlen, blen, rid = struct.unpack_from("<HIIQQ", self.buf, 6)
                    self.info = (typ, flags, rid, 32 + mlen + blen)
                    self.need = 32 + mlen + blen
                elif self.to_server:
                    cmd, size = struct.unpack_from("<BQ", self.buf, 0)
                    self.info = (cmd, size)
                    self.need = 9 + size
                else:
                    (size,) = struct.unpack_from("<Q", self.buf, 0)
                    self.info = (size,)
                    self.need = 8 + size
            if len(self.buf) < self.need:
                # keep only what is needed to know the frame; drop payload bytes as they pass
                keep = 32 if self.kind == "pprpc" else 9
                if len(self.buf) > keep:
                    self.need -= len(self.buf) - keep
                    self.buf = self.buf[:keep]
                break
            self.buf = self.buf[self.need:]
            out.append((self.info, self.t_first, now))
            self.need = None
            self.t_first = now if self.buf else None
        return out


class Proxy:
    """Listens on an ephemeral port, forwards to target, records frames."""

    def __init__(self, kind, target, t0):
        self.kind, self.target, self.t0 = kind, target, t0
        self.names = _pprpc_names() if kind == "pprpc" else dict(enumerate(RPC_CMDS))
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.conns = []
        self.threads = []
        self.closing = False
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()

    def _accept(self):
        while not self.closing:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            host, port = self.target.rsplit(":", 1)
            try:
                s = socket.create_connection((host, int(port)))
            except OSError:
                c.close()
                continue
            for x in (c, s):
                x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Conn(self, len(self.conns), self.kind, self.t0)
            self.conns.append(conn)
            for src, dst, up in ((c, s, True), (s, c, False)):
                t = threading.Thread(target=self._pump, args=(conn, src, dst, up), daemon=True)
                t.start()
                self.threads.append(t)

    def _pump(self, conn, src, dst, up):
        rd = _Reader(self.kind, up)
        try:
            while True:
                data = src.recv(1 << 20)
                if not data:
                    break
                now = time.perf_counter() - self.t0
                frames = rd.feed(data, now)
                dst.sendall(data)
                for f in frames:
                    self._record(conn, up, f)
        except OSError:
            pass
        for x in (src, dst):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _record(self, conn, up, frame):
        info, ta, tb = frame
        with conn.lock:
            if self.kind == "pprpc":
                typ, flags, rid, size = info
                name = self.names.get(typ, "type%d" % typ)
                if up and not flags & F_REPLY:
                    if flags & F_QUEUED and name != "TENSOR_GET":
                        conn.events.append((name, ta, tb, size, True))
                    else:
                        conn.pending[rid] = [name, ta, size]
                elif flags & F_REPLY and rid in conn.pending:
                    p = conn.pending[rid]
                    p[2] += size
                    if not flags & F_MORE:
                        del conn.pending[rid]
                        conn.events.append((p[0], p[1], tb, p[2], False))
            else:
                if up:
                    cmd, size = info
                    name = self.names.get(cmd, "cmd%d" % cmd)
                    if name in RPC_REPLIES:
                        conn.fifo.append([name, ta, 9 + size])
                    else:
                        conn.events.append((name, ta, tb, 9 + size, True))
                elif conn.fifo:
                    name, t1, n = conn.fifo.pop(0)
                    conn.events.append((name, t1, tb, n + info[0] + 8, False))

    def close(self):
        self.closing = True
        try:
            self.sock.close()
        except OSError:
            pass


def traced_round(bench, svg_path, phase="pp"):
    """Run one prompt run (llama-bench's warmup pass and timed pass), or with
    phase 'tg' one decode run, per remote side through proxies; write the SVG
    and the events next to it (.json); return what it drew."""
    cfg = bench.cfg
    panels = []
    for kind in ("pprpc", "rpc"):
        if kind not in cfg.sides:
            continue
        bench.progress("traced round: %s through recording proxies" % kind)
        t0 = time.perf_counter()
        proxies = [Proxy(kind, r.addr, t0) for r in bench.ranks[kind]]
        side = bench.make_side(kind)
        addrs = [p.addr for p in proxies]
        if kind == "pprpc":
            side.env = dict(side.env, PPRPC_RANKS=",".join(addrs))
        else:
            side.rpc = addrs
        err = None
        try:
            if phase == "pp":
                r = bench.runner.bench(side, [max(cfg.prompts)], 0, cfg.ubatch, max(cfg.batch, cfg.ubatch))
                tps = r["pp"].get(max(cfg.prompts), {}).get("tps")
            else:
                r = bench.runner.bench(side, [], cfg.gen, cfg.ubatch, max(cfg.batch, cfg.ubatch))
                tps = (r["tg"] or {}).get("tps")
        except workload.RunError as e:
            err, tps = str(e), None
        time.sleep(0.2)
        for p in proxies:
            p.close()
        lanes = []
        for i, p in enumerate(proxies):
            for c in p.conns:
                with c.lock:
                    ev = list(c.events) + [(x[0], x[1], x[1], x[2], True) for x in c.pending.values()]
                if ev:
                    lanes.append(("rank %d conn %d" % (i, c.cid), ev))
        panels.append({"side": kind, "lanes": lanes, "error": err, "tps": tps})
    _write_svg(svg_path, cfg, panels, phase)
    with open(os.path.splitext(svg_path)[0] + ".json", "w") as f:
        json.dump(panels, f)
    return {"svg": os.path.abspath(svg_path),
            "sides": {p["side"]: {"events": sum(len(l[1]) for l in p["lanes"]), "error": p["error"],
                                  "traced_tok_s": p["tps"]} for p in panels}}


def _cat(name):
    for label, color, names in CATEGORY:
        if name in names:
            return label, color
    return "other", "#bab0ac"


def _write_svg(path, cfg, panels, phase):
    W, left, lane_h, gap = 1100.0, 170.0, 22.0, 46.0
    for p in panels:
        evs = [e for _, ev in p["lanes"] for e in ev]
        # from the first graph on: loading the weights is not the pipeline
        p["t0"] = min((e[1] for e in evs if _cat(e[0])[0] == "compute"), default=min((e[1] for e in evs), default=0.0))
        p["t1"] = max((e[2] for e in evs), default=p["t0"] + 1.0)
        p["lanes"] = [(n, [e for e in ev if e[2] >= p["t0"]]) for n, ev in p["lanes"]]
        p["lanes"] = [(n, ev) for n, ev in p["lanes"] if ev]
        # requests in flight at once (PULLs of several ubatches, say) get rows of their own
        packed = []
        for n, ev in p["lanes"]:
            rows = []
            for e in sorted(ev, key=lambda e: e[1]):
                for i, end in enumerate(rows):
                    if e[1] >= end or i == 3:
                        rows[i] = max(end, e[2])
                        break
                else:
                    i = len(rows)
                    rows.append(e[2])
                packed.append((n, i, e))
            p["nrows"] = p.get("nrows", []) + [(n, max(1, len(rows)))]
        p["packed"] = packed
    H = 100 + sum(gap + lane_h * sum(r for _, r in p["nrows"]) for p in panels)
    o = ['<?xml version="1.0" encoding="UTF-8"?>',
         '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
         % (W + left + 20, H), '<rect width="100%" height="100%" fill="white"/>',
         '<text x="10" y="18" font-size="14">llama-vs-rpc: %s, %d ranks,</text>'
         '<text x="10" y="34" font-size="12">as the client sees each rank (through a recording proxy, not '
         'timed); one row per connection, more rows when requests overlap</text>' % (
             ("llama-bench prompt run of %d tokens in ubatches of %d (its warmup pass, then the timed pass)"
              % (max(cfg.prompts), cfg.ubatch)) if phase == "pp" else
             ("llama-bench decode run of %d tokens (after a 1-token warmup)" % cfg.gen), cfg.n),
         '<text x="10" y="66" font-size="11">a bar runs from a request to its reply; a thin bar is a command '
         'that gets no reply (queued); hover for names, sizes and times</text>']
    x = 10
    for label, color, _ in CATEGORY + [("other", "#bab0ac", ())]:
        o.append('<rect x="%d" y="42" width="12" height="10" fill="%s"/><text x="%d" y="51">%s</text>'
                 % (x, color, x + 16, label))
        x += 110
    y = 78.0
    for p in panels:
        t0, span = p["t0"], max(p["t1"] - p["t0"], 1e-6)
        o.append('<text x="10" y="%.1f" font-weight="bold" font-size="13">%s: %s, time axis %.1f ms%s</text>'
                 % (y + 14, p["side"], "%.1f tok/s through the proxy" % p["tps"] if p["tps"] else "no result",
                    span * 1e3, (" (error: %s)" % p["error"].splitlines()[0][:80]) if p["error"] else ""))
        y += 22
        rows_of = dict(p["nrows"])
        for lname, _ in p["lanes"]:
            nr = rows_of[lname]
            o.append('<text x="10" y="%.1f">%s</text><line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/>'
                     % (y + lane_h / 2 + 4, lname, left, y + nr * lane_h, left + W, y + nr * lane_h))
            for n, row, (name, a, b, nbytes, queued) in p["packed"]:
                if n != lname:
                    continue
                label, color = _cat(name)
                xa = left + max(a - t0, 0.0) / span * W
                wd = max((b - a) / span * W, 1.5)
                o.append('<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"%s><title>%s %s, %d bytes, '
                         '%.3f ms at %.3f ms</title></rect>'
                         % (xa, y + row * lane_h + 3, wd, lane_h - 6, color, ' opacity="0.7"' if queued else "", name,
                            "(queued, no reply)" if queued else "(to its reply)", nbytes, (b - a) * 1e3, (a - t0) * 1e3))
            y += nr * lane_h
        y += gap - 22
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")
