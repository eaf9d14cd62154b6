#!/usr/bin/env python3
"""token-trace.py FILES... — one decoded token's hops through client and ranks.

Reads the request traces of one run on one host (CLOCK_MONOTONIC is common
to its processes): the ranks' trace-file (pprpcd) and the client's
PPRPC_TRACE=PATH files (PATH.PID).  Every line is
    T_NS PID CONN ROLE TYPE REQ_ID EVENT [INFO]
(doc/llama.md: Tracing one token).  A rank's file names its address in its
header; the client names each request by the address it dialled, so a
client request is matched to the rank's record of the same type and id.

The token: the client's graph_compute calls, grouped into ubatches (a
ubatch begins at a graph_compute on the first device after one on another);
a ubatch whose first graph has ne1=1 after the last one with more tokens is
a decoded token.  --token N picks the Nth (default 10; the last one when
there are fewer), or --window T0 T1 (ns) any span.  The token's window runs
from the first request the client sent for it to the first request of the
next one.  Printed: each request in send order with its hops (send, arrive,
exec_start, exec_end, done, reply, recv) and the gaps between them in us,
the other ranks' requests (peer links: a boundary's PULL) likewise, each
boundary (SEND on one rank -> RECV on the next), and a summary.
"""
import argparse
import collections
import sys

HOPS = ["send", "arrive", "exec_start", "exec_ready", "exec_launched", "exec_end", "done", "reply", "recv"]


def parse(paths):
    ranks = {}            # addr -> list of (t, conn, role, type, id, event)
    client = []           # (t, conn, type, id, event, info)
    for path in paths:
        addr = None
        kind = None
        rows = []
        with open(path) as f:
            for line in f:
                if line.startswith("#"):
                    w = line.split()
                    if len(w) >= 7 and w[1] == "pprpcd" and w[3] == "v1" and "listen" in w:
                        kind, addr = "rank", w[w.index("listen") + 1]
                    elif len(w) >= 4 and w[1] == "pprpc" and w[2] == "client":
                        kind = "client"
                    continue
                w = line.split(None, 7)
                if len(w) < 7:
                    continue
                rows.append((int(w[0]), w[2], w[3], w[4], int(w[5]), w[6], w[7].strip() if len(w) > 7 else ""))
        if kind == "rank":
            ranks.setdefault(addr, []).extend((t, c, r, ty, i, e) for t, c, r, ty, i, e, _ in rows)
        elif kind == "client":
            client.extend((t, c, ty, i, e, info) for t, c, r, ty, i, e, info in rows)
        else:
            sys.exit("%s: not a pprpc trace (no header)" % path)
    client.sort()
    return ranks, client


def ubatches(client):
    """[(index into client of the graph_start, ne1)]"""
    out, first_dev, prev_dev = [], None, None
    for k, (t, conn, ty, i, e, info) in enumerate(client):
        if e != "graph_start":
            continue
        if first_dev is None:
            first_dev = conn
        if conn == first_dev and prev_dev != first_dev:
            ne1 = None
            for kv in info.split():
                if kv.startswith("ne1="):
                    ne1 = int(kv[4:])
            out.append((k, ne1))
        prev_dev = conn
    return out


def window_start(client, k):
    """Back from the ubatch's first graph_start over the requests sent for it."""
    while k > 0 and client[k - 1][4] == "send":
        k -= 1
    return client[k][0]


def us(a, b):
    return "%9.1f" % ((b - a) / 1000.0) if a is not None and b is not None else "        -"


def chain(d):
    """'send +51.4 arrive +9.2 exec_start ...': the hops present, in order."""
    out, prev = [], None
    for h in HOPS:
        if h in d:
            out.append(h if prev is None else "+%.1f %s" % ((d[h] - prev) / 1000.0, h))
            prev = d[h]
    return " ".join(out) + ("  = %.1f" % ((prev - d[HOPS[0]]) / 1000.0) if HOPS[0] in d and prev else "")


def union(iv):
    tot, end = 0, None
    for a, b in sorted(iv):
        if end is None or a > end:
            tot += b - a
            end = b
        elif b > end:
            tot += b - end
            end = b
    return tot


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--token", type=int, default=10, help="the Nth decoded token (1-based; default 10)")
    ap.add_argument("--window", nargs=2, type=int, metavar=("T0_NS", "T1_NS"))
    a = ap.parse_args()
    ranks, client = parse(a.files)
    if not client:
        sys.exit("no client trace among the files (PPRPC_TRACE=PATH writes PATH.PID)")
    if not ranks:
        sys.exit("no rank trace among the files (pprpcd --trace-file)")

    # rank numbers: the order in which the client first spoke to them
    order = []
    for t, conn, ty, i, e, info in client:
        if e == "send" and conn in ranks and conn not in order:
            order.append(conn)
    order += [r for r in sorted(ranks) if r not in order]
    rname = {addr: "rank%d" % n for n, addr in enumerate(order)}

    if a.window:
        t0, t1 = a.window
        what = "window %d..%d" % (t0, t1)
    else:
        ub = ubatches(client)
        last_big = max([n for n, (k, ne1) in enumerate(ub) if ne1 is not None and ne1 > 1] or [-1])
        dec = [n for n in range(last_big + 1, len(ub)) if ub[n][1] == 1]
        # the last decoded ubatch has no successor to end its window
        usable = [n for n in dec if n + 1 < len(ub)] or dec
        if not usable:
            sys.exit("no decoded token found: %d ubatches, none of one token after the prompt" % len(ub))
        pick = min(a.token, len(usable))
        n = usable[pick - 1]
        t0 = window_start(client, ub[n][0])
        t1 = window_start(client, ub[n + 1][0]) if n + 1 < len(ub) else client[-1][0] + 1
        what = "decoded token %d of %d (ubatch %d; %d prompt ubatches before)%s" % (
            pick, len(dec), n, last_big + 1, "" if pick == a.token else " [fewer than --token %d]" % a.token)

    # the ranks' records by request
    rec = {}   # (addr, conn, role, type, id) -> {event: t}
    for addr, rows in ranks.items():
        for t, conn, role, ty, i, e in rows:
            d = rec.setdefault((addr, conn, role, ty, i), {})
            if e == "reply":
                d[e] = t      # the last part
            elif e not in d:
                d[e] = t
    byid = collections.defaultdict(list)
    for key, d in rec.items():
        if key[2] == "client":
            byid[(key[0], key[3], key[4])].append((key, d))

    # the client's requests of the window
    reqs = collections.OrderedDict()
    graphs = []
    for t, conn, ty, i, e, info in client:
        if not (t0 <= t < t1) and not (e == "recv" and (conn, ty, i) in reqs):
            continue
        if e in ("graph_start", "graph_end"):
            graphs.append((t, conn, i, e, info))
        elif e == "send":
            reqs[(conn, ty, i)] = {"send": t}
        elif e == "recv" and (conn, ty, i) in reqs:
            reqs[(conn, ty, i)]["recv"] = t

    print("token-trace: %s: %.1f us (t0=%d)" % (what, (t1 - t0) / 1000.0, t0))
    print("\nclient requests, in send order: at (us from the window's start), rank, type, id, then each hop")
    print("of the request with the us since the one before (arrive/exec/done/reply: the rank's clock):")
    rows = []
    matched = 0
    execs = collections.defaultdict(list)
    graph_execs = collections.defaultdict(list)
    phases = collections.defaultdict(list)
    waits = []
    for (addr, ty, i), c in reqs.items():
        cands = byid.get((addr, ty, i), [])
        d = {}
        if cands:
            cands.sort(key=lambda kd: abs(kd[1].get("arrive", 0) - c["send"]))
            d = dict(cands[0][1])
            matched += 1
        d.update(c)
        rows.append((addr, ty, i, d))
        if "exec_start" in d:
            execs[addr].append((d["exec_start"], d["exec_end"]))
            if ty == "GRAPH_RUN":
                graph_execs[addr].append((d["exec_start"], d["exec_end"]))
                if "exec_launched" in d:
                    # the device's own phase marks: prepare (uploads
                    # settled, checks queued), launch, wait for the GPU
                    ready = d.get("exec_ready", d["exec_start"])
                    phases[addr].append((ready - d["exec_start"], d["exec_launched"] - ready,
                                         d["exec_end"] - d["exec_launched"]))
        if "recv" in d:
            waits.append((d["send"], d["recv"]))
        print("  %9.1f  %-6s %-11s %6d  %s" % ((c["send"] - t0) / 1000.0, rname.get(addr, addr), ty, i, chain(d)))
    print("  (%d of %d matched to the rank's record by type and id)" % (matched, len(reqs)))

    print("\nclient graph_compute calls (the plugin's, per device):")
    starts = {}
    for t, dev, i, e, info in graphs:
        if e == "graph_start":
            starts[(dev, i)] = (t, info)
        elif (dev, i) in starts:
            s, info0 = starts.pop((dev, i))
            print("  %9.1f  %-6s graph_compute #%d %s: %.1f us" % ((s - t0) / 1000.0, dev, i, info0, (t - s) / 1000.0))

    print("\nrank-to-rank requests (peer links) in the window:")
    peers = []
    for (addr, conn, role, ty, i), d in rec.items():
        if role == "peer" and t0 <= d.get("arrive", 0) < t1:
            peers.append((d["arrive"], addr, conn, ty, i, d))
    for t, addr, conn, ty, i, d in sorted(peers):
        if "exec_start" in d:
            execs[addr].append((d["exec_start"], d["exec_end"]))
        print("  %9.1f  %-6s %-11s %6d  %s  (a peer's request, served on %s, conn %s)" % (
            (t - t0) / 1000.0, rname.get(addr, addr), ty, i, chain(d), rname.get(addr, addr), conn))
    if not peers:
        print("  (none)")

    print("\nboundaries (SEND on a rank -> RECV on the next):")
    sends = [(d.get("exec_start"), addr, i, d) for addr, ty, i, d in rows if ty == "SEND"]
    recvs = [(d.get("exec_start"), addr, i, d) for addr, ty, i, d in rows if ty == "RECV"]
    nb = 0
    for s in sends:
        r = next((r for r in recvs if r[1] != s[1]), None)
        if not r or s[0] is None or r[0] is None:
            continue
        recvs.remove(r)
        nb += 1
        pulls = [p for p in peers if p[1] == s[1] and p[3] == "PULL"]
        pull = " PULL served by %s %.1f us (arrive>reply)" % (rname[s[1]], (pulls[0][5]["reply"] - pulls[0][5]["arrive"]) / 1000.0) \
            if pulls and "reply" in pulls[0][5] else ""
        print("  %s SEND #%d exec %.1f us -> %s RECV #%d exec %.1f us; SEND exec_start to RECV exec_end %.1f us;%s" % (
            rname[s[1]], s[2], (s[3]["exec_end"] - s[0]) / 1000.0, rname[r[1]], r[2], (r[3]["exec_end"] - r[0]) / 1000.0,
            (r[3]["exec_end"] - s[0]) / 1000.0, pull))
    if not nb:
        print("  (none)")

    total = t1 - t0
    computing = union([iv for v in graph_execs.values() for iv in v])
    client_only = total - union([(max(a, t0), min(b, t1)) for a, b in waits if b > t0])
    print("\nsummary (us; a RECV's exec includes its wait for the boundary's bytes):")
    print("  token window                   %9.1f" % (total / 1000.0))
    for addr in order:
        print("  %-6s GRAPH_RUN exec             %9.1f   all its execs %9.1f (%d)" % (
            rname[addr], union(graph_execs[addr]) / 1000.0, union(execs[addr]) / 1000.0, len(execs[addr])))
    for addr in order:
        for p, l, w in phases[addr]:
            print("  %-6s GRAPH_RUN phases: prepare %.1f, launch %.1f, wait for the device %.1f" % (
                rname[addr], p / 1000.0, l / 1000.0, w / 1000.0))
    print("  any rank computing (GRAPH_RUN) %9.1f" % (computing / 1000.0))
    print("  client, no reply awaited       %9.1f" % (client_only / 1000.0))
    print("  the rest: transit, queues, hand-offs %9.1f" % (max(0, total - computing - client_only) / 1000.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
