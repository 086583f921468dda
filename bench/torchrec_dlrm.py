#!/usr/bin/env python3
"""TorchRec DLRM of nestpipe's DLRM shape across ranks, timed as the peer of bench/torchrec.sh.

The model is TorchRec's own torchrec.models.dlrm.DLRM on an EmbeddingBagCollection (sum
pooling), fed KeyedJaggedTensors and sharded by DistributedModelParallel over gloo, every
table TABLE_WISE (whole tables on one rank each: TorchRec has no row-wise sharding on CPUs),
its embeddings updated by FBGEMM's fused EXACT_SGD inside the backward, the dense part by
plain SGD at the same learning rate (its gradients all-reduced by DMP's DDP wrapper). Not a
trainer: synthetic batches of nestpipe's synthetic distribution, made before timing.

Launch: `torchrec_dlrm.py --ranks R ...` spawns R processes itself (torch.multiprocessing,
gloo rendezvous on 127.0.0.1, GLOO_SOCKET_IFNAME=lo unless set); under `torchrun
--nproc-per-node R torchrec_dlrm.py ...` (RANK and WORLD_SIZE set) each process is one rank
and --ranks must be left out or agree.

Prints one JSON line from rank 0: samples_per_s_median, step_ms_median, ranks, threads,
the versions, and the bytes of the embedding exchange per step (see wire_bytes() below).
"""
import argparse
import json
import logging
import math
import os
import statistics
import sys
import time
import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# zipf_keys: nestpipe's inverse-CDF Zipf draw (hot keys are the small ids), shared with the
# plain PyTorch baseline beside this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no bench/__pycache__ in the work tree
from dlrm_torch import zipf_keys  # noqa: E402

# TorchRec 1.9.2 and torch 2.14 warn on every rank about things that do not apply to one
# CPU host (topology hints, planner storage heuristics, a deprecated DDP argument that DMP
# passes itself); errors still come through.
warnings.filterwarnings("ignore", category=FutureWarning)
for _name in ("torchrec", "torch.fx._symbolic_trace"):
    logging.getLogger(_name).setLevel(logging.ERROR)


def sizes(text):
    return [int(v) for v in text.split("-")]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=None,
                   help="processes to spawn (default 1; under torchrun: WORLD_SIZE)")
    p.add_argument("--tables", type=int, default=26)
    p.add_argument("--rows", type=int, default=200000, help="rows of every table")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--bottom", type=sizes, default=sizes("13-512-256-64"),
                   help="bottom MLP sizes, dense features first, last = dim")
    p.add_argument("--top", type=sizes, default=sizes("1024-512-256-1"),
                   help="top MLP output sizes, last = 1")
    p.add_argument("--batch", type=int, default=4096,
                   help="GLOBAL batch; each rank trains batch/ranks samples a step")
    p.add_argument("--keys-per-bag", type=int, default=4,
                   help="mean keys a bag: 0 or 1 exactly that many, k >= 2 uniform in "
                        "[k - k/2, k + k/2] as nestpipe's --hot (default 4)")
    p.add_argument("--zipf", type=float, default=1.05, help="key popularity exponent")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed steps first (default 3); one runs even with 0, as it checks "
                        "the byte count")
    p.add_argument("--threads", type=int, default=1,
                   help="torch.set_num_threads in every rank (default 1)")
    p.add_argument("--lr", type=float, default=0.1, help="dense and sparse (default 0.1)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--batches", type=int, default=8,
                   help="distinct batches made per rank beforehand, cycled (default 8)")
    p.add_argument("--port", type=int, default=29517,
                   help="rendezvous port on 127.0.0.1 when spawning (default 29517)")
    a = p.parse_args(argv)
    if min(a.tables, a.rows, a.dim, a.batch, a.steps, a.threads, a.batches) < 1:
        p.error("--tables, --rows, --dim, --batch, --steps, --threads, --batches must be >= 1")
    if a.warmup < 0 or a.keys_per_bag < 0 or a.zipf < 0:
        p.error("--warmup, --keys-per-bag and --zipf must be >= 0")
    if a.bottom[-1] != a.dim:
        p.error(f"--bottom must end in --dim {a.dim}, got {a.bottom}")
    if len(a.top) < 2 or a.top[-1] != 1:
        p.error("--top needs at least two sizes (TorchRec's OverArch) and must end in 1")
    return p, a


# ---------------------------------------------------------------------------------------
# Data: nestpipe's synthetic distribution (docs/data.md "Synthetic data"), drawn with numpy.
# Not nestpipe's bytes (its counter-based RNG is not reproduced), the same distribution:
# N(0,1) dense features, bag sizes exactly k for k <= 1 and uniform in [k - k//2, k + k//2]
# otherwise, keys Zipf(alpha) over the table's rows by inverse CDF with key = rank. Labels
# are fair coin flips (the teacher only matters for AUC, which is not measured here).

def bag_sizes(rng, k, n):
    """n bag sizes of mean k, as nestpipe's synthetic source draws them."""
    if k <= 1:
        return np.full(n, k, dtype=np.int64)
    return rng.integers(k - k // 2, k + k // 2 + 1, size=n, dtype=np.int64)


def make_batches(args, rank, local_batch, count):
    """count batches of local_batch samples for this rank: (dense, KJT, labels, nnz per
    table). Each rank draws from its own stream (seed, rank), as its slice of the global
    batch. KJT layout: feature-major, lengths int32 and values int64."""
    from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

    rng = np.random.default_rng([args.seed, rank])
    names = [f"f{t}" for t in range(args.tables)]
    out = []
    for _ in range(count):
        dense = torch.from_numpy(
            rng.standard_normal((local_batch, args.bottom[0]), dtype=np.float32))
        lengths = bag_sizes(rng, args.keys_per_bag, args.tables * local_batch)
        nnz = int(lengths.sum())
        # every table has the same rows and alpha: one draw for all bags, in table order
        values = zipf_keys(rng, args.rows, args.zipf, nnz).astype(np.int64)
        kjt = KeyedJaggedTensor.from_lengths_sync(
            keys=names,
            values=torch.from_numpy(values),
            lengths=torch.from_numpy(lengths.astype(np.int32)))
        per_table = lengths.reshape(args.tables, local_batch).sum(axis=1)
        label = torch.from_numpy((rng.random(local_batch) < 0.5).astype(np.float32))
        out.append((dense, kjt, label, per_table))
    return out


# ---------------------------------------------------------------------------------------
# Bytes on the wire per step, from the sharding plan and the batches (fp32 pooled vectors,
# the KJT's own dtypes), for TABLE_WISE sharding where table t lives whole on owner(t):
#   input dist, rank r -> owner(t) != r: its keys of table t (values) and the bag lengths
#     of its local batch (one length per sample);
#   forward, owner(t) -> r for owner(t) != r: r's pooled vectors of table t, b_r x dim;
#   backward, r -> owner(t) != r: the gradients of those pooled vectors, b_r x dim.
# A rank's part that stays with itself is not counted. Also counted: the splits that
# KJTAllToAll exchanges first (a few integers a peer, "meta"). Not counted: the dense
# all-reduce of DDP (reported apart as dense_param_bytes), gloo's and TCP's own headers.

def wire_bytes(owner, rank, ranks, local_batch, dim, nnz_per_table, value_size, length_size,
               meta_per_peer):
    """Bytes a step for this rank: a dict of what it sends and what it receives, split by
    kind. nnz_per_table: this rank's keys per table in the step."""
    off = [t for t, o in enumerate(owner) if o != rank]   # tables other ranks hold
    own = [t for t, o in enumerate(owner) if o == rank]   # tables this rank holds
    peers = ranks - 1
    pooled = local_batch * dim * 4                        # one table's pooled slice, fp32
    sent = {
        "keys": sum(int(nnz_per_table[t]) for t in off) * value_size,
        "lengths": len(off) * local_batch * length_size,
        "meta": peers * meta_per_peer,
        # every other rank's slice of every table held here (equal batches on all ranks)
        "pooled_fwd": len(own) * peers * pooled,
        "pooled_grad_bwd": len(off) * pooled,
    }
    received = {
        "pooled_fwd": len(off) * pooled,
        "pooled_grad_bwd": len(own) * peers * pooled,
    }
    # the brief's one-rank figure: a rank's own batch through the exchange, off-rank only
    # (its keys and lengths out, its pooled vectors in, their gradients out)
    mine = {"keys": sent["keys"], "lengths": sent["lengths"], "meta": sent["meta"],
            "pooled_fwd": received["pooled_fwd"], "pooled_grad_bwd": sent["pooled_grad_bwd"]}
    mine["total"] = sum(mine.values())
    sent["total"] = sum(sent.values())
    return {"own_batch": mine, "sent": sent, "received_pooled": received}


class CollectiveCounter:
    """Counts the bytes this rank's all_to_all_single calls send to other ranks, for one
    step: a check on wire_bytes() (TorchRec's input, pooled and gradient exchanges all go
    through torch.distributed.all_to_all_single on gloo). Installed only around an untimed
    step."""

    def __init__(self, rank, ranks):
        self.rank, self.ranks, self.sent, self.calls = rank, ranks, 0, 0
        self._orig = None

    def __enter__(self):
        self._orig = dist.all_to_all_single
        counter = self

        def counting(output, input, output_split_sizes=None, input_split_sizes=None,
                     *args, **kwargs):
            n = input.shape[0] if input.dim() > 0 else 0
            row = input.numel() // n * input.element_size() if n else 0
            splits = (list(input_split_sizes) if input_split_sizes
                      else [n // counter.ranks] * counter.ranks)
            counter.sent += sum(s for p, s in enumerate(splits) if p != counter.rank) * row
            counter.calls += 1
            return counter._orig(output, input, output_split_sizes, input_split_sizes,
                                 *args, **kwargs)

        dist.all_to_all_single = counting
        return self

    def __exit__(self, *exc):
        dist.all_to_all_single = self._orig
        return False


# ---------------------------------------------------------------------------------------

def cpu_topology(ranks):
    """The planner's topology: ranks CPU processes on one host. TorchRec 1.9 wants it made
    by TopologyFactory (it warns otherwise); older releases only have Topology()."""
    from torchrec.distributed.planner import types

    if hasattr(types, "TopologyFactory"):
        return types.TopologyFactory.create_topology(
            trainer_config=types.TrainerConfig(world_size=ranks, local_world_size=ranks),
            kernel_config=types.KernelConfig(compute_device="cpu"))
    return types.Topology(world_size=ranks, local_world_size=ranks, compute_device="cpu")


def build_model(args, ranks, rank, pg):
    """TorchRec's DLRM, sharded: returns (DMP model, dense optimizer, owner rank of each
    table, dense parameter count)."""
    import torchrec
    from fbgemm_gpu.split_embedding_configs import EmbOptimType
    from torchrec.distributed.embedding_types import EmbeddingComputeKernel
    from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
    from torchrec.distributed.model_parallel import DistributedModelParallel
    from torchrec.distributed.planner import EmbeddingShardingPlanner, ParameterConstraints
    from torchrec.distributed.types import ShardingType
    from torchrec.models.dlrm import DLRM

    tables = [torchrec.EmbeddingBagConfig(
        name=f"t{t}", embedding_dim=args.dim, num_embeddings=args.rows,
        feature_names=[f"f{t}"], pooling=torchrec.PoolingType.SUM)
        for t in range(args.tables)]
    # built on the meta device: DMP allocates each table on its owner only
    ebc = torchrec.EmbeddingBagCollection(tables=tables, device=torch.device("meta"))
    model = DLRM(embedding_bag_collection=ebc, dense_in_features=args.bottom[0],
                 dense_arch_layer_sizes=args.bottom[1:], over_arch_layer_sizes=args.top,
                 dense_device=torch.device("cpu"))
    # The embeddings' optimizer runs fused in FBGEMM's backward: EXACT_SGD is row -= lr *
    # (sum of the row's gradients in the batch), nestpipe's sparse sgd.
    sharder = EmbeddingBagCollectionSharder(
        fused_params={"optimizer": EmbOptimType.EXACT_SGD, "learning_rate": args.lr})
    constraints = {
        f"t{t}": ParameterConstraints(
            sharding_types=[ShardingType.TABLE_WISE.value],
            compute_kernels=[EmbeddingComputeKernel.FUSED.value])
        for t in range(args.tables)}
    planner = EmbeddingShardingPlanner(topology=cpu_topology(ranks),
                                       batch_size=args.batch // ranks, constraints=constraints)
    plan = planner.collective_plan(model, [sharder], pg)
    dmp = DistributedModelParallel(module=model, device=torch.device("cpu"), plan=plan,
                                   sharders=[sharder])

    # The plan, checked: every table TABLE_WISE on one rank, the fused kernel.
    owner = [None] * args.tables
    for module_plan in plan.plan.values():
        for name, ps in module_plan.items():
            t = int(name[1:])
            if ps.sharding_type != ShardingType.TABLE_WISE.value or len(ps.ranks) != 1:
                raise SystemExit(f"torchrec_dlrm: table {name} planned {ps.sharding_type} "
                                 f"on ranks {ps.ranks}, not TABLE_WISE on one rank")
            if ps.compute_kernel != EmbeddingComputeKernel.FUSED.value:
                raise SystemExit(f"torchrec_dlrm: table {name} got kernel {ps.compute_kernel}")
            owner[t] = ps.ranks[0]
    if None in owner:
        raise SystemExit(f"torchrec_dlrm: the plan leaves tables out: {owner}")

    # Dense optimizer: plain SGD over every parameter but the tables' weights, which DMP's
    # fused optimizer owns and FBGEMM updates inside the backward (they never hold a .grad:
    # checked after the first steps).
    fused = set(dmp.fused_optimizer.params.keys())
    dense = [p for n, p in dmp.named_parameters() if p.requires_grad and n not in fused]
    opt = torch.optim.SGD(dense, lr=args.lr)
    return dmp, opt, owner, sum(p.numel() for p in dense)


def worker(rank, ranks, args, spawned):
    torch.set_num_threads(args.threads)
    if spawned:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(args.port))
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    pg = dist.group.WORLD
    import fbgemm_gpu
    import torchrec

    torch.manual_seed(args.seed + rank)
    local_batch = args.batch // ranks
    dmp, opt, owner, dense_params = build_model(args, ranks, rank, pg)
    batches = make_batches(args, rank, local_batch, min(args.batches, args.warmup + args.steps))
    # mean over the local batch; DDP averages the dense gradients over the ranks, so they
    # are the global batch's mean, as in nestpipe
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def step(k):
        dense, kjt, label, _ = batches[k % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(dmp(dense, kjt).squeeze(1), label)
        loss.backward()  # the tables' fused SGD runs here, DDP's all-reduce too
        opt.step()
        return loss

    # Warm-up; the first step also counts the bytes its all_to_all_single calls send.
    losses = []
    with CollectiveCounter(rank, ranks) as counted:
        losses.append(step(0).item())
    for k in range(1, args.warmup):
        losses.append(step(k).item())
    # the embeddings' weights never carry a gradient: their update is the fused one
    stray = [n for n, p in dmp.named_parameters() if "embedding_bag" in n and p.grad is not None]
    if stray:
        raise SystemExit(f"torchrec_dlrm: table weights with .grad (not fused): {stray[:3]}")

    dist.barrier()  # every rank starts the timed steps together
    times = []
    for k in range(args.warmup, args.warmup + args.steps):
        t0 = time.perf_counter()
        loss = step(k)
        times.append(time.perf_counter() - t0)
    losses.append(loss.item())
    # a step ends for the job when its slowest rank ends it: the maximum over ranks
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    finite = torch.tensor([1.0 if all(math.isfinite(v) for v in losses) else 0.0])
    dist.all_reduce(finite, op=dist.ReduceOp.MIN)

    # bytes per step, averaged over the timed steps' batches
    kjt0 = batches[0][1]
    value_size = kjt0.values().element_size()
    length_size = kjt0.lengths().element_size()
    # KJTAllToAll's first all-to-all: one integer per peer for each of its splits lists
    # (batch size, lengths and values), int64
    meta_per_peer = 3 * 8
    per = [wire_bytes(owner, rank, ranks, local_batch, args.dim,
                      batches[k % len(batches)][3], value_size, length_size, meta_per_peer)
           for k in range(args.warmup, args.warmup + args.steps)]
    mine = {key: statistics.fmean(p["own_batch"][key] for p in per) for key in per[0]["own_batch"]}
    sent = {key: statistics.fmean(p["sent"][key] for p in per) for key in per[0]["sent"]}
    # the first step's counted bytes against its computed ones (a check on the model above)
    first = wire_bytes(owner, rank, ranks, local_batch, args.dim, batches[0][3], value_size,
                       length_size, meta_per_peer)["sent"]["total"]
    gathered = [None] * ranks
    dist.all_gather_object(gathered, {"sent": sent, "counted_first": counted.sent,
                                      "computed_first": first, "calls": counted.calls,
                                      "tables": sum(1 for o in owner if o == rank)})

    if rank == 0:
        if finite.item() != 1.0:
            print(f"torchrec_dlrm: non-finite loss {losses}", file=sys.stderr)
            return 2
        step_s = statistics.median(t.tolist())
        sent_all = {key: sum(g["sent"][key] for g in gathered) for key in sent}
        out = {
            "system": "torchrec",
            "samples_per_s_median": args.batch / step_s,
            "step_ms_median": 1e3 * step_s,
            "step_ms_min": 1e3 * min(t.tolist()),
            "step_ms_max": 1e3 * max(t.tolist()),
            "samples_per_s_mean": args.batch * args.steps / float(t.sum()),
            "ranks": ranks,
            "threads": torch.get_num_threads(),
            "global_batch": args.batch,
            "local_batch": local_batch,
            "steps": args.steps,
            "warmup": args.warmup,
            "keys_per_bag": args.keys_per_bag,
            "last_loss": losses[-1],
            "torch": torch.__version__,
            "torchrec": getattr(torchrec, "__version__", "unknown"),
            "fbgemm_gpu": getattr(fbgemm_gpu, "__version__", "unknown"),
            "sharding": "table_wise",
            "tables_per_rank": [g["tables"] for g in gathered],
            "sparse_optimizer": "fused EXACT_SGD",
            # the brief's figure: rank 0's own batch through the exchange, off-rank only
            "wire_bytes_per_step_rank0": mine,
            # what every rank sends to others, summed over ranks (nestpipe's
            # bytes_exchanged is summed over ranks the same way)
            "wire_bytes_per_step_sent_all_ranks": sent_all,
            # the check: all_to_all_single bytes to other ranks counted in the first step
            # against wire_bytes() for the same batch, per rank
            "wire_check_first_step": [{"counted": g["counted_first"],
                                       "computed": g["computed_first"], "calls": g["calls"]}
                                      for g in gathered],
            "dense_param_bytes": 4 * dense_params,
        }
        print(json.dumps(out), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def spawned_worker(rank, ranks, args):
    # Die with the launching process: a `timeout` that ends it must not leave ranks behind,
    # waiting in a collective (Linux prctl PR_SET_PDEATHSIG = 1).
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != args.parent_pid:  # the launcher died before prctl took effect
        sys.exit(1)
    rc = worker(rank, ranks, args, spawned=True)
    if rc:
        sys.exit(rc)


def main():
    p, args = parse_args()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # under torchrun
        ranks, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
        if args.ranks not in (None, ranks):
            p.error(f"--ranks {args.ranks} but torchrun started {ranks}")
        if args.batch % ranks:
            p.error(f"--batch {args.batch} must be a multiple of the ranks ({ranks})")
        return worker(rank, ranks, args, spawned=False)
    ranks = args.ranks or 1
    if ranks < 1 or args.batch % ranks:
        p.error(f"--ranks must be >= 1 and divide --batch {args.batch}")
    # one host: gloo over loopback (in torchrec.sh, the shaped loopback of its namespace)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    args.parent_pid = os.getpid()  # each rank checks it outlived the launch (spawned_worker)
    try:
        mp.spawn(spawned_worker, args=(ranks, args), nprocs=ranks, join=True)
    except mp.ProcessRaisedException as e:
        print(f"torchrec_dlrm: a rank failed: {str(e).strip().splitlines()[-1]}",
              file=sys.stderr)
        return 1
    except mp.ProcessExitedException as e:
        print(f"torchrec_dlrm: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
