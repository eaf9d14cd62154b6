"""Will a configuration fit?  Asked before anything is allocated.

Need per device: llama.cpp's own estimate (llama-fit-params --fit-print: model,
context and compute buffer MiB per device, from a model and context created
with no allocations).  Free per device: what the device reports to llama.cpp
(llama-bench --list-devices: the ranks' own free memory through each backend).
Ranks that share memory (one host's RAM, or one GPU) are checked together: the
sum of their needs must leave the margin free.
"""

import re
import subprocess

_LIST = re.compile(r"^\s*(\S+): .*\((\d+) MiB, (\d+) MiB free\)")


class FitError(Exception):
    pass


def list_devices(cfg, side, env):
    """{device name: (total MiB, free MiB)} as the side's backend reports them."""
    argv = cfg.client_prefix + [cfg.llama_bench] + (["--rpc", ",".join(side.rpc)] if side.rpc else []) + ["--list-devices"]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    out = {}
    for line in p.stdout.splitlines():
        m = _LIST.match(line)
        if m:
            out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    if p.returncode != 0 or not out:
        raise FitError("%s --list-devices: exit %d, no devices: %s" % (side.name, p.returncode,
                                                                      (p.stderr or p.stdout).strip()[-300:]))
    return out


def estimate(cfg, side, env, common_args, ctx):
    """{device: MiB needed} for one configuration (model + context + compute)."""
    if not cfg.fit_params:
        raise FitError("llama-fit-params not found in %s (scripts/build-llama.sh builds it)" % cfg.llama_bin)
    argv = cfg.client_prefix + [cfg.fit_params] + common_args + ["-c", str(ctx), "--fit-print", "on"]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        raise FitError("%s llama-fit-params: exit %d: %s" % (side.name, p.returncode, p.stderr.strip()[-400:]))
    need = {}
    for line in p.stdout.splitlines():
        f = line.split()
        if len(f) == 4 and all(x.isdigit() for x in f[1:]):
            need[f[0]] = sum(int(x) for x in f[1:])
    if not need:
        raise FitError("%s llama-fit-params printed no estimate: %s" % (side.name, p.stdout.strip()[-300:]))
    return need


def check(groups, need, free, margin_mib):
    """groups: [[device names sharing one memory]].  Returns (ok, detail rows)."""
    ok, rows = True, []
    for g in groups:
        n = sum(need.get(d, 0) for d in g)
        fr = min(free[d][1] for d in g if d in free) if any(d in free for d in g) else None
        left = None if fr is None else fr - n
        good = left is not None and left >= margin_mib
        ok &= good
        rows.append({"devices": g, "need_mib": n, "free_mib": fr, "left_mib": left, "ok": good})
    return ok, rows
