"""Deterministic tensor data from (seed, tensor name), standard library only.

Every byte comes from SHAKE-256 of "seed:name:chunk" (chunks of CHUNK
elements), so a tensor's values depend on the seed and its name only: not on
the order tensors are written, on the machine, or on the Python version.

f16 weights: each value is built from random bits directly, lane-wise on one
big integer per chunk (Python's big-int and/or/add run in C at memory speed):
random sign, random 10-bit mantissa, and an exponent of e0 or e0 + 1 chosen by
one random bit, i.e. a symmetric distribution with |x| uniform within each of
two octaves.  Its RMS is 2^(e0-15) * sqrt(35/6), so e0 is picked to put the RMS
within a factor sqrt(2) of the requested std.  f32 tensors (norms, gates,
decays: small) are uniform in [lo, hi) from 32-bit draws.
"""

import hashlib
import math
import struct

CHUNK = 1 << 20  # elements per SHAKE stream

_masks = {}


def _lane_masks(n):
    m = _masks.get(n)
    if m is None:
        m = (int.from_bytes(b"\xff\x83" * n, "little"),   # sign + mantissa: 0x83FF
             int.from_bytes(b"\x00\x04" * n, "little"))   # exponent's low bit: 0x0400
        _masks[n] = m
    return m


def _stream(seed, name, i, nbytes):
    return hashlib.shake_256(("%d:%s:%d" % (seed, name, i)).encode()).digest(nbytes)


def f16_exponent(std):
    e0 = 15 + round(math.log2(std / math.sqrt(35.0 / 6.0)))
    return max(1, min(29, e0))


def f16_rms(std):
    return 2.0 ** (f16_exponent(std) - 15) * math.sqrt(35.0 / 6.0)


def f16_chunks(seed, name, n, std):
    """n f16 values with RMS ~ std (see above), as byte chunks."""
    e0 = f16_exponent(std)
    for i, start in enumerate(range(0, n, CHUNK)):
        k = min(CHUNK, n - start)
        keep, ebit = _lane_masks(k)
        base = int.from_bytes(struct.pack("<H", e0 << 10) * k, "little") if k != CHUNK else _base(e0)
        x = int.from_bytes(_stream(seed, name, i, 2 * k), "little")
        # exponent field = e0 + random bit: lane sums stay below 31 << 10, no carry between lanes
        v = (x & keep) | ((x & ebit) + base)
        yield v.to_bytes(2 * k, "little")


_bases = {}


def _base(e0):
    b = _bases.get(e0)
    if b is None:
        b = int.from_bytes(struct.pack("<H", e0 << 10) * CHUNK, "little")
        _bases[e0] = b
    return b


def f32_uniform(seed, name, n, lo, hi):
    """n f32 values uniform in [lo, hi), as one bytes object (small tensors)."""
    out = bytearray()
    scale = (hi - lo) / 4294967296.0
    for i, start in enumerate(range(0, n, CHUNK)):
        k = min(CHUNK, n - start)
        u = struct.unpack("<%dI" % k, _stream(seed, name, i, 4 * k))
        out += struct.pack("<%df" % k, *(lo + scale * x for x in u))
    return bytes(out)


def f32_values(values):
    return struct.pack("<%df" % len(values), *values)
