"""Paired statistics, the same method as tools/pprpc-bench.c (ratio_ci):
geometric mean of the per-pair ratios and a percentile bootstrap 95% interval
from 1000 resamples drawn with splitmix64 seeded 0xB007, so the numbers of the
two benchmarks are comparable."""

import math

M64 = (1 << 64) - 1


def _mix(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def _boot_means(v):
    """Means of 1000 resamples of v (splitmix64 from 0xB007), sorted."""
    k = len(v)
    r = 0xB007
    bs = []
    for _ in range(1000):
        s = 0.0
        for _ in range(k):
            r = _mix(r)
            s += v[r % k]
        bs.append(s / k)
    bs.sort()
    return bs


def ratio_ci(a, b):
    """Geomean of a[i]/b[i] and its bootstrap 95% CI: (gm, lo, hi), or None."""
    pairs = [(x, y) for x, y in zip(a, b) if x and y and x > 0 and y > 0]
    if not pairs:
        return None
    lr = [math.log(x / y) for x, y in pairs]
    bs = _boot_means(lr)  # exp is increasing: the percentiles of the logs, exponentiated
    return math.exp(sum(lr) / len(lr)), math.exp(bs[24]), math.exp(bs[974])


def median(v):
    v = sorted(x for x in v if x is not None)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def geomean(v):
    v = [x for x in v if x and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def mean_ci(v):
    """Mean of v and a percentile bootstrap 95% CI (same resampling as ratio_ci)."""
    v = [x for x in v if x is not None]
    if not v:
        return None
    bs = _boot_means(v)
    return sum(v) / len(v), bs[24], bs[974]
