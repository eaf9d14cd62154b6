#!/usr/bin/env python3
"""token-stats.py DIR [FIRST LAST] - a run's decoded tokens in figures: token-trace.py
on every decoded token FIRST..LAST (default 5..61) of DIR (a token-trace.sh
configuration's logs: rank*.trace and the client's client.*), then per figure
the median, p10, p90 and mean over the tokens, in us:
  window              a token (client's first request to the next token's)
  wait0_arrive        rank 0 read the token's first request, after the client sent it
  g0_launch           rank 0's graph launched, from the token's start
  g0_arrive           rank 0's GRAPH_RUN read, from the token's start
  get_recv_after_gpu  the last rank's graph done -> the logits at the client
  reply               the last rank's reply written -> read by the client
  client              the client with no reply awaited (llama.cpp's own work)
  wait0_exec, set0_arrive, g0_prep_launch, g0_queue (GRAPH_RUN waiting for its
  worker), g0_gpu / gl_gpu (the graphs' wait for the device), gl_launch;
  boundary            every stage boundary of the tokens: the SEND's exec_start on
                      one rank -> the RECV's exec_end on the next (and how many <= 40 us).
"""
import glob
import os
import re
import statistics as st
import subprocess
import sys

tt = os.path.join(os.path.dirname(os.path.abspath(__file__)), "token-trace.py")
def parse(out):
    d = {}
    m = re.search(r"\): ([\d.]+) us \(t0", out); d["window"] = float(m.group(1))
    for line in out.splitlines():
        m = re.match(r"\s+([\d.]+)\s+(rank\d)\s+(\w+)\s+(\d+)\s+send (.*)", line)
        if not m: continue
        at, rank, ty, rid, chain = float(m.group(1)), m.group(2), m.group(3), m.group(4), m.group(5)
        hops = re.findall(r"\+([\d.]+) (\w+)", chain)
        t = at; marks = {"send": at}
        for v, h in hops:
            t += float(v); marks[h] = t
        key = (rank, ty)
        if key not in d: d[key] = marks
    m = re.search(r"client, no reply awaited\s+([\d.]+)", out); d["client"] = float(m.group(1))
    # each boundary: SEND's exec_start on one rank -> RECV's exec_end on the next
    d["boundaries"] = [float(b) for b in re.findall(r"SEND exec_start to RECV exec_end ([\d.]+) us", out)]
    return d
def run(files, tok):
    return subprocess.run(["python3", tt, "--token", str(tok)] + files, capture_output=True, text=True).stdout
if len(sys.argv) not in (2, 4):
    sys.exit(__doc__.split("\n")[0])
cfgdir = sys.argv[1]
first, last_tok = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) == 4 else (5, 61)
files = sorted(glob.glob(cfgdir + "/rank*.trace")) + glob.glob(cfgdir + "/client.*")
rows = []
bounds = []
for tok in range(first, last_tok + 1):
    try:
        d = parse(run(files, tok))
    except (AttributeError, KeyError):
        continue  # a token the trace does not hold whole
    nr = len([f for f in files if "rank" in f])
    last = "rank%d" % (nr - 1)
    g0 = d[("rank0", "GRAPH_RUN")]; gl = d[(last, "GRAPH_RUN")]; get = d[(last, "TENSOR_GET")]
    w0 = d[("rank0", "WAIT")]
    rows.append(dict(window=d["window"], wait0_arrive=w0["arrive"] - w0["send"], g0_launch=g0.get("exec_launched", 0),
                     g0_arrive=g0["arrive"], get_recv_after_gpu=get["recv"] - gl["exec_end"], reply=get["recv"] - get.get("reply", get["recv"]),
                     client=d["client"], wait0_exec=w0["exec_end"]-w0["exec_start"],
                     set0_arrive=d[("rank0","TENSOR_SET")]["arrive"]-d[("rank0","TENSOR_SET")]["send"],
                     g0_prep_launch=g0["exec_launched"]-g0["exec_start"], g0_queue=g0["exec_start"]-g0["arrive"],
                     g0_gpu=g0["exec_end"]-g0["exec_launched"], gl_gpu=gl["exec_end"]-gl["exec_launched"],
                     gl_launch=gl["exec_launched"]))
    bounds.extend(d["boundaries"])
if not rows:
    sys.exit("token-stats: no decoded token of %s could be read" % cfgdir)
keys = rows[0].keys()
print("%s: %d tokens" % (cfgdir, len(rows)))
for k in keys:
    v = sorted(r[k] for r in rows)
    print("  %-20s median %7.1f  p10 %7.1f  p90 %7.1f  mean %7.1f" % (k, st.median(v), v[len(v)//10], v[len(v)*9//10], st.mean(v)))
if bounds:
    v = sorted(bounds)
    print("  %-20s median %7.1f  p10 %7.1f  p90 %7.1f  mean %7.1f  (%d boundaries, %d <= 40 us)" % (
        "boundary", st.median(v), v[len(v)//10], v[len(v)*9//10], st.mean(v), len(v), sum(1 for b in v if b <= 40.0)))
