"""A streaming GGUF v3 writer on the standard library, with the names from gguf-py.

The key names, tensor names, value types and token types come from the pinned
release's gguf-py (gguf/constants.py, loaded by path: that module needs nothing
but the standard library, while the gguf package as a whole needs numpy, which
the GPU machine may not have).  Tensor data is written as it is produced, so a
model of tens of GiB never has to fit in memory.
"""

import importlib.util
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def default_llama_dir():
    """ext/llama.cpp-<tag> of $LLAMA_RELEASE, else of the first release of
    scripts/llama-releases (the default)."""
    with open(os.path.join(ROOT, "scripts", "llama-releases")) as f:
        tags = [l.split()[0] for l in f if l.strip() and not l.startswith("#")]
    return os.path.join(ROOT, "ext", "llama.cpp-" + os.environ.get("LLAMA_RELEASE", tags[0]))


def load_constants():
    """gguf-py's constants module: $GGUF_PY/gguf/constants.py, else the pinned
    release under $LLAMA_DIR (default ext/llama.cpp-<tag>, default_llama_dir)."""
    cands = []
    if os.environ.get("GGUF_PY"):
        cands.append(os.path.join(os.environ["GGUF_PY"], "gguf", "constants.py"))
    llama_dir = os.environ.get("LLAMA_DIR", default_llama_dir())
    cands.append(os.path.join(llama_dir, "gguf-py", "gguf", "constants.py"))
    for path in cands:
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("gguf_constants", path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules["gguf_constants"] = mod  # dataclass/enum introspection wants it
            spec.loader.exec_module(mod)
            return mod
    sys.exit("gen-model: gguf-py not found (tried %s); set GGUF_PY=DIR/gguf-py or LLAMA_DIR"
             % ", ".join(cands))


C = load_constants()
VT = C.GGUFValueType
ALIGN = C.GGUF_DEFAULT_ALIGNMENT

_SCALAR = {
    VT.UINT8: "<B", VT.INT8: "<b", VT.UINT16: "<H", VT.INT16: "<h",
    VT.UINT32: "<I", VT.INT32: "<i", VT.FLOAT32: "<f", VT.BOOL: "<?",
    VT.UINT64: "<Q", VT.INT64: "<q", VT.FLOAT64: "<d",
}


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(vtype, v):
    if vtype == VT.STRING:
        return _str(v)
    return struct.pack(_SCALAR[vtype], v)


class Writer:
    """add_* the key/values and tensors (name, ne in ggml order, type, byte
    size, a function that yields the bytes), then write(path)."""

    C = C

    def __init__(self, arch):
        self.arch = arch
        self.kv = []        # (key, bytes of type + value)
        self.tensors = []   # (name, ne, ggml type, nbytes, producer)

    def key(self, k):
        return k.format(arch=self.arch)

    def add(self, key, vtype, value):
        self.kv.append((self.key(key), struct.pack("<I", vtype) + _value(vtype, value)))

    def add_array(self, key, vtype, values):
        body = b"".join(_value(vtype, v) for v in values)
        self.kv.append((self.key(key), struct.pack("<IIQ", VT.ARRAY, vtype, len(values)) + body))

    def u32(self, key, v):
        self.add(key, VT.UINT32, int(v))

    def f32(self, key, v):
        self.add(key, VT.FLOAT32, float(v))

    def boolean(self, key, v):
        self.add(key, VT.BOOL, bool(v))

    def string(self, key, v):
        self.add(key, VT.STRING, v)

    def add_tensor(self, name, ne, ggml_type, nbytes, fn, args):
        """fn(*args) yields the tensor's bytes; fn is a module-level function and
        args plain values, so other processes can produce it (write(jobs=N))."""
        self.tensors.append((name, tuple(int(n) for n in ne), int(ggml_type), int(nbytes), fn, args))

    def write(self, path, progress=None, jobs=1):
        """Header first, then every tensor at its aligned offset, by `jobs`
        processes (each tensor's bytes depend on nothing but its own
        producer, so the file is the same for any number of jobs)."""
        names = [t[0] for t in self.tensors]
        if len(set(names)) != len(names):
            raise ValueError("duplicate tensor names")
        head = [b"GGUF", struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))]
        for k, body in self.kv:
            head.append(_str(k) + body)
        off, offs = 0, []
        for name, ne, gt, nbytes, _, _ in self.tensors:
            head.append(_str(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
                        + struct.pack("<IQ", gt, off))
            offs.append(off)
            off += (nbytes + ALIGN - 1) // ALIGN * ALIGN
        h = b"".join(head)
        base = len(h) + (-len(h)) % ALIGN
        total = off
        tmp = path + ".part"
        with open(tmp, "wb") as f:
            f.write(h)
            f.write(b"\0" * (base - len(h)))
            f.truncate(base + total)  # the alignment padding stays zero
        # largest first, so the pool ends together
        tasks = sorted(((tmp, base + offs[i], t[0], t[3], t[4], t[5]) for i, t in enumerate(self.tensors)),
                       key=lambda x: -x[3])
        done = 0
        if jobs > 1 and len(tasks) > 1:
            import multiprocessing
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                for n in pool.imap_unordered(_write_one, tasks):
                    done += n
                    if progress:
                        progress(done, total)
        else:
            for t in tasks:
                done += _write_one(t)
                if progress:
                    progress(done, total)
        os.replace(tmp, path)
        return total


def _write_one(task):
    path, off, name, nbytes, fn, args = task
    n = 0
    fd = os.open(path, os.O_WRONLY)
    try:
        for chunk in fn(*args):
            os.pwrite(fd, chunk, off + n)
            n += len(chunk)
    finally:
        os.close(fd)
    if n != nbytes:
        raise RuntimeError("%s: produced %d bytes, expected %d" % (name, n, nbytes))
    return n
