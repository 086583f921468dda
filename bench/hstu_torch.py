#!/usr/bin/env python3
"""PyTorch CPU implementation of nestpipe's --model hstu (docs/model.md "HSTU"), trained on
the same records as nestpipe: the histories of a binary file written by `nestpipe generate`,
the held-out split of eval-every, the same negatives (nestpipe's draw, recomputed here), the
same initial distributions, optimizers (dense SGD, row-wise Adagrad on the item table),
batch order and budget, and the same evaluation (each held-out sequence's last item ranked
against every item; HR@10, NDCG@10). Used by bench/hstu.sh.

--write-init PATH writes the initial model (drawn with --torch-seed) as a --dump-params file
(docs/formats.md) and exits; --init-params PATH starts from such a file instead, so both
sides can start from the same values (nestpipe train --init-params PATH).

Prints one JSON line: samples/s (median of the timed steps), the losses, HR@10, NDCG@10.
"""
import argparse
import json
import math
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

M64 = (1 << 64) - 1
STREAM_SEQ_NEG = 0x50000


def mix64(z):
    """runtime/core/util.h np_mix64 on numpy uint64 arrays (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def rng_u64(seed, stream, counter):
    """np_rng_u64(seed, stream, counter), seed and counter arrays."""
    h = mix64(seed + np.uint64((0x9E3779B97F4A7C15 * (stream + 1)) & M64))
    return mix64(h ^ mix64(counter + np.uint64(0x632BE59BD9B4E019)))


def read_bin(path):
    """Records of a NPSAMPLE file of one table: a list of int64 arrays (the histories)."""
    with open(path, "rb") as f:
        head = f.read(40)
        if head[:8] != b"NPSAMPLE":
            raise SystemExit(f"{path}: not a nestpipe binary file")
        _, n_dense, n_tables, _, n_rec, _ = struct.unpack("<IIIIQQ", head[8:40])
        if n_tables != 1:
            raise SystemExit(f"{path}: {n_tables} tables; hstu reads one")
        data = f.read()
    seqs, at = [], 0
    for _ in range(n_rec):
        at += 4 + 4 * n_dense
        (cnt,) = struct.unpack_from("<I", data, at)
        at += 4
        seqs.append(np.frombuffer(data, dtype="<u8", count=cnt, offset=at).astype(np.int64))
        at += 8 * cnt
    return seqs


def negatives(seqs, K, rows, seed):
    """np_batch_add_negatives: K uniform items seeded by (seed, the history's keys)."""
    n = len(seqs)
    lens = np.array([len(s) for s in seqs])
    L = int(lens.max())
    pad = np.zeros((n, L), dtype=np.uint64)
    for i, s in enumerate(seqs):
        pad[i, : len(s)] = s.astype(np.uint64)
    with np.errstate(over="ignore"):
        h = mix64(np.full(n, np.uint64(seed) ^ np.uint64(0x6E656773), dtype=np.uint64))
        for p in range(L):
            live = lens > p
            h[live] = mix64(h[live] ^ pad[live, p])
        out = np.empty((n, K), dtype=np.int64)
        for j in range(K):
            out[:, j] = (rng_u64(h, STREAM_SEQ_NEG, np.uint64(j)) % np.uint64(rows)).astype(np.int64)
    return out


def bucket(delta, nb):
    half = nb // 2
    if half < 1:
        return 0
    if delta < half:
        return delta
    b, v = half, delta // half
    while v > 1:
        v >>= 1
        b += 1
    return min(b, nb - 1)


class HSTU(torch.nn.Module):
    """hstu blocks + the nextitem loss, nestpipe's definitions (codelets/layers/hstu.c, nextitem.c)."""

    def __init__(self, rows, d, L, blocks, heads, nb=32):
        super().__init__()
        self.L, self.d, self.H, self.nb = L, d, heads, nb
        self.emb = torch.nn.Embedding(rows, d, sparse=True)
        a = math.sqrt(1.0 / rows)
        torch.nn.init.uniform_(self.emb.weight, -a, a)
        self.W1 = torch.nn.ParameterList()
        self.W2 = torch.nn.ParameterList()
        self.bias = torch.nn.ParameterList()
        self.rab = torch.nn.ParameterList()
        for _ in range(blocks):
            self.W1.append(torch.nn.Parameter(torch.randn(4 * d, d) * math.sqrt(2.0 / (5 * d))))
            self.W2.append(torch.nn.Parameter(torch.randn(d, d) * math.sqrt(1.0 / d)))
            self.bias.append(torch.nn.Parameter(torch.randn(5 * d) * math.sqrt(1.0 / (5 * d))))
            self.rab.append(torch.nn.Parameter(torch.randn(heads * nb) * math.sqrt(1.0 / (heads * nb))))
        idx = torch.tensor([[bucket(p - q, nb) if q <= p else 0 for q in range(L)] for p in range(L)])
        self.register_buffer("bidx", idx)
        self.register_buffer("causal", torch.tril(torch.ones(L, L)))

    def block(self, X, k):
        B, L, d, H = X.shape[0], self.L, self.d, self.H
        dh = d // H
        b = self.bias[k]
        uvqk = F.silu(X @ self.W1[k].T + b[: 4 * d])
        u, v, q, kk = uvqk.split(d, dim=-1)
        q = q.view(B, L, H, dh).transpose(1, 2)
        kk = kk.view(B, L, H, dh).transpose(1, 2)
        v = v.view(B, L, H, dh).transpose(1, 2)
        rab = self.rab[k].view(H, self.nb)[:, self.bidx]  # (H, L, L)
        A = F.silu(q @ kk.transpose(-1, -2) + rab) / L * self.causal
        O = (A @ v).transpose(1, 2).reshape(B, L, d)
        G = F.layer_norm(O, (d,), eps=1e-5) * u
        return X + G @ self.W2[k].T + b[4 * d:]

    def user_states(self, hist, mask):
        X = self.emb(hist) * mask.unsqueeze(-1)  # right padding: zero rows
        Y = X
        for k in range(len(self.W1)):
            Y = self.block(Y, k)
        return X, Y

    def loss(self, hist, mask, neg):
        X, Y = self.user_states(hist, mask)
        N = self.emb(neg)  # (B, K, d)
        L = self.L
        s_pos = (Y[:, :-1] * X[:, 1:]).sum(-1)  # (B, L-1)
        s_neg = Y[:, :-1] @ N.transpose(1, 2)  # (B, L-1, K)
        valid = mask[:, 1:]
        lse = torch.logsumexp(torch.cat([s_pos.unsqueeze(-1), s_neg], -1), -1)
        per = ((lse - s_pos) * valid).sum(-1) / L
        return per.mean(), per.sum()


def params_of(m):
    """nestpipe's dump names and order for --model hstu: hstu.k.{W1,W2,bias,rab}, emb.0."""
    out = []
    for k in range(len(m.W1)):
        out += [(f"hstu.{k}.W1", m.W1[k]), (f"hstu.{k}.W2", m.W2[k]),
                (f"hstu.{k}.bias", m.bias[k]), (f"hstu.{k}.rab", m.rab[k])]
    return out + [("emb.0", m.emb.weight)]


def write_params(path, m):
    """The model as a NPPARAMS file (docs/formats.md)."""
    with open(path, "wb") as f:
        ps = params_of(m)
        f.write(b"NPPARAMS" + struct.pack("<II", 1, len(ps)))
        for name, t in ps:
            a = t.detach().numpy().astype("<f4")
            f.write(struct.pack("<I", len(name)) + name.encode())
            f.write(struct.pack(f"<I{a.ndim}Q", a.ndim, *a.shape))
            f.write(a.tobytes())


def load_params(path, m):
    """A NPPARAMS file into the model: the same names and shapes, or an error naming them."""
    b = open(path, "rb").read()
    if b[:8] != b"NPPARAMS":
        raise SystemExit(f"{path}: not a --dump-params file")
    _, n = struct.unpack_from("<II", b, 8)
    p, got = 16, {}
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", b, p)
        name = b[p + 4:p + 4 + ln].decode()
        p += 4 + ln
        (nd,) = struct.unpack_from("<I", b, p)
        dims = struct.unpack_from(f"<{nd}Q", b, p + 4)
        p += 4 + 8 * nd
        cnt = int(np.prod(dims))
        got[name] = np.frombuffer(b, dtype="<f4", count=cnt, offset=p).reshape(dims)
        p += 4 * cnt
    with torch.no_grad():
        for name, t in params_of(m):
            if name not in got or tuple(got[name].shape) != tuple(t.shape):
                raise SystemExit(f"{path}: tensor {name} {tuple(t.shape)} missing or of another shape")
            t.copy_(torch.from_numpy(got[name].copy()))
    if len(got) != len(params_of(m)):
        raise SystemExit(f"{path}: {len(got)} tensors, the model has {len(params_of(m))}")


def batch_tensors(seqs, negs, idx, L):
    B = len(idx)
    hist = np.zeros((B, L), dtype=np.int64)
    mask = np.zeros((B, L), dtype=np.float32)
    for r, i in enumerate(idx):
        s = seqs[i]
        hist[r, : len(s)] = s
        mask[r, : len(s)] = 1.0
    return torch.from_numpy(hist), torch.from_numpy(mask), torch.from_numpy(negs[idx])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="binary file from nestpipe generate")
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--seq-negatives", type=int, required=True)
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--adagrad-eps", type=float, default=1e-8)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--eval-samples", type=int, default=1000)
    ap.add_argument("--seed", type=int, required=True, help="nestpipe's --seed (the negatives)")
    ap.add_argument("--torch-seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--write-init", metavar="PATH", help="write the initial model and exit")
    ap.add_argument("--init-params", metavar="PATH", help="start from this dump")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.torch_seed)
    m = HSTU(a.rows, a.dim, a.seq_len, a.blocks, a.heads)
    if a.write_init:
        write_params(a.write_init, m)
        return 0
    if a.init_params:
        load_params(a.init_params, m)
    seqs = read_bin(a.data)
    negs = negatives(seqs, a.seq_negatives, a.rows, a.seed)
    held = [i for i in range(len(seqs)) if a.eval_every and i % a.eval_every == a.eval_every - 1]
    train = [i for i in range(len(seqs)) if not (a.eval_every and i % a.eval_every == a.eval_every - 1)]
    if len(train) < a.batch * a.steps:
        raise SystemExit(f"{len(train)} train records, {a.batch * a.steps} needed")
    dense = [p for n, p in m.named_parameters() if not n.startswith("emb")]
    opt = torch.optim.SGD(dense, lr=a.lr)
    state = torch.zeros(a.rows)
    times, losses = [], []
    for step in range(a.steps):
        idx = train[step * a.batch:(step + 1) * a.batch]
        hist, mask, neg = batch_tensors(seqs, negs, idx, a.seq_len)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        m.emb.weight.grad = None
        loss, _ = m.loss(hist, mask, neg)
        loss.backward()
        opt.step()
        with torch.no_grad():  # row-wise Adagrad on the rows the batch touched
            g = m.emb.weight.grad.coalesce()
            rows, vals = g.indices()[0], g.values()
            state[rows] += (vals * vals).mean(1)
            m.emb.weight[rows] -= a.lr * vals / (state[rows].sqrt() + a.adagrad_eps).unsqueeze(1)
        times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))
    # evaluation: the held-out records' last items against every item
    ev = [i for i in held if len(seqs[i]) >= 2][: a.eval_samples]
    hits = ndcg = 0.0
    with torch.no_grad():
        E = m.emb.weight
        for lo in range(0, len(ev), 256):
            idx = ev[lo:lo + 256]
            hist, mask, neg = batch_tensors(seqs, negs, idx, a.seq_len)
            _, Y = m.user_states(hist, mask)
            lens = mask.sum(1).long()
            u = Y[torch.arange(len(idx)), lens - 2]
            tgt = hist[torch.arange(len(idx)), lens - 1]
            scores = u @ E.T
            ts = scores[torch.arange(len(idx)), tgt]
            rank = (scores > ts.unsqueeze(1)).sum(1) + 1
            hits += float((rank <= 10).sum())
            ndcg += float(torch.where(rank <= 10, 1.0 / torch.log2(rank.double() + 1), 0.0).sum())
    timed = times[a.warmup:] or times
    print(json.dumps({
        "samples_per_s_median": a.batch / statistics.median(timed),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "train_loss_first": losses[0],
        "train_loss_last": losses[-1],
        # nestpipe's train_loss: the mean over the last max(1, steps/10) steps
        "train_loss": statistics.fmean(losses[-max(1, a.steps // 10):]),
        "eval_ranked": len(ev),
        "eval_hr10": hits / max(len(ev), 1),
        "eval_ndcg10": ndcg / max(len(ev), 1),
    }))


if __name__ == "__main__":
    sys.exit(main())
