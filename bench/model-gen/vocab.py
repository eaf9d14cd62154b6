"""A SentencePiece-style ("llama") vocabulary with byte fallback, and prompt text.

Token 0 <unk>, 1 <s>, 2 </s>, then the 256 byte tokens <0x00>..<0xFF> (any text
tokenizes, any token detokenizes), then word pieces over a-z in a fixed order:
"\u2581", letters, "\u2581" + letter, two letters, "\u2581" + two letters, three
letters, ...  Every prefix of a piece is itself a piece, so llama.cpp's SPM
merges reach the long ones.  Scores fall with the index (earlier = more
frequent), as in a real SentencePiece model.
"""

import hashlib
import itertools
import string

SPACE = "\u2581"


def pieces(n):
    """The first n word pieces."""
    out = [SPACE]
    letters = string.ascii_lowercase
    length = 1
    while len(out) < n:
        words = ["".join(p) for p in itertools.product(letters, repeat=length)]
        for group in (words, [SPACE + w for w in words]):
            for w in group:
                if len(out) == n:
                    return out
                out.append(w)
        length += 1
    return out[:n]


def build(n_vocab, C):
    """(tokens, scores, token types) for n_vocab >= 260."""
    if n_vocab < 260:
        raise ValueError("vocabulary must hold 3 specials, 256 bytes and one piece (>= 260)")
    TT = C.TokenType
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [TT.UNKNOWN, TT.CONTROL, TT.CONTROL] + [TT.BYTE] * 256
    words = pieces(n_vocab - len(tokens))
    tokens += words
    types += [TT.NORMAL] * len(words)
    scores = [0.0] * 259 + [-float(i) for i in range(len(words))]
    return tokens, scores, [int(t) for t in types]


def prompt_text(seed, n_words):
    """Deterministic lowercase words (2..7 letters), space separated."""
    h = hashlib.shake_256(("prompt:%d" % seed).encode()).digest(8 * n_words)
    words = []
    for i in range(n_words):
        b = h[8 * i:8 * i + 8]
        ln = 2 + b[0] % 6
        words.append("".join(string.ascii_lowercase[c % 26] for c in b[1:1 + ln]))
    return " ".join(words)
