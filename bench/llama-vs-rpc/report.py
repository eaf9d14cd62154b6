"""Summary of the rounds (medians, paired ratios, parity, targets) and the table."""

import os

from stats import geomean, mean_ci, median, ratio_ci

MIB = 2.0 ** 20


def _rounds(res, side, key="rounds"):
    return [r["sides"][side] for r in res[key] if side in r["sides"]]


def _side_summary(cfg, res, s):
    rs = _rounds(res, s)
    out = {"pp_tps": {}, "ttft_ms": {}, "runs": len(rs)}
    for n in cfg.prompts:
        out["pp_tps"][n] = median([x["pp"][n]["tps"] for x in rs if n in x["pp"]])
        out["ttft_ms"][n] = median([x["pp"][n]["ms"] for x in rs if n in x["pp"]])
    out["decode_tps"] = median([x["tg"]["tps"] for x in rs if x.get("tg")])
    out["decode_ms_tok"] = median([x["tg"]["ms_tok"] for x in rs if x.get("tg")])
    out["hashes"] = sorted(set(x["hash"] for x in rs if x.get("hash")))
    out["gen_distinct"] = min([x["gen_distinct"] for x in rs if x.get("gen_distinct")] or [0])
    out["errors"] = [e for x in rs for e in x["errors"]]
    out["pipeline_parallel"] = sorted(set(x["pipeline_parallel"] for x in rs if "pipeline_parallel" in x))
    out["graph_splits"] = sorted(set(x["graph_splits"] for x in rs if x.get("graph_splits") is not None))
    # what llama.cpp's own log says of its scheduler, per kind of run (workload.scheduler)
    out["sched"] = {}
    for x in rs:
        for kind, v in (x.get("sched") or {}).items():
            if not v:
                continue
            d = out["sched"].setdefault(kind, {"pipelined": set(), "copies": set(), "splits": set(), "dropped": 0,
                                               "runs": 0})
            d["runs"] += 1
            d["pipelined"].add(v.get("pipeline_parallel"))
            d["copies"].update(v.get("sched_copies") or [])
            if v.get("graph_splits") is not None:
                d["splits"].add(v["graph_splits"])
            d["dropped"] += v.get("pipeline_dropped") or 0
            if v.get("layers"):
                d["layers"] = v["layers"]
    for d in out["sched"].values():
        for k in ("pipelined", "copies", "splits"):
            d[k] = sorted(d[k], key=lambda v: (v is None, v))
    # ranks: lowest free memory of their device and their own peak, over every round
    rk = {}
    for x in rs:
        m = x.get("mem") or {}
        for i, v in (m.get("free_min") or {}).items():
            d = rk.setdefault(int(i), {})
            d["free_min"] = v if d.get("free_min") is None else min(d["free_min"], v)
        for i, v in (m.get("held_max") or {}).items():
            d = rk.setdefault(int(i), {})
            d["held_max"] = max(d.get("held_max") or 0, v)
        for i, v in (x.get("vm_hwm") or {}).items():
            if v is not None:
                d = rk.setdefault(int(i), {})
                d["vm_hwm"] = max(d.get("vm_hwm") or 0, v)
    # pprpc STATS: graph creates vs runs and boundaries, per phase, summed over the rounds
    phases = {}
    for x in rs:
        for ph, per_rank in (x.get("stats") or {}).items():
            P = phases.setdefault(ph, {"ranks": {}, "boundaries": {}, "exec": {}, "requests": {}, "weights": {},
                                       "split": True, "runs": 0})
            P["runs"] += 1
            for i, d in enumerate(per_rank):
                a = P["ranks"].setdefault(i, {"graph_creates": 0, "graph_runs": 0, "errors": 0,
                                              "request_errors": 0, "protocol_errors": 0, "commands": 0,
                                              "gpu_sends": 0, "gpu_recvs": 0})
                for k in a:
                    a[k] += d.get(k, 0) or 0
                for ty, e in (d.get("exec") or {}).items():
                    t = P["exec"].setdefault((i, ty), {"execs": 0, "ns": 0, "load_execs": 0, "load_ns": 0})
                    for k in t:
                        t[k] += e.get(k, 0)
                # the load | run split (ranks.stats_delta): None from a daemon without it
                if d.get("requests") is None:
                    P["split"] = False
                for ty, v in (d.get("requests") or {}).items():
                    t = P["requests"].setdefault((i, ty), {"load_requests": 0, "load_bytes": 0, "run_requests": 0,
                                                           "run_bytes": 0})
                    for k in t:
                        t[k] += v[k]
                if d.get("weights"):
                    t = P["weights"].setdefault(i, {})
                    for k, v in d["weights"].items():
                        t[k] = t.get(k, 0) + v
                for b in d.get("boundaries", []):
                    key = (i, b["peer"], b["direction"], b["path"])
                    t = P["boundaries"].setdefault(key, {"transfers": 0, "bytes": 0, "time_us": 0, "errors": 0,
                                                         "copy_us": 0})
                    for k in t:
                        t[k] += b.get(k, 0) or 0
    for ph in phases.values():
        ph["boundaries"] = [dict(rank=k[0], peer=k[1], direction=k[2], path=k[3], **v)
                            for k, v in sorted(ph["boundaries"].items())]
        ph["exec"] = [dict(rank=k[0], type=k[1], **v) for k, v in sorted(ph["exec"].items())]
        ph["requests"] = [dict(rank=k[0], type=k[1], **v) for k, v in sorted(ph["requests"].items())]
    out["ranks"] = rk
    out["phases"] = phases
    return out


def _pair(cfg, res, a, b, key="rounds", prompts=None):
    prompts = prompts or cfg.prompts
    ra, rb = _rounds(res, a, key), _rounds(res, b, key)
    out = {"prompt": {}}
    for n in prompts:
        xa = [x["pp"].get(n, {}).get("tps") for x in ra]
        xb = [x["pp"].get(n, {}).get("tps") for x in rb]
        out["prompt"][n] = ratio_ci(xa, xb)
    # one ratio per round: the geometric mean over the prompt sizes
    ga = [geomean([x["pp"].get(n, {}).get("tps") for n in prompts]) for x in ra]
    gb = [geomean([x["pp"].get(n, {}).get("tps") for n in prompts]) for x in rb]
    out["prompt_all"] = ratio_ci(ga, gb)
    if key == "rounds":
        out["decode"] = ratio_ci([(x.get("tg") or {}).get("tps") for x in ra], [(x.get("tg") or {}).get("tps") for x in rb])
    return out


def summarize(cfg, res):
    S = {"sides": {}, "ratios": {}, "sweep": [], "targets": [], "ok": True, "problems": []}
    for s in cfg.sides:
        S["sides"][s] = _side_summary(cfg, res, s)
    for a, b in (("pprpc", "rpc"), ("pprpc", "local"), ("rpc", "local"), ("pprpc", "pprpc-link"),
                 ("pprpc-link", "local"), ("pprpc-hold", "pprpc"), ("pprpc-hold", "local"),
                 ("pprpc", "pprpc-noreuse"), ("pprpc-noreuse", "local"), ("pprpc-gsend", "pprpc"),
                 ("pprpc-gsend", "local"), ("pprpc-chain", "pprpc"), ("pprpc-chain", "local"),
                 ("pprpc-hlead", "pprpc"), ("pprpc-hlead", "local"), ("pprpc-hlead", "pprpc-hold"),
                 ("pprpc-clead", "pprpc"), ("pprpc-clead", "local")):
        if a in cfg.sides and b in cfg.sides and res["rounds"] and not cfg.load_only:
            S["ratios"]["%s/%s" % (a, b)] = _pair(cfg, res, a, b)
    if res.get("load"):
        S["load"] = _load_summary(cfg, res)
        for s, v in S["load"]["sides"].items():
            for e in v["errors"]:
                S["problems"].append("%s load: %s" % (s, e))

    # parity: one hash over every side and every round (and the sweep does not hash)
    hashes = set()
    for s, v in S["sides"].items():
        hashes.update(v["hashes"])
        if not v["hashes"]:
            S["problems"].append("%s: no token hash" % s)
    S["hash_match"] = len(hashes) == 1 and all(v["hashes"] for v in S["sides"].values())
    S["hash"] = next(iter(hashes)) if len(hashes) == 1 else None
    if len(hashes) > 1:
        S["problems"].append("token hashes differ: " + ", ".join(
            "%s %s" % (s, "/".join(v["hashes"])) for s, v in S["sides"].items()))
    if res.get("cpu_reference"):
        S["cpu_reference_match"] = res["cpu_reference"].get("hash") in hashes and len(hashes) == 1
    S["logits"] = _logits_summary(res.get("logits"), S["problems"])

    for ent in res.get("sweep", []):
        row = {"ubatch": ent["ubatch"], "skipped": ent.get("skipped")}
        if not ent.get("skipped"):
            n = max(cfg.prompts)
            sub = {"rounds": ent["rounds"]}
            for s in ("pprpc", "rpc"):
                rs = _rounds(sub, s)
                row[s] = median([x["pp"].get(n, {}).get("tps") for x in rs])
                for x in rs:
                    for e in x["errors"]:
                        S["problems"].append("sweep ub %d %s: %s" % (ent["ubatch"], s, e))
            if "pprpc" in cfg.sides and "rpc" in cfg.sides:
                row["ratio"] = _pair(cfg, sub, "pprpc", "rpc", "rounds", [n])["prompt"][n]
        S["sweep"].append(row)

    for s, v in S["sides"].items():
        for e in v["errors"]:
            S["problems"].append("%s: %s" % (s, e))
        for ph, P in v["phases"].items():
            for i, a in P["ranks"].items():
                bad = a["errors"] + a["request_errors"] + a["protocol_errors"]
                if bad:
                    S["problems"].append("%s rank %d %s: %d errors in STATS (%s)" % (s, i, ph, bad, a))
    for e in res.get("errors", []):
        S["problems"].append(e)
    for k in res.get("restarts", []):
        S["problems"].append("%s ranks were restarted after one exited" % k)
    S["ok"] = not S["problems"] and bool(res["rounds"])
    S["targets"] = _targets(cfg, S)
    S["boundary_added_us"] = _boundary_added(cfg, res, S)
    b = S["boundary_added_us"].get("pprpc")
    if b:
        m = b["us_per_boundary_per_token"]
        # negative: one rank holding every layer decodes slower than N holding a part each, so
        # this model's compute differs between the layouts and the probe bounds nothing
        S["targets"].append({"target": "decode us per boundary (pprpc)", "need": 40.0, "geomean": m[0],
                             "ci95": [m[1], m[2]], "met": (0 <= m[0] <= 40.0) if m[0] >= 0 else None,
                             "lower_is_better": True})
    return S


# the figures of a side's teacher-forced logits against local (logits.compare), in the summary
LOGITS_KEYS = ("nmse", "nmse_max", "nmse_max_at", "top1", "top1_agree", "first_divergence", "max_abs",
               "bit_identical", "nonfinite", "positions")
# sides compared as information, not held to anything (the CPU next to a GPU run)
LOGITS_INFO = ("local-cpu",)


def _logits_summary(L, problems):
    """res['logits'] without the per-position lists; a side whose run failed or gave
    NaN/inf where local did not is a problem of the run."""
    if not L or not L.get("run"):
        return {"run": False, "reason": (L or {}).get("reason", "not run")}
    out = {"run": True, "reference": L["reference"], "tokens": L["tokens"], "n_prompt": L["n_prompt"],
           "positions": L["count"], "sides": {}}
    if L.get("reason"):
        out["reason"] = L["reason"]
    for s, r in L["sides"].items():
        d = {k: r[k] for k in LOGITS_KEYS if k in r}
        d["errors"] = r["errors"]
        for k in ("greedy_agree", "greedy_first_divergence"):
            if k in r:
                d[k] = r[k]
        out["sides"][s] = d
        if s in LOGITS_INFO:
            continue
        for e in r["errors"]:
            problems.append("%s logits: %s" % (s, e))
        if r.get("nonfinite"):
            problems.append("%s logits: %d NaN/inf values where local's are finite" % (s, r["nonfinite"]))
    return out


# load-time ratios A/B (time: < 1 means A loads faster), where both sides ran
LOAD_PAIRS = (("pprpc", "local"), ("pprpc-file", "local"), ("pprpc-cache", "local"), ("rpc", "local"),
              ("rpc-c", "local"), ("pprpc", "rpc"), ("pprpc-file", "pprpc"), ("pprpc-cache", "pprpc"),
              ("rpc-c", "rpc"), ("rpc-c", "pprpc-file"), ("rpc-c", "pprpc-cache"))
LOAD_STEPS = ("cold", "restart", "warm")


def _load_time(x, step):
    """A side's load time of one round: cold, warm, or restart = the cached run
    (page cache dropped, fresh ranks, the cache kept) for a side with a cache,
    the cold run for the others (nothing of theirs to keep)."""
    if step == "restart":
        step = "cached" if "cached" in x else "cold"
    return (x.get(step) or {}).get("s")


def _load_summary(cfg, res):
    rounds = res["load"]["rounds"]
    L = {"sides": {}, "ratios": {}}
    for s in cfg.sides:
        rs = [r["sides"][s] for r in rounds if s in r["sides"]]
        d = {"runs": len(rs), "errors": [e for x in rs for e in x["errors"]]}
        for step in LOAD_STEPS:
            v = [_load_time(x, step) for x in rs]
            d[step + "_s"] = median(v)
            d[step + "_runs_s"] = v
        drops = [(x.get(k) or {}).get("drop") for x in rs for k in ("cold", "cached")]
        d["resident_after_drop_bytes"] = max([x["resident_bytes"] for x in drops if x] or [0])
        d["dropped_bytes"] = max([x["bytes"] for x in drops if x] or [0])
        st = [max(t for t in x["cold"]["ranks_start_s"] if t is not None)
              for x in rs if (x.get("cold") or {}).get("ranks_start_s")]
        d["ranks_start_s"] = median(st)
        cache = [(x.get("cold") or {}).get("cache") for x in rs]
        d["cache_bytes"] = max([x["bytes"] for x in cache if x] or [0]) if any(cache) else None
        d["new_sidecars"] = sorted(set(f for x in rs for k in ("cold", "warm", "cached")
                                       for f in (x.get(k) or {}).get("new_sidecars", [])))
        L["sides"][s] = d
    for a, b in LOAD_PAIRS:
        if a not in cfg.sides or b not in cfg.sides:
            continue
        both = [(r["sides"][a], r["sides"][b]) for r in rounds if a in r["sides"] and b in r["sides"]]
        L["ratios"]["%s/%s" % (a, b)] = {step: ratio_ci([_load_time(x, step) for x, _ in both],
                                                        [_load_time(y, step) for _, y in both])
                                         for step in LOAD_STEPS}
    return L


def _targets(cfg, S):
    """The issue's targets, checked against this run's paired ratios."""
    t = []

    def add(name, ratio, need):
        if ratio:
            t.append({"target": name, "need": need, "geomean": ratio[0], "ci95": [ratio[1], ratio[2]],
                      "met": ratio[0] >= need})

    R = S["ratios"]
    if "pprpc/rpc" in R:
        pr, dr = R["pprpc/rpc"]["prompt_all"], R["pprpc/rpc"]["decode"]
        if cfg.device.gpu:
            add("prefill pprpc/rpc", pr, 2.0)
            add("decode pprpc/rpc", dr, 1.6)
        else:
            add("prefill pprpc/rpc", pr, 1.3)
            add("decode pprpc/rpc", dr, 1.0)
    if cfg.device.gpu and "pprpc/local" in R:
        # issue 31's (issue 18 asked 0.85 and 0.8)
        add("prefill pprpc/local", R["pprpc/local"]["prompt_all"], 0.9)
        add("decode pprpc/local", R["pprpc/local"]["decode"], 0.85)
    return t


def _boundary_added(cfg, res, S):
    """What one stage boundary adds to a decoded token, measured: per round, the
    decode time per token through N ranks minus through rank 0 alone (same
    daemons, same client, every layer on rank 0), over the N-1 boundaries.
    It counts everything the split adds per boundary: the transfer, the
    second rank's synchronization, the extra graph launch."""
    out = {}
    if cfg.n < 2:
        return out
    for s in ("pprpc", "rpc"):
        rs = _rounds(res, s)
        d = [((x["tg"]["ms_tok"] - x["tg1"]["ms_tok"]) * 1e3 / (cfg.n - 1)) for x in rs
             if x.get("tg") and x.get("tg1")]
        if d:
            out[s] = {"us_per_boundary_per_token": mean_ci(d), "rounds": d,
                      "decode_ms_tok_one_rank": median([x["tg1"]["ms_tok"] for x in rs if x.get("tg1")])}
    return out


# ---- the table ----------------------------------------------------------------------------------

def _f(x, fmt="%.1f"):
    return "-" if x is None else fmt % x


def _r(r):
    return "-" if not r else "%.3f [%.3f, %.3f]" % r


def _print_net(w, res):
    n = res["config"].get("net")
    if not n:
        return
    w("network: --net %s: client %s (%s), ranks %s, each behind a veth pair to a bridge (%s), tbf rate %s "
      "burst %d latency %s on both ends\n" % (
          n["rate"], n["client"]["addr"], n["client"]["ns"],
          ", ".join("%s (%s)" % (a, ns) for ns, a in n["ranks"].items()), n["switch"], n["rate"],
          n["tbf"]["burst"], n["tbf"]["latency"]))
    lc = res.get("link_check")
    if lc:
        w("link check: %.0f MiB client -> %s in %.2f s: %.0f Mbit/s\n" % (
            lc["bytes"] / MIB, lc["to"], lc["s"], lc["bits_per_s"] / 1e6))


def _print_load(cfg, res, S, w):
    L = S.get("load")
    if not L:
        return
    c = res["config"]
    w("\nmodel load: llama-completion -n 1 --no-warmup, wall time from its start to its exit (s), %s%s%s\n" % (
        "median of %d rounds" % c["rounds"] if c["rounds"] > 1 else "1 round",
        (", links of %s" % c["net"]["rate"] if c.get("net") else ", loopback") +
        (", each process reading the model's disk as one of its own at %d MB/s" % c["disk"]["rate_mbps"]
         if c.get("disk") else ""),
        "; pprpc-file ranks' model: a hard link to the client's file" if c.get("rank_model") == "link" and
        "pprpc-file" in c.get("sides", ()) else ""))
    w("%-12s %9s %9s %9s %12s %18s %10s %s\n" % ("side", "cold", "restart", "warm", "ranks start",
                                                "left in page cache", "cache MiB", "sidecars written"))
    for s, d in L["sides"].items():
        w("%-12s %9s %9s %9s %12s %18s %10s %s\n" % (
            s, _f(d["cold_s"], "%.2f"), _f(d["restart_s"], "%.2f") if s in ("pprpc-cache", "rpc-c") else "=cold",
            _f(d["warm_s"], "%.2f"), _f(d["ranks_start_s"], "%.2f"),
            "%.1f/%.0f MiB" % (d["resident_after_drop_bytes"] / MIB, d["dropped_bytes"] / MIB),
            "-" if d["cache_bytes"] is None else "%.1f" % (d["cache_bytes"] / MIB),
            str(len(d["new_sidecars"])) if d["new_sidecars"] else "-"))
    w("(cold: the page cache of the model and of every file of the side's ranks dropped (posix_fadvise DONTNEED), "
      "fresh ranks, empty caches; warm: at once again; restart: the sides with a cache, dropped and fresh again "
      "but the cache kept as the cold run filled it; ranks start: from exec to listening, before the cold load, "
      "not in it; left in page cache: what was still resident after the drop, of what was dropped; cache: the "
      "side's cache folders after the cold load)\n")
    for s, f in (res["load"].get("first") or {}).items():
        w("first load of %s, before the rounds (file identities computed and kept: %d): %s\n" % (
            s, f.get("identities", 0), "failed: %s" % f["error"] if f.get("error") else _f(f.get("s"), "%.2f s")))
    if L["ratios"]:
        w("\n%-22s %28s %28s %28s\n" % ("load time ratio", "cold", "restart", "warm"))
        for k, v in L["ratios"].items():
            w("%-22s %28s %28s %28s\n" % (k, _r(v["cold"]), _r(v["restart"]), _r(v["warm"])))
        w("(A/B of the load times, < 1: A loads faster; geometric mean of the per-round ratios [bootstrap 95%])\n")


def sched_text(d):
    """One side's scheduler over one kind of run, as llama.cpp's log said it."""
    p = d["pipelined"]
    if p == [True]:
        what = "pipelined"
    elif p == [False]:
        what = "not pipelined"
    elif p == [None]:
        what = "not in the log"
    else:
        what = "pipelined in %s" % "/".join({True: "some", False: "not all", None: "?"}[x] for x in p)
    return "%s, sched copies %s, %s graph splits%s%s" % (
        what, "/".join(str(n) for n in d["copies"]) or "?", "/".join(str(n) for n in d["splits"]) or "?",
        ", fell back %d time%s (compute buffers did not fit)" % (d["dropped"], "" if d["dropped"] == 1 else "s")
        if d["dropped"] else "",
        "; layers %s" % " ".join("%s %d" % kv for kv in d["layers"].items()) if d.get("layers") else "")


def _print_sched(w, S):
    w("pipelining, from llama.cpp's own log of each context it created (\"pipeline parallelism enabled\", "
      "\"sched copies = N\"; prompt runs: llama-bench -v, hash runs: llama-completion -v):\n")
    for s, v in S["sides"].items():
        for kind, label in (("pp", "prompt runs"), ("hash", "hash runs")):
            if kind in v.get("sched", {}):
                w("  %-12s %-12s %s\n" % (s, label, sched_text(v["sched"][kind])))


PHASE_NAMES = {"pp": "prefill", "tg": "decode"}


def _req(P, i, ty, k):
    return sum(r[k] for r in P["requests"] if r["rank"] == i and r["type"] == ty)


def _ex(P, i, ty, k):
    return sum(e[k] for e in P["exec"] if e["rank"] == i and (ty is None or e["type"] == ty))


def _print_stats(res, S, w):
    """pprpc STATS deltas of every pprpc side: what each run's load cost the
    ranks, apart from what its prompt or decode runs did (ranks.stats_delta)."""
    kinds = res["config"].get("side_kinds") or {}
    for s, v in S["sides"].items():
        if kinds.get(s, s) != "pprpc" or not v["phases"]:
            continue
        ph = {k: v["phases"][k] for k in PHASE_NAMES if k in v["phases"]}
        split = all(P["split"] for P in ph.values())
        w("\n%s side: pprpc STATS of its ranks, deltas around every llama.cpp run, summed over the rounds.  Each run "
          "loads the model before it computes: load = what the run's connection asked before its first graph or "
          "stage-boundary request (GRAPH_CREATE, GGML_GRAPH_CREATE, GRAPH_RUN, SEND, RECV): the model's "
          "buffers and weights, the context's KV cache and compute buffers, and the first graph's inputs; run = "
          "that request and everything after it%s\n" % (s, "" if split else
                                                       ".  NOT SPLIT: these ranks' pprpcd reports no "
                                                       "request_counts (older than this benchmark)"))
        if split:
            w("%-8s %4s %5s %8s %10s %7s %10s %11s %7s %10s %10s\n" % (
                "load", "rank", "runs", "allocs", "alloc MiB", "sets", "set MiB", "set exec ms", "fills",
                "fill MiB", "queue ms"))
            for k, P in ph.items():
                for i in sorted(P["ranks"]):
                    w("%-8s %4d %5d %8d %10.1f %7d %10.1f %11.2f %7d %10.1f %10.2f\n" % (
                        PHASE_NAMES[k], i, P["runs"], _req(P, i, "BUFFER_ALLOC", "load_requests"),
                        _req(P, i, "BUFFER_ALLOC", "load_bytes") / MIB, _req(P, i, "TENSOR_SET", "load_requests"),
                        _req(P, i, "TENSOR_SET", "load_bytes") / MIB, _ex(P, i, "TENSOR_SET", "load_ns") / 1e6,
                        _req(P, i, "TENSOR_FILL", "load_requests"), _req(P, i, "TENSOR_FILL", "load_bytes") / MIB,
                        _ex(P, i, None, "load_ns") / 1e6))
            w("(allocs: BUFFER_ALLOCs and the MiB they asked for; sets: TENSOR_SETs, the bytes sent to the rank — "
              "the weights — and their time on the rank's device queue (0 where the bytes land straight in a "
              "host buffer: a CPU rank); fills: TENSOR_FILLs, weights the rank read from its own file or cache; "
              "queue ms: every loading command's time on the device queue)\n")
            w("%-8s %4s %10s %10s %7s %9s %8s %7s %9s %7s %10s %10s\n" % (
                "run", "rank", "graph runs", "graph ms", "sets", "set KiB", "set ms", "gets", "get KiB",
                "allocs", "alloc MiB", "queue ms"))
            for k, P in ph.items():
                for i in sorted(P["ranks"]):
                    run_ns = lambda ty: _ex(P, i, ty, "ns") - _ex(P, i, ty, "load_ns")
                    w("%-8s %4d %10d %10.1f %7d %9.1f %8.2f %7d %9.1f %7d %10.1f %10.1f\n" % (
                        PHASE_NAMES[k], i, _ex(P, i, "GRAPH_RUN", "execs") - _ex(P, i, "GRAPH_RUN", "load_execs"),
                        run_ns("GRAPH_RUN") / 1e6, _req(P, i, "TENSOR_SET", "run_requests"),
                        _req(P, i, "TENSOR_SET", "run_bytes") / 1024.0, run_ns("TENSOR_SET") / 1e6,
                        _req(P, i, "TENSOR_GET", "run_requests"), _req(P, i, "TENSOR_GET", "run_bytes") / 1024.0,
                        _req(P, i, "BUFFER_ALLOC", "run_requests"), _req(P, i, "BUFFER_ALLOC", "run_bytes") / MIB,
                        run_ns(None) / 1e6))
            w("(graph runs: GRAPH_RUNs executed, a create's first run included, and their time on the device queue; "
              "sets: TENSOR_SETs (the graphs' inputs) and their queue time; gets: TENSOR_GETs (outputs); allocs: "
              "BUFFER_ALLOCs after the first graph — a new context, one per prompt size of a prompt run; queue "
              "ms: every running command's time on the device queue; the stage boundaries are below)\n")
        bnd = [(k, b) for k, P in ph.items() for b in P["boundaries"]]
        if bnd:
            w("\n%-8s %4s %-22s %-5s %-10s %10s %12s %14s %12s\n" % ("run", "rank", "peer", "dir", "path", "transfers",
                                                                    "MiB", "us/transfer", "MiB/s"))
            for k, b in bnd:
                n = b["transfers"] or 1
                w("%-8s %4d %-22s %-5s %-10s %10d %12.2f %14.1f %12.1f\n" % (
                    PHASE_NAMES[k], b["rank"], b["peer"], b["direction"], b["path"], b["transfers"],
                    b["bytes"] / MIB, b["time_us"] / n,
                    (b["bytes"] / MIB) / (b["time_us"] / 1e6) if b["time_us"] else 0.0))
            w("(stage boundaries, all in the run part: prefill = the llama-bench prompt runs incl. warmup, decode = "
              "the decode runs; a transfer's time runs from the SEND's (RECV's) arrival at the daemon to its last "
              "byte, so it includes waiting for the stage's compute)\n")
            gpu = [(k, i, a) for k, P in ph.items() for i, a in sorted(P["ranks"].items())
                   if a.get("gpu_sends") or a.get("gpu_recvs")]
            for k, i, a in gpu:
                w("%-8s %4d SENDs put into a landing slot by the GPU %d, RECVs held on the GPU %d\n" % (
                    PHASE_NAMES[k], i, a["gpu_sends"], a["gpu_recvs"]))
        w("\n%-8s %4s %-18s %10s %10s %10s %12s %10s\n" % (
            ("phase", "rank", "command", "load execs", "load ms", "run execs", "run mean us", "run ms") if split else
            ("phase", "rank", "command", "", "", "execs", "mean us", "total ms")))
        for k, P in ph.items():
            for e in P["exec"]:
                if e["ns"] < 1e6:  # under a millisecond in all: noise here
                    continue
                rn, rns = e["execs"] - e["load_execs"], e["ns"] - e["load_ns"]
                w("%-8s %4d %-18s %10s %10s %10d %12s %10.1f\n" % (
                    PHASE_NAMES[k], e["rank"], e["type"], e["load_execs"] if split else "",
                    "%.1f" % (e["load_ns"] / 1e6) if split else "", rn, "%.1f" % (rns / 1e3 / rn) if rn else "-",
                    rns / 1e6))
        w("(where each rank's device queue spent its time, STATS exec_times deltas, commands over a millisecond "
          "in all: on a ggml device a command's whole execution; load: commands a loading connection sent; the rest "
          "of a token's time is waiting, transfers and the client)\n")


def print_table(cfg, res, S, out=None):
    import sys
    sys.stderr.flush()
    w = (out or sys.stdout).write
    c = res["config"]
    w("\nllama-vs-rpc: %s (%.1f MiB), %d ranks x %s/%s, %d thread%s each, split %s, ubatch %d, batch %d, %d rounds\n" % (
        os.path.basename(c["model"]), c["model_bytes"] / MIB, c["ranks"], c["rank_device"]["pprpc"],
        c["rank_device"]["rpc"], c["threads_per_rank"], "" if c["threads_per_rank"] == 1 else "s",
        "/".join("%g" % x for x in c["split"]), c["ubatch"], c["batch"], c["rounds"]))
    if c.get("env"):
        w("environment: %s\n" % " ".join("%s=%s" % kv for kv in sorted(c["env"].items())))
    h = c.get("head")
    if h and h["how"] == "-dev":
        w("head (--head): %s, the client's own device, is the first stage of the remote sides, then their ranks; "
          "split %s (head first)\n" % (h["device"], "/".join("%g" % x for x in c["split"])))
    elif h:
        w("head (--head): the client's CPU keeps the first %d of the model's %d layers + the output layer (%s: "
          "the CPU has no -dev name), the ranks share the rest %s; llama.cpp pipelines only a model with every "
          "layer offloaded (llama-context.cpp), so these sides are not pipelined\n" % (
              h["layers"], h["n_layer"], h["how"], "/".join("%g" % x for x in c["split"][1:])))
    for s, a in (c.get("side_args") or {}).items():
        w("  %-12s %s\n" % (s, " ".join(a)))
    _print_net(w, res)
    _print_load(cfg, res, S, w)
    if cfg.load_only:
        w("\n%-12s %17s %6s\n" % ("side", "token hash", "errors"))
        for s, v in S["sides"].items():
            w("%-12s %17s %6d\n" % (s, "/".join(v["hashes"]) or "-", len(v["errors"])))
        _print_end(cfg, res, S, w)
        return
    hdr = "%-12s" % "side" + "".join("%13s" % ("pp%d tok/s" % n) for n in cfg.prompts) + \
        "%13s %12s %17s %6s %7s\n" % ("ttft%d ms" % max(cfg.prompts), "decode tok/s", "token hash", "errors", "runs")
    w("\n" + hdr)
    for s, v in S["sides"].items():
        w("%-12s" % s + "".join("%13s" % _f(v["pp_tps"][n]) for n in cfg.prompts) +
          "%13s %12s %17s %6d %7d\n" % (_f(v["ttft_ms"][max(cfg.prompts)]), _f(v["decode_tps"], "%.2f"),
                                        "/".join(v["hashes"]) or "-", len(v["errors"]), v["runs"]))
    w("(medians over the rounds; TTFT = llama-bench's timed prompt run of %d tokens, to the last token's logits)\n"
      % max(cfg.prompts))
    _print_sched(w, S)
    _print_logits(S, w)
    if S["ratios"]:
        w("\n%-12s %28s %28s\n" % ("paired", "prompt (all sizes)", "decode"))
        for k, v in S["ratios"].items():
            w("%-12s %28s %28s\n" % (k, _r(v["prompt_all"]), _r(v["decode"])))
        if "pprpc/rpc" in S["ratios"]:
            w("pprpc/rpc per prompt size: " + ", ".join("pp%d %s" % (n, _r(r)) for n, r in
                                                       S["ratios"]["pprpc/rpc"]["prompt"].items()) + "\n")
        w("(geometric mean of the per-round ratios [bootstrap 95%% interval], %d rounds of alternating order)\n"
          % c["rounds"])

    w("\n%-12s %4s %-17s %14s %14s %14s %22s %22s\n" % ("side", "rank", "addr", "free@peak MiB", "rank peak MiB",
                                                      "VmHWM MiB", "graphs created/run pp", "graphs created/run tg"))
    for s, v in S["sides"].items():
        for i, d in sorted(v["ranks"].items()):
            ph = v["phases"]
            gc = lambda p: "-" if p not in ph else "%d / %d" % (ph[p]["ranks"].get(i, {}).get("graph_creates", 0),
                                                               ph[p]["ranks"].get(i, {}).get("graph_runs", 0))
            addr = res.get("rank_addrs", {}).get(s, ["?"] * (i + 1))[i] if res.get("rank_addrs") else "-"
            w("%-12s %4d %-17s %14s %14s %14s %22s %22s\n" % (
                s, i, addr, _f(d.get("free_min") and d["free_min"] / MIB), _f(d.get("held_max") and d["held_max"] / MIB),
                _f(d.get("vm_hwm") and d["vm_hwm"] / MIB), gc("pp"), gc("tg")))
    _print_stats(res, S, w)
    ba = S.get("boundary_added_us") or {}
    bp = res.get("boundary_probe") or {}
    if bp.get("reason"):
        w("\nboundary probe not run: %s\n" % bp["reason"])
    if ba:
        w("\ndecode cost of a stage boundary (decode ms/token through %s%d ranks minus through %srank 0 alone, "
          "per boundary; mean [bootstrap 95%%] over the rounds):\n" % (
              "the head + " if cfg.head else "", cfg.n, "the head (same share) + " if cfg.head else ""))
        for s, d in ba.items():
            m = d["us_per_boundary_per_token"]
            w("  %-6s %9.1f us [%.1f, %.1f]   (one rank: %.3f ms/token)\n" % (s, m[0], m[1], m[2],
                                                                            d["decode_ms_tok_one_rank"]))
    if S["sweep"]:
        w("\n%-7s %14s %14s %28s\n" % ("ubatch", "pprpc tok/s", "rpc tok/s", "pprpc/rpc"))
        for row in S["sweep"]:
            if row.get("skipped"):
                w("%-7d skipped: %s\n" % (row["ubatch"], row["skipped"]))
            else:
                w("%-7d %14s %14s %28s\n" % (row["ubatch"], _f(row.get("pprpc")), _f(row.get("rpc")), _r(row.get("ratio"))))
        w("(prompt of %d tokens, %d paired rounds per ubatch; a ubatch is skipped when llama.cpp's estimate leaves "
          "less than %d MiB free on a rank's memory, checked before allocating)\n" % (
              max(cfg.prompts), c["sweep_rounds"], c["margin_mib"]))
    if S["targets"]:
        w("\ntargets (%s ranks):\n" % ("GPU" if cfg.device.gpu else "CPU"))
        for t in S["targets"]:
            w("  %-30s %s %6.2f: %8.3f [%.3f, %.3f]  %s\n" % (t["target"], "<=" if t.get("lower_is_better") else ">=",
                                                            t["need"], t["geomean"], t["ci95"][0], t["ci95"][1],
                                                            "met" if t["met"] else "MISSED" if t["met"] is False
                                                            else "inconclusive (negative: see doc/llama-vs-rpc.md)"))
    if res.get("trace"):
        w("\npipeline SVG: %s\n" % res["trace"].get("svg"))
    _print_end(cfg, res, S, w)


def _g(x):
    return "-" if x is None else "0" if x == 0 else "%.3g" % x


def _print_logits(S, w):
    L = S.get("logits") or {}
    if not L.get("run"):
        if L.get("reason"):
            w("\nteacher-forced logits: not run: %s\n" % L["reason"])
        return
    n = L["positions"]
    w("\nteacher-forced logits against %s: the hash prompt (%d tokens) + %s's %d greedy tokens, decoded "
      "as one sequence on every side; the %d positions that chose those tokens\n" % (
          L["reference"], L["n_prompt"], L["reference"], n, n))
    w("%-12s %10s %10s %8s %8s %12s  %s\n" % ("side", "NMSE", "NMSE max", "top-1", "1st diff", "max |diff|", ""))
    for s, d in L["sides"].items():
        if d["errors"]:
            w("%-12s failed: %s\n" % (s, d["errors"][0].splitlines()[0]))
            continue
        if s == L["reference"]:
            g = d.get("greedy_agree")
            w("%-12s %10s %10s %8s %8s %12s  (reference; its own argmax = its greedy token at %s/%d positions%s)\n" % (
                s, "-", "-", "-", "-", "-", "?" if g is None else g, n,
                "" if d.get("greedy_first_divergence") is None else ", first differs at %d" % d["greedy_first_divergence"]))
            continue
        fd = d.get("first_divergence")
        note = "bit-identical" if d.get("bit_identical") else ""
        if d.get("nonfinite"):
            note = "%d NaN/inf logits" % d["nonfinite"]
        if s in LOGITS_INFO:
            note = (note + " " if note else "") + "(information: this host's CPU)"
        w("%-12s %10s %10s %8s %8s %12s  %s\n" % (
            s, _g(d.get("nmse")), _g(d.get("nmse_max")), "%d/%d" % (d["top1_agree"], n),
            "none" if fd is None else str(fd), _g(d.get("max_abs")), note))
    w("(NMSE = sum (side - local)^2 / sum local^2 over those positions' logits, NMSE max = the worst position's; "
      "top-1 = positions whose argmax is local's; 1st diff = the first such position that differs (0 = the first "
      "generated token); max |diff| = the largest difference of any logit)\n")


def _logits_line(S):
    L = S.get("logits") or {}
    if not L.get("run"):
        return None
    parts = []
    for s, d in L["sides"].items():
        if s == L["reference"]:
            continue
        if d["errors"]:
            parts.append("%s failed" % s)
        elif d.get("bit_identical"):
            parts.append("%s bit-identical" % s)
        else:
            parts.append("%s NMSE %s, top-1 %d/%d" % (s, _g(d.get("nmse")), d["top1_agree"], d["positions"]))
    return "logits against %s: %s" % (L["reference"], "; ".join(parts) or "no other side")


def _print_end(cfg, res, S, w):
    c = res["config"]
    w("\ntoken hash: %s\n" % (("equal on every side and round (%s)" % S["hash"]) if S["hash_match"] else
                               "MISMATCH or missing: " + ", ".join("%s %s" % (s, "/".join(v["hashes"]) or "none")
                                                                 for s, v in S["sides"].items())))
    if "cpu_reference_match" in S:
        w("local CPU reference hash: %s\n" % ("equal" if S["cpu_reference_match"] else "different"))
    if _logits_line(S):
        w(_logits_line(S) + "\n")
    if S["problems"]:
        w("\nproblems:\n" + "".join("  %s\n" % p.replace("\n", "\n  ") for p in S["problems"]))
    w("\nlogs: %s\n%s\n" % (c["logdir"], "OK" if S["ok"] else "FAILED"))
