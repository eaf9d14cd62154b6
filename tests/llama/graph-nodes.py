#!/usr/bin/env python3
"""tests/llama/graph-nodes.py GGML_H DUMP... — the node ops of graphs the
plugin sent (PPRPC_DUMP_GRAPHS files: packed GgmlGraphCreate, proto/pprpc.proto),
read with a minimal protobuf wire reader (standard library only).

Prints one line per file: the node count and how many nodes are view ops
(VIEW, RESHAPE, PERMUTE, TRANSPOSE), then a total.  Exit 1 when no graph has
a view op among its nodes: the views must travel as nodes, since ggml-cuda
matches its fusions on the node sequence (ggml-pprpc/serialize.c, view_node).
"""
import re
import sys


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value) of one message; length-delimited
    values as bytes."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield f, wt, v


def ops_enum(ggml_h):
    """enum ggml_op's names in order (GGML_OP_NONE = 0, ...)."""
    src = open(ggml_h).read()
    body = re.search(r"enum ggml_op \{(.*?)\};", src, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    return [n.strip() for n in body.split(",") if n.strip().startswith("GGML_OP_")]


def main():
    names = ops_enum(sys.argv[1])
    views = {names.index("GGML_OP_" + n) for n in ("VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE")}
    total = with_views = 0
    for path in sys.argv[2:]:
        tensors, nodes = [], []
        for f, wt, v in fields(open(path, "rb").read()):
            if f == 2 and wt == 2:
                op = 0
                for tf, twt, tv in fields(v):
                    if tf == 4 and twt == 0:
                        op = tv
                tensors.append(op)
            elif f == 3 and wt == 2:      # packed
                j = 0
                while j < len(v):
                    x, j = varint(v, j)
                    nodes.append(x)
            elif f == 3 and wt == 0:
                nodes.append(v)
        nv = sum(1 for k in nodes if tensors[k] in views)
        total += 1
        with_views += nv > 0
        print("%s: %d nodes, %d view ops" % (path.rsplit("/", 1)[-1], len(nodes), nv))
    print("graphs: %d, with view ops among their nodes: %d" % (total, with_views))
    return 0 if total and with_views else 1


if __name__ == "__main__":
    sys.exit(main())
