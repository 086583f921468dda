#!/usr/bin/env python3
"""PyTorch CPU DLRM or DCN-v2 of exactly nestpipe's model, timed as the baseline of bench/run.sh
(--model dlrm, docs/model.md) and bench/dcnv2.sh (--model dcnv2). Not a trainer: synthetic
data of the same shape, generated before timing.

Prints one JSON line: {"samples_per_s_median": ..., "threads": ..., ...}; with --model dcnv2
also "model", the cross and deep flags, the per-step losses and the parameter counts.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn


def sizes(text):
    return [int(v) for v in text.split("-")]


class DLRM(nn.Module):
    """Bottom MLP (ReLU after every layer), T sum-pooled tables, dot interaction
    [h, strict lower triangle of the (T+1)x(T+1) dots, row by row], top MLP (ReLU except
    the last layer). Same layout and order as nestpipe's reference trainer."""

    def __init__(self, tables, rows, dim, bottom, top):
        super().__init__()
        if bottom[-1] != dim:
            raise SystemExit(f"bottom MLP must end in dim {dim}, got {bottom}")
        layers = []
        for a, b in zip(bottom[:-1], bottom[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.bottom = nn.Sequential(*layers)
        # sparse=True: the gradient holds only the touched rows, as in nestpipe, so the
        # SGD step costs O(batch) and not O(table).
        self.emb = nn.ModuleList(
            nn.EmbeddingBag(rows, dim, mode="sum", sparse=True) for _ in range(tables))
        t1 = tables + 1
        li, lj = torch.tril_indices(t1, t1, offset=-1)  # row-major: (1,0), (2,0), (2,1), ...
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)
        width = [dim + t1 * (t1 - 1) // 2] + top
        layers = []
        for k, (a, b) in enumerate(zip(width[:-1], width[1:])):
            layers.append(nn.Linear(a, b))
            if k < len(top) - 1:
                layers.append(nn.ReLU())
        self.top = nn.Sequential(*layers)

    def forward(self, dense, keys):
        h = self.bottom(dense)                                      # (B, dim)
        # keys: (T, B, 1), one key per bag; a 2-D input makes every row one bag.
        e = [table(keys[t]) for t, table in enumerate(self.emb)]   # T x (B, dim)
        z = torch.stack([h] + e, dim=1)                             # (B, T+1, dim)
        dots = torch.bmm(z, z.transpose(1, 2))                      # (B, T+1, T+1)
        x = torch.cat([h, dots[:, self.li, self.lj]], dim=1)        # (B, dim + T1(T1-1)/2)
        return self.top(x).squeeze(1)                               # (B,) logits


class DCNv2(nn.Module):
    """DCN-v2 of nestpipe's --model dcnv2. Bottom MLP (ReLU after every layer, last = dim);
    x0 = [h, sum-pooled table 0, ..., table T-1], width D = (T+1)*dim, in that order;
    L cross layers x_{l+1} = x0 * (W_l x_l + b_l) + x_l, W_l full D x D (rank 0) or U_l V_l
    with U_l D x r, V_l r x D (computed as U_l (V_l x_l) + b_l); a deep MLP on x0 beside the
    cross stack (ReLU after every layer); top MLP on [x_L, deep output] (ReLU except the
    last layer, which has width 1 and gives the logit)."""

    def __init__(self, tables, rows, dim, bottom, top, cross_layers, cross_rank, deep):
        super().__init__()
        if bottom[-1] != dim:
            raise SystemExit(f"bottom MLP must end in dim {dim}, got {bottom}")
        layers = []
        for a, b in zip(bottom[:-1], bottom[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.bottom = nn.Sequential(*layers)
        self.emb = nn.ModuleList(  # sparse gradients, as in the DLRM model above
            nn.EmbeddingBag(rows, dim, mode="sum", sparse=True) for _ in range(tables))
        d = (tables + 1) * dim
        if cross_rank == 0:
            self.cross = nn.ModuleList(nn.Linear(d, d) for _ in range(cross_layers))
        else:  # V (no bias) then U with the bias b: U (V x) + b
            self.cross = nn.ModuleList(
                nn.Sequential(nn.Linear(d, cross_rank, bias=False), nn.Linear(cross_rank, d))
                for _ in range(cross_layers))
        layers = []
        for a, b in zip([d] + deep[:-1], deep):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.deep = nn.Sequential(*layers)
        width = [d + deep[-1]] + top
        layers = []
        for k, (a, b) in enumerate(zip(width[:-1], width[1:])):
            layers.append(nn.Linear(a, b))
            if k < len(top) - 1:
                layers.append(nn.ReLU())
        self.top = nn.Sequential(*layers)

    def forward(self, dense, keys):
        h = self.bottom(dense)                                      # (B, dim)
        e = [table(keys[t]) for t, table in enumerate(self.emb)]   # T x (B, dim)
        x0 = torch.cat([h] + e, dim=1)                              # (B, D)
        x = x0
        for layer in self.cross:
            x = x0 * layer(x) + x                                   # (B, D)
        z = torch.cat([x, self.deep(x0)], dim=1)                    # (B, D + deep[-1])
        return self.top(z).squeeze(1)                               # (B,) logits

    def param_counts(self):
        """Parameters per part, counted from the tensors."""
        parts = {"bottom": self.bottom, "embedding": self.emb, "cross": self.cross,
                 "deep": self.deep, "top": self.top}
        out = {k: sum(t.numel() for t in m.parameters()) for k, m in parts.items()}
        out["total"] = sum(out.values())
        return out


def dcnv2_param_counts(tables, rows, dim, bottom, top, cross_layers, cross_rank, deep):
    """The same counts from the shape alone (checked against the tensors' at start-up)."""
    def mlp(w):
        return sum(a * b + b for a, b in zip(w[:-1], w[1:]))
    d = (tables + 1) * dim
    out = {
        "bottom": mlp(bottom),
        "embedding": tables * rows * dim,
        "cross": cross_layers * ((d * d if cross_rank == 0 else 2 * d * cross_rank) + d),
        "deep": mlp([d] + deep),
        "top": mlp([d + deep[-1]] + top),
    }
    out["total"] = sum(out.values())
    return out


def zipf_keys(rng, rows, alpha, n):
    """n keys in [0, rows) with P(r) ~ 1/(r+1)^alpha by inverse CDF; as in nestpipe's
    synthetic source the key is the rank, so hot keys are the small ids."""
    if alpha == 0:
        return rng.integers(0, rows, size=n)
    cdf = np.cumsum(np.arange(1, rows + 1, dtype=np.float64) ** -alpha)
    u = rng.random(n) * cdf[-1]
    return np.minimum(np.searchsorted(cdf, u, side="right"), rows - 1)


def make_batches(args, count):
    rng = np.random.default_rng(args.seed)
    out = []
    for _ in range(count):
        dense = torch.from_numpy(
            rng.standard_normal((args.batch, args.bottom[0]), dtype=np.float32))
        keys = torch.from_numpy(
            zipf_keys(rng, args.rows, args.zipf, args.tables * args.batch)
            .reshape(args.tables, args.batch, 1).astype(np.int64))
        label = torch.from_numpy((rng.random(args.batch) < 0.5).astype(np.float32))
        out.append((dense, keys, label))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=("dlrm", "dcnv2"), default="dlrm",
                   help="dlrm (default) or dcnv2")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--steps", type=int, default=50, help="timed steps per repeat (default 50)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats (default 3)")
    p.add_argument("--cpu-time", action="store_true",
                   help="time with the process's CPU time, not wall time (with 1 thread: its "
                        "work alone, whatever else the machine runs; bench/isa_knobs.sh)")
    p.add_argument("--tables", type=int, default=26)
    p.add_argument("--rows", type=int, default=100000)
    p.add_argument("--zipf", type=float, default=1.05)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--bottom", type=sizes, default=sizes("13-512-256-64-16"))
    p.add_argument("--top", type=sizes, default=sizes("512-256-1"))
    p.add_argument("--cross-layers", type=int, default=3, help="dcnv2: cross layers (default 3)")
    p.add_argument("--cross-rank", type=int, default=0,
                   help="dcnv2: rank r of W = U V; 0 = full D x D (default 0)")
    p.add_argument("--deep", type=sizes, default=sizes("512-256"),
                   help="dcnv2: deep MLP output sizes on x0 (default 512-256)")
    p.add_argument("--batch", type=int, default=2048)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    if min(args.threads, args.steps, args.repeats, args.batch) < 1 or args.warmup < 0:
        p.error("--threads, --steps, --repeats and --batch must be >= 1, --warmup >= 0")
    if args.top[-1] != 1:
        p.error("--top must end in 1")
    if args.model == "dcnv2" and (args.cross_layers < 0 or args.cross_rank < 0
                                  or min(args.deep) < 1):
        p.error("--cross-layers and --cross-rank must be >= 0, --deep sizes >= 1")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if args.model == "dlrm":
        model = DLRM(args.tables, args.rows, args.dim, args.bottom, args.top)
    else:
        shape = (args.tables, args.rows, args.dim, args.bottom, args.top, args.cross_layers,
                 args.cross_rank, args.deep)
        model = DCNv2(*shape)
        params = model.param_counts()
        if params != dcnv2_param_counts(*shape):
            print(f"dlrm_torch: parameter counts {params} differ from the shape's "
                  f"{dcnv2_param_counts(*shape)}", file=sys.stderr)
            return 2
    # One plain SGD over dense and sparse parameters: torch.optim.SGD accepts sparse
    # gradients when momentum and weight decay are 0.
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    loss_fn = nn.BCEWithLogitsLoss()  # mean over the batch, as nestpipe
    batches = make_batches(args, min(16, args.warmup + args.steps))

    losses = []

    def step(k):
        dense, keys, label = batches[k % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(dense, keys), label)
        loss.backward()
        opt.step()
        return loss

    for k in range(args.warmup):
        losses.append(step(k).item())
    clock = time.process_time if args.cpu_time else time.perf_counter
    rates = []
    for _ in range(args.repeats):
        t0 = clock()
        for k in range(args.steps):
            loss = step(k)
        losses.append(loss.item())  # reading the loss once per repeat keeps the loop lean
        rates.append(args.steps * args.batch / (clock() - t0))

    # A benchmark validates before it reports: a diverged run's speed means nothing.
    if not all(np.isfinite(losses)):
        print(f"dlrm_torch: non-finite loss {losses}", file=sys.stderr)
        return 2
    out = {
        "samples_per_s_median": statistics.median(rates),
        "samples_per_s_min": min(rates),
        "samples_per_s_max": max(rates),
        "samples_per_s_all": rates,
        "threads": torch.get_num_threads(),
        "steps": args.steps,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "last_loss": losses[-1],
        "torch": torch.__version__,
    }
    if args.model == "dcnv2":  # the DLRM line stays as it was
        out.update({
            "model": "dcnv2",
            "cross_layers": args.cross_layers,
            "cross_rank": args.cross_rank,
            "deep": args.deep,
            "losses": losses,  # every warm-up step, then the last step of each repeat
            "params": params,
        })
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
