"""The page cache of given files, and only of them: dropped with
posix_fadvise(POSIX_FADV_DONTNEED) file by file (never the whole system's
caches: other work shares this host), and measured with mincore(2), so that a
"cold" load can say how cold it was.

DONTNEED skips dirty pages and pages a process still maps: every file is
fsync'ed first, and the ranks that could map one are stopped before (the
benchmark restarts them for a cold load); what is still resident afterwards
is reported, not hidden."""

import ctypes
import ctypes.util
import mmap
import os

_libc = None


def _c():
    global _libc
    if _libc is None:
        lib = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        lib.mmap.restype = ctypes.c_void_p
        lib.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        lib.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        lib.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
        _libc = lib
    return _libc


def files(paths):
    """Regular files among paths and under the folders among them (no symlinks followed)."""
    out = []
    for p in paths:
        if os.path.islink(p):
            continue
        if os.path.isfile(p):
            out.append(p)
        elif os.path.isdir(p):
            for d, dirs, names in os.walk(p):
                for n in sorted(names):
                    f = os.path.join(d, n)
                    if os.path.isfile(f) and not os.path.islink(f):
                        out.append(f)
    return out


def resident(path):
    """(bytes of the file in the page cache, file bytes); (None, size) when it cannot be told."""
    size = os.path.getsize(path)
    if size == 0:
        return 0, 0
    page = mmap.PAGESIZE
    n = (size + page - 1) // page
    c = _c()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = c.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return None, size
        try:
            vec = (ctypes.c_ubyte * n)()
            if c.mincore(addr, size, vec) != 0:
                return None, size
            # the low bit of each byte: resident (the others are reserved, 0)
            return min((n - bytes(vec).count(0)) * page, size), size
        finally:
            c.munmap(addr, size)
    finally:
        os.close(fd)


def drop(paths):
    """Drop the page cache of every file under paths.  Returns {"files", "bytes",
    "resident_bytes"}: what was dropped and what is still resident after."""
    fs = files(paths)
    total = left = 0
    for f in fs:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            try:
                os.fsync(fd)
            except OSError:
                pass
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        r, size = resident(f)
        total += size
        left += r or 0
    return {"files": len(fs), "bytes": total, "resident_bytes": left}
