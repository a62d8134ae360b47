#!/usr/bin/env python3
"""hf_compare.py: dtrain's logits against Hugging Face transformers' for
the same GPT-2 directory and prompt (docs/interop.md). Not part of
`make check`: it needs Python packages dtrain does not depend on
(torch, transformers, numpy), and runs offline on local directories.

  python3 tools/hf_compare.py compare HF_DIR LOGITS PROMPT [--tokenizer DIR]
      HF_DIR: what `dtrain --export-hf` wrote (or any GPT-2 directory);
      LOGITS: what `dtrain ... --generate 0 --prompt PROMPT --logits LOGITS`
      wrote (float32, little-endian, one row of vocab_size per prompt
      token). The prompt is tokenized as dtrain did: bytes, or GPT-2's BPE
      from --tokenizer DIR (transformers' GPT2TokenizerFast). Prints the
      largest absolute difference of the logits, the largest relative to the
      logits' own scale, and whether every position's argmax agrees.

  python3 tools/hf_compare.py random OUT_DIR [--layers 2 --embd 64
      --heads 4 --positions 64 --vocab 256 --seed 0]
      Writes a transformers-initialised GPT2LMHeadModel with save_pretrained
      (safetensors): the reverse direction, for `dtrain --load-hf OUT_DIR`.
"""
import argparse
import sys


def _imports():
    try:
        import numpy as np
        import torch
        import transformers
    except ImportError as e:  # the one line a user needs
        sys.exit("hf_compare.py: needs numpy, torch and transformers (%s)" % e)
    return np, torch, transformers


def compare(a):
    np, torch, transformers = _imports()
    model = transformers.GPT2LMHeadModel.from_pretrained(a.hf_dir, torch_dtype=torch.float32)
    model.eval()
    if a.tokenizer:
        tok = transformers.GPT2TokenizerFast.from_pretrained(a.tokenizer)
        ids = tok(a.prompt)["input_ids"]
    else:
        ids = list(a.prompt.encode("utf-8"))
    V = model.config.vocab_size
    mine = np.fromfile(a.logits, dtype="<f4")
    if mine.size != len(ids) * V:
        sys.exit("hf_compare.py: %s holds %d floats, expected %d tokens x %d = %d (same prompt and tokenizer?)"
                 % (a.logits, mine.size, len(ids), V, len(ids) * V))
    mine = mine.reshape(len(ids), V)
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0].double().numpy()
    diff = np.abs(mine.astype(np.float64) - theirs)
    scale = np.abs(theirs).max()
    same_argmax = bool((mine.argmax(axis=1) == theirs.argmax(axis=1)).all())
    print("tokens %d, vocab %d: max |dtrain - transformers| %.3e, relative to max |logit| %.3e: %.3e; "
          "argmax agrees at every position: %s" % (len(ids), V, diff.max(), scale, diff.max() / scale, same_argmax))


def random_model(a):
    np, torch, transformers = _imports()
    torch.manual_seed(a.seed)
    cfg = transformers.GPT2Config(n_layer=a.layers, n_embd=a.embd, n_head=a.heads, n_positions=a.positions,
                                  vocab_size=a.vocab, activation_function="gelu_new", resid_pdrop=0.0,
                                  embd_pdrop=0.0, attn_pdrop=0.0)
    model = transformers.GPT2LMHeadModel(cfg)
    model.save_pretrained(a.out_dir, safe_serialization=True)
    print("wrote %s (config.json, model.safetensors): %d layers, width %d, %d heads, vocabulary %d, context %d"
          % (a.out_dir, a.layers, a.embd, a.heads, a.vocab, a.positions))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("hf_dir")
    c.add_argument("logits")
    c.add_argument("prompt")
    c.add_argument("--tokenizer")
    r = sub.add_parser("random")
    r.add_argument("out_dir")
    r.add_argument("--layers", type=int, default=2)
    r.add_argument("--embd", type=int, default=64)
    r.add_argument("--heads", type=int, default=4)
    r.add_argument("--positions", type=int, default=64)
    r.add_argument("--vocab", type=int, default=256)
    r.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    compare(a) if a.cmd == "compare" else random_model(a)


if __name__ == "__main__":
    main()
