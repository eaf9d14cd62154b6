"""The few GGUF header values the benchmark needs, read with the standard
library (the GPU machine has no gguf-py's numpy): the architecture and its
layer count (`--head` on the CPU keeps the first layers on the client's CPU
through -ngl, counted as llama.cpp counts them)."""

import struct

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


class GGUFError(Exception):
    pass


def _read(f, n):
    b = f.read(n)
    if len(b) != n:
        raise GGUFError("truncated header")
    return b


def _string(f):
    (n,) = struct.unpack("<Q", _read(f, 8))
    if n > 1 << 20:
        raise GGUFError("a key or string of %d bytes" % n)
    return _read(f, n).decode("utf-8", "replace")


def _value(f, vtype, keep):
    """The value (when keep), else skipped."""
    if vtype in _SCALAR:
        fmt = _SCALAR[vtype]
        v = struct.unpack(fmt, _read(f, struct.calcsize(fmt)))[0]
        return v if keep else None
    if vtype == _STRING:
        s = _string(f)
        return s if keep else None
    if vtype == _ARRAY:
        et, n = struct.unpack("<IQ", _read(f, 12))
        if et in _SCALAR:
            f.seek(n * struct.calcsize(_SCALAR[et]), 1)  # token scores and the like: skipped whole
            return None
        for _ in range(n):
            _value(f, et, False)
        return None
    raise GGUFError("unknown value type %d" % vtype)


def metadata(path, want):
    """{key: value} of the scalar and string keys in `want` found in the header."""
    out = {}
    with open(path, "rb") as f:
        magic, version = struct.unpack("<4sI", _read(f, 8))
        if magic != b"GGUF" or version < 2:
            raise GGUFError("%s: not a GGUF v2+ file" % path)
        _, n_kv = struct.unpack("<QQ", _read(f, 16))
        for _ in range(n_kv):
            key = _string(f)
            (vtype,) = struct.unpack("<I", _read(f, 4))
            v = _value(f, vtype, key in want)
            if key in want:
                out[key] = v
    return out


def n_layer(path):
    """llama.cpp's n_layer_all: the architecture's block_count."""
    arch = metadata(path, {"general.architecture"}).get("general.architecture")
    if not arch:
        raise GGUFError("%s: no general.architecture" % path)
    key = "%s.block_count" % arch
    n = metadata(path, {key}).get(key)
    if not isinstance(n, int) or n < 1:
        raise GGUFError("%s: no %s" % (path, key))
    return n
