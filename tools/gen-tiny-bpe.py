#!/usr/bin/env python3
"""gen-tiny-bpe.py: a small GPT-2-format byte-level BPE tokenizer
(vocab.json + merges.txt) learned from text files, for tests and
tutorials that need a real BPE vocabulary without GPT-2's 1.5 MB one
(tests/data/bpe-tiny, made by
  python3 tools/gen-tiny-bpe.py 512 tests/data/bpe-tiny docs/*.md
and committed, so the build needs no Python).

The files have GPT-2's exact format: token strings in GPT-2's
byte-to-unicode alphabet, the 256 byte tokens first (ids 0..255 in
bytes_to_unicode's order, as GPT-2's own vocab), then one token per merge
in rank order, then "<|endoftext|>"; merges.txt starts "#version: 0.2".
Learning is the textbook algorithm (most frequent adjacent pair within
words, ties to the pair first seen); words come from an ASCII
approximation of GPT-2's pre-tokenizer (the learned merges only have to
be a valid BPE; dtrain's encoder applies the real pattern).
"""
import collections
import json
import re
import sys


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""")


def main():
    if len(sys.argv) < 4:
        sys.exit("usage: gen-tiny-bpe.py N_MERGES OUT_DIR TEXT...")
    n_merges, out = int(sys.argv[1]), sys.argv[2]
    b2u = bytes_to_unicode()
    words = collections.Counter()
    for path in sorted(sys.argv[3:]):
        text = open(path, encoding="utf-8", errors="replace").read()
        for w in PAT.findall(text):
            words[tuple(b2u[b] for b in w.encode("utf-8"))] += 1
    vocab = [b2u[b] for b in sorted(b2u, key=lambda b: list(b2u).index(b))]
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for i in range(len(w) - 1):
                pairs[w[i], w[i + 1]] += c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: kv[1])[0]
        merges.append(best)
        vocab.append(best[0] + best[1])
        new = collections.Counter()
        for w, c in words.items():
            o, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    o.append(w[i] + w[i + 1])
                    i += 2
                else:
                    o.append(w[i])
                    i += 1
            new[tuple(o)] += c
        words = new
    vocab.append("<|endoftext|>")
    import os
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(vocab)}, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write("%s %s\n" % (a, b))
    print("%s: %d tokens (%d merges)" % (out, len(vocab), len(merges)))


if __name__ == "__main__":
    main()
