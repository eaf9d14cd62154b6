"""Teacher-forced logits of one side against a reference side's (local), on the same tokens.

The files are llama-logits' (bench/llama-vs-rpc/llama-logits.cpp): a 16-byte header
("LLGT", version 1, n_pos, n_vocab, little-endian uint32), the n_pos int32 token ids, then
n_pos rows of n_vocab float32 logits, row i computed after ids[0..i] (it predicts ids[i + 1]).
Standard library only (struct, array): no numpy on the GPU machine.

    python3 logits.py A B [--first N] [--count N]   compare A with reference B, JSON on stdout
"""

import array
import json
import math
import operator
import struct
import sys

MAGIC = b"LLGT"
VERSION = 1
HEADER = struct.Struct("<4sIII")


class LogitsError(Exception):
    pass


class LogitsFile:
    """One llama-logits file: its ids, and its rows read one at a time."""

    def __init__(self, path):
        self.path = path
        self.f = open(path, "rb")
        try:
            head = self.f.read(HEADER.size)
            if len(head) != HEADER.size:
                raise LogitsError("%s: shorter than the header" % path)
            magic, version, self.n_pos, self.n_vocab = HEADER.unpack(head)
            if magic != MAGIC or version != VERSION:
                raise LogitsError("%s: not a llama-logits file (version %d)" % (path, VERSION))
            ids = array.array("i")
            ids.frombytes(self.f.read(4 * self.n_pos))
            if len(ids) != self.n_pos:
                raise LogitsError("%s: truncated in its token ids" % path)
            if sys.byteorder != "little":
                ids.byteswap()
            self.ids = list(ids)
            self.rows_at = HEADER.size + 4 * self.n_pos
            self.f.seek(0, 2)
            want = self.rows_at + 4 * self.n_pos * self.n_vocab
            if self.f.tell() != want:
                raise LogitsError("%s: %d bytes, the header says %d" % (path, self.f.tell(), want))
        except BaseException:
            self.f.close()
            raise

    def row(self, i):
        if not 0 <= i < self.n_pos:
            raise LogitsError("%s: no row %d (it has %d)" % (self.path, i, self.n_pos))
        self.f.seek(self.rows_at + 4 * self.n_vocab * i)
        r = array.array("f")
        r.frombytes(self.f.read(4 * self.n_vocab))
        if sys.byteorder != "little":
            r.byteswap()
        return r

    def close(self):
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def argmax(row):
    """The first index of the largest value (NaN never wins: max skips it
    only where it is not first, so NaN rows are caught by the caller)."""
    return row.index(max(row))


def argmaxes(path, first, count):
    """The argmax of rows first .. first+count-1 of one file (None for a row with NaN/inf)."""
    with LogitsFile(path) as f:
        if first < 0 or count <= 0 or first + count > f.n_pos:
            raise LogitsError("%s: rows %d..%d: it has %d" % (path, first, first + count - 1, f.n_pos))
        out = []
        for k in range(count):
            r = f.row(first + k)
            out.append(argmax(r) if all(map(math.isfinite, r)) else None)
        return out


def compare(path, ref_path, first=0, count=None):
    """Side `path` against reference `ref_path` over rows first .. first+count-1.

    Returns {positions, first, nmse, nmse_max, nmse_max_at, top1, top1_agree, first_divergence,
    max_abs, bit_identical, nonfinite, argmax, ref_argmax}:
      nmse            sum over the rows of sum (a - b)^2 / sum over the rows of sum b^2 (b: the reference)
      nmse_max        the largest per-row NMSE, at row index nmse_max_at (relative to first)
      top1            fraction of the rows whose argmax equals the reference's
      first_divergence the first row (relative to first) whose argmax differs, or None
      max_abs         the largest |a - b| of any logit of any row
      nonfinite       NaN/inf values in the side's rows (then the figures above are None)
    Raises LogitsError when the files do not hold the same tokens or vocabulary."""
    with LogitsFile(path) as a, LogitsFile(ref_path) as b:
        if a.n_vocab != b.n_vocab:
            raise LogitsError("%s has %d logits a row, %s %d" % (path, a.n_vocab, ref_path, b.n_vocab))
        if a.ids != b.ids:
            k = next((i for i, (x, y) in enumerate(zip(a.ids, b.ids)) if x != y), min(a.n_pos, b.n_pos))
            raise LogitsError("%s and %s hold other tokens (from position %d)" % (path, ref_path, k))
        n = a.n_pos - first if count is None else count
        if first < 0 or n <= 0 or first + n > a.n_pos:
            raise LogitsError("rows %d..%d: the files have %d" % (first, first + n - 1, a.n_pos))
        err_sum = ref_sum = 0.0
        nmse_max, nmse_max_at, max_abs = 0.0, None, 0.0
        agree, first_div, nonfinite = 0, None, 0
        am, bm = [], []
        for k in range(n):
            ra, rb = a.row(first + k), b.row(first + k)
            d = list(map(operator.sub, ra, rb))
            e = math.fsum(map(operator.mul, d, d))
            r = math.fsum(map(operator.mul, rb, rb))
            if not (math.isfinite(e) and math.isfinite(r)):
                nonfinite += sum(1 for x in ra if not math.isfinite(x))
                am.append(None)
                bm.append(argmax(rb))
                continue
            err_sum += e
            ref_sum += r
            row_nmse = e / r if r > 0 else (0.0 if e == 0 else math.inf)
            if nmse_max_at is None or row_nmse > nmse_max:
                nmse_max, nmse_max_at = row_nmse, k
            max_abs = max(max_abs, max(d), -min(d))
            xa, xb = argmax(ra), argmax(rb)
            am.append(xa)
            bm.append(xb)
            if xa == xb:
                agree += 1
            elif first_div is None:
                first_div = k
        out = {"positions": n, "first": first, "nonfinite": nonfinite, "argmax": am, "ref_argmax": bm}
        if nonfinite:
            first_div = next((k for k, (x, y) in enumerate(zip(am, bm)) if x != y), None)
            agree = sum(1 for x, y in zip(am, bm) if x == y)
            out.update(nmse=None, nmse_max=None, nmse_max_at=None, max_abs=None, top1=agree / n,
                       top1_agree=agree, first_divergence=first_div, bit_identical=False)
            return out
        out.update(nmse=err_sum / ref_sum if ref_sum > 0 else (0.0 if err_sum == 0 else math.inf),
                   nmse_max=nmse_max, nmse_max_at=nmse_max_at, max_abs=max_abs, top1=agree / n,
                   top1_agree=agree, first_divergence=first_div, bit_identical=err_sum == 0.0)
        return out


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="logits.py", description="compare two llama-logits files")
    ap.add_argument("side")
    ap.add_argument("reference")
    ap.add_argument("--first", type=int, default=0, help="first row compared (default 0)")
    ap.add_argument("--count", type=int, default=None, help="rows compared (default: to the end)")
    a = ap.parse_args(argv)
    try:
        r = compare(a.side, a.reference, a.first, a.count)
    except (OSError, LogitsError) as e:
        print("logits.py: %s" % e, file=sys.stderr)
        return 1
    json.dump(r, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
