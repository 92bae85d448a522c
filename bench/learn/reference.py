#!/usr/bin/python3
"""Plain PyTorch reference Transformer trainer for the learning benchmark.

    /usr/bin/python3 bench/learn/reference.py --corpus DIR --spm MODEL --out OUTDIR
        [--steps 2000] [--max-tokens 2048] [--d-model 128] [--layers 3]
        [--heads 4] [--d-ff 512] [--dropout 0.1] [--lr 1e-3]
        [--warmup-fraction 0.1] [--min-lr 1e-5] [--weight-decay 0.01]
        [--clip 1.0] [--label-smoothing 0.1] [--threads 2] [--seed 1]
        [--log-every 50] [--max-len-a 1.5] [--max-len-b 10]
        [--max-example-tokens 512] [--max-test N] [--decode-batch 64]

Trains torch.nn.Transformer (post-norm, tied embeddings, sinusoidal
positions) on DIR/train.tsv, greedy-decodes DIR/test.tsv and writes
OUTDIR/hyp.txt and OUTDIR/reference.json.  Benchmark tooling only: this is
the "standard implementation" the C++ trainer is compared against.

Example layout: src = s_1..s_n eos; tgt_in = bos t_1..t_m;
tgt_out = t_1..t_m eos.  Ids: pad 0, unk 1, bos 2, eos 3.
"""

import argparse
import json
import math
import os
import random
import sys
import time

PAD, UNK, BOS, EOS = 0, 1, 2, 3


class InputError(Exception):
    pass


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------

def read_tsv(path):
    """Return [(src, tgt)] from a src<TAB>tgt[<TAB>doc] file."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: file not found")
    pairs = []
    try:
        with open(path, encoding="utf-8", newline="") as f:
            for lineno, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if "\t" not in line:
                    raise InputError(f"{path}:{lineno}: line has no tab "
                                     f"(expected src<TAB>tgt<TAB>doc_id)")
                fields = line.split("\t")
                pairs.append((fields[0], fields[1]))
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 ({e})")
    if not pairs:
        raise InputError(f"{path}: no sentence pairs (empty file)")
    return pairs


def encode_pairs(sp, pairs):
    """[(src_ids + eos, bos + tgt_ids, tgt_ids + eos)]"""
    srcs = sp.encode([s for s, _ in pairs])
    tgts = sp.encode([t for _, t in pairs])
    return [(s + [EOS], [BOS] + t, t + [EOS]) for s, t in zip(srcs, tgts)]


def make_batches(lengths, max_tokens, rng):
    """One epoch of batches (lists of example indices).

    Sort by max(src_len, tgt_len), ties in random order; fill greedily while
    (examples) x (longest length in the batch) <= max_tokens (a batch always
    holds at least one example); shuffle the batch order."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    order.sort(key=lambda i: lengths[i])  # stable: ties keep the random order
    batches = []
    cur = []
    cur_max = 0
    for i in order:
        new_max = max(cur_max, lengths[i])
        if cur and (len(cur) + 1) * new_max > max_tokens:
            batches.append(cur)
            cur = []
            new_max = lengths[i]
        cur.append(i)
        cur_max = new_max
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def pad_batch(torch, seqs):
    n = max(len(s) for s in seqs)
    out = torch.zeros(len(seqs), n, dtype=torch.long)
    for row, s in enumerate(seqs):
        out[row, :len(s)] = torch.tensor(s, dtype=torch.long)
    return out


# ---------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------

def build_model(torch, vocab, args):
    nn = torch.nn

    class Seq2SeqTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            d = args.d_model
            self.d_model = d
            self.embed_scale = math.sqrt(d)
            # nn.Transformer initialises its own weight matrices with
            # xavier_uniform_ in _reset_parameters().
            self.transformer = nn.Transformer(
                d_model=d, nhead=args.heads,
                num_encoder_layers=args.layers, num_decoder_layers=args.layers,
                dim_feedforward=args.d_ff, dropout=args.dropout,
                activation="relu", batch_first=True)
            # One matrix for source, target and output projection.
            self.embed = nn.Embedding(vocab, d)
            nn.init.normal_(self.embed.weight, mean=0.0, std=d ** -0.5)
            self.dropout = nn.Dropout(args.dropout)
            self.register_buffer("pe", self._sinusoid(1024), persistent=False)

        def _sinusoid(self, n):
            # Vaswani et al.: PE[p, 2i] = sin(p / 10000^(2i/d)),
            # PE[p, 2i+1] = cos(p / 10000^(2i/d)); positions from 0.
            d = self.d_model
            pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)
            div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32)
                            * (-math.log(10000.0) / d))
            pe = torch.zeros(n, d)
            pe[:, 0::2] = torch.sin(pos * div)
            pe[:, 1::2] = torch.cos(pos * div)[:, : d // 2]
            return pe

        def positions(self, n):
            if n > self.pe.size(0):
                self.pe = self._sinusoid(max(n, 2 * self.pe.size(0))).to(self.pe.device)
            return self.pe[:n]

        def embed_tokens(self, ids):
            x = self.embed(ids) * self.embed_scale + self.positions(ids.size(1))
            return self.dropout(x)

        def encode(self, src):
            src_pad = src.eq(PAD)
            memory = self.transformer.encoder(self.embed_tokens(src),
                                              src_key_padding_mask=src_pad)
            return memory, src_pad

        def decode(self, tgt_in, memory, src_pad):
            t = tgt_in.size(1)
            causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            h = self.transformer.decoder(
                self.embed_tokens(tgt_in), memory, tgt_mask=causal,
                tgt_key_padding_mask=tgt_in.eq(PAD),
                memory_key_padding_mask=src_pad)
            return nn.functional.linear(h, self.embed.weight)  # tied output

        def forward(self, src, tgt_in):
            memory, src_pad = self.encode(src)
            return self.decode(tgt_in, memory, src_pad)

    return Seq2SeqTransformer()


def lr_at(step, args, warmup):
    """Learning rate for update STEP (1-based)."""
    if warmup > 0 and step <= warmup:
        return args.lr * step / warmup
    span = args.steps - warmup
    if span <= 0:
        return args.lr
    progress = min(1.0, (step - warmup) / span)
    return args.min_lr + (args.lr - args.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------

def greedy_decode(torch, model, sources, args):
    """Greedy decoding; SOURCES are id lists ending in eos.  Returns target id
    lists (eos excluded) in the input order."""
    results = [None] * len(sources)
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    with torch.no_grad():
        for start in range(0, len(order), args.decode_batch):
            idx = order[start:start + args.decode_batch]
            src = pad_batch(torch, [sources[i] for i in idx])
            # max_len from the source length without its eos (as fairseq)
            max_len = torch.tensor(
                [math.ceil(args.max_len_a * (len(sources[i]) - 1) + args.max_len_b)
                 for i in idx], dtype=torch.long)
            memory, src_pad = model.encode(src)
            ys = torch.full((len(idx), 1), BOS, dtype=torch.long)
            done = torch.zeros(len(idx), dtype=torch.bool)
            out = [[] for _ in idx]
            for step in range(int(max_len.max().item())):
                logits = model.decode(ys, memory, src_pad)[:, -1]
                nxt = logits.argmax(-1)
                nxt = nxt.masked_fill(done, PAD)
                for row in (~done).nonzero().flatten().tolist():
                    tok = nxt[row].item()
                    if tok != EOS:
                        out[row].append(tok)
                done = done | nxt.eq(EOS) | (max_len <= step + 1)
                ys = torch.cat([ys, nxt.unsqueeze(1)], dim=1)
                if bool(done.all()):
                    break
            for row, i in enumerate(idx):
                results[i] = out[row]
    return results


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="directory with train.tsv and test.tsv")
    ap.add_argument("--spm", required=True, help="sentencepiece model file")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--max-tokens", type=int, default=2048)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-ff", type=int, default=512)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup-fraction", type=float, default=0.1)
    ap.add_argument("--min-lr", type=float, default=1e-5)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--max-len-a", type=float, default=1.5)
    ap.add_argument("--max-len-b", type=float, default=10)
    ap.add_argument("--max-example-tokens", type=int, default=512)
    ap.add_argument("--max-test", type=int, default=0,
                    help="decode only the first N test lines (0: all; for testing)")
    ap.add_argument("--decode-batch", type=int, default=64,
                    help="sentences per greedy-decoding batch")
    args = ap.parse_args(argv)
    for name in ("steps", "max_tokens", "d_model", "layers", "heads", "d_ff",
                 "threads", "log_every", "max_example_tokens", "decode_batch"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.d_model % args.heads != 0:
        ap.error("--d-model must be divisible by --heads")
    if not 0.0 <= args.warmup_fraction <= 1.0:
        ap.error("--warmup-fraction must be in [0, 1]")
    return args


def run(args):
    t_start = time.time()
    import torch
    import sentencepiece as spm

    torch.manual_seed(args.seed)
    random.seed(args.seed)
    torch.set_num_threads(args.threads)

    if not os.path.isfile(args.spm):
        raise InputError(f"{args.spm}: sentencepiece model not found")
    try:
        sp = spm.SentencePieceProcessor(model_file=args.spm)
    except Exception as e:  # sentencepiece raises RuntimeError/OSError
        raise InputError(f"{args.spm}: cannot load sentencepiece model ({e})")
    ids = {"pad": sp.pad_id(), "unk": sp.unk_id(), "bos": sp.bos_id(), "eos": sp.eos_id()}
    if ids != {"pad": PAD, "unk": UNK, "bos": BOS, "eos": EOS}:
        raise InputError(f"{args.spm}: expected ids pad 0, unk 1, bos 2, eos 3, got {ids}")
    vocab = sp.get_piece_size()

    train_path = os.path.join(args.corpus, "train.tsv")
    test_path = os.path.join(args.corpus, "test.tsv")
    train_pairs = read_tsv(train_path)
    test_pairs = read_tsv(test_path)
    if args.max_test > 0:
        test_pairs = test_pairs[:args.max_test]

    examples = encode_pairs(sp, train_pairs)
    n_read = len(examples)
    examples = [e for e in examples
                if len(e[0]) <= args.max_example_tokens and len(e[1]) <= args.max_example_tokens]
    if not examples:
        raise InputError(f"{train_path}: no training example within "
                         f"--max-example-tokens {args.max_example_tokens}")
    lengths = [max(len(s), len(ti)) for s, ti, _ in examples]
    print(f"train: {n_read} pairs, {len(examples)} examples kept "
          f"(max {args.max_example_tokens} tokens), vocab {vocab}; "
          f"test: {len(test_pairs)} pairs", flush=True)

    model = build_model(torch, vocab, args)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters", flush=True)
    optim = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.98),
                              eps=1e-8, weight_decay=args.weight_decay)
    warmup = int(round(args.warmup_fraction * args.steps))
    loss_fn = torch.nn.functional.cross_entropy

    losses = []
    step = 0
    epoch = 0
    window_loss = 0.0
    window_tokens = 0
    window_start = time.time()
    model.train()
    t_train = time.time()
    while step < args.steps:
        rng = random.Random(args.seed * 1000003 + epoch)
        batches = make_batches(lengths, args.max_tokens, rng)
        for batch in batches:
            if step >= args.steps:
                break
            step += 1
            src = pad_batch(torch, [examples[i][0] for i in batch])
            tgt_in = pad_batch(torch, [examples[i][1] for i in batch])
            tgt_out = pad_batch(torch, [examples[i][2] for i in batch])
            n_tokens = int(tgt_out.ne(PAD).sum())
            lr = lr_at(step, args, warmup)
            for group in optim.param_groups:
                group["lr"] = lr
            logits = model(src, tgt_in)
            loss_sum = loss_fn(logits.reshape(-1, vocab), tgt_out.reshape(-1),
                               ignore_index=PAD, label_smoothing=args.label_smoothing,
                               reduction="sum")
            loss = loss_sum / n_tokens
            optim.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optim.step()
            window_loss += float(loss_sum.detach())
            window_tokens += n_tokens
            if step % args.log_every == 0 or step == args.steps:
                mean = window_loss / max(1, window_tokens)
                losses.append([step, mean])
                now = time.time()
                print(f"step {step:6d}  loss {mean:.4f}  lr {lr:.3e}  "
                      f"epoch {epoch}  {window_tokens / max(1e-9, now - window_start):.0f} tgt tok/s",
                      flush=True)
                window_loss = 0.0
                window_tokens = 0
                window_start = now
        epoch += 1
    train_seconds = time.time() - t_train
    print(f"trained {step} updates in {train_seconds:.1f} s "
          f"({1000.0 * train_seconds / max(1, step):.1f} ms/update)", flush=True)

    model.eval()
    t_dec = time.time()
    test_src = [s + [EOS] for s in sp.encode([s for s, _ in test_pairs])]
    hyp_ids = greedy_decode(torch, model, test_src, args)
    hyps = [sp.decode(h) for h in hyp_ids]
    decode_seconds = time.time() - t_dec
    print(f"decoded {len(hyps)} test sentences in {decode_seconds:.1f} s", flush=True)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "hyp.txt"), "w", encoding="utf-8", newline="\n") as f:
        for h in hyps:
            f.write(h.replace("\n", " ").replace("\r", " ") + "\n")
    report = {
        "updates": step,
        "train_seconds": train_seconds,
        "decode_seconds": decode_seconds,
        "losses": losses,
        "parameters": n_params,
        "settings": vars(args),
        "torch": torch.__version__,
    }
    with open(os.path.join(args.out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}/hyp.txt and reference.json; "
          f"total wall time {time.time() - t_start:.1f} s", flush=True)


def main(argv=None):
    args = parse_args(argv)
    try:
        run(args)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
