#!/usr/bin/env python3
"""sgemm GFLOP/s of the BLAS inside a PyTorch build (float32 torch.mm), measured as
bench/sgemm_peak.c measures a C library: one untimed call, 16 entries checked against a
double dot product, then the median of the timed runs. A bench/run.sh helper: PyPI's torch
carries its own MKL, which no C program here can link.

Prints one line: the GFLOP/s, then the BLAS ("97.3 MKL 2024.2 in PyTorch 2.15.0+cu132").
--shape MxKxN measures an M x K by K x N product instead of the square N x N one (the ISA
knob checks of bench/README.md use 2048x512x256); --cpu-time times with process CPU time
(time.process_time) instead of wall time, which other load on the machine then disturbs less.
"""
import argparse
import re
import statistics
import sys
import time

import torch


def blas_name():
    text = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([0-9.]+)", text)
    if mkl:
        return f"MKL {mkl.group(1)}"
    info = re.search(r"BLAS_INFO=([^,\s]+)", text)
    return info.group(1) if info else "unknown BLAS"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("n", nargs="?", type=int, default=2048, help="square size (default 2048)")
    p.add_argument("repeats", nargs="?", type=int, default=7, help="timed runs (default 7)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--shape", help="MxKxN instead of the square N x N x N")
    p.add_argument("--cpu-time", action="store_true", help="time with process CPU time")
    args = p.parse_args()
    if args.shape:
        try:
            m, k, n = (int(v) for v in args.shape.split("x"))
        except ValueError:
            p.error(f"--shape must be MxKxN, got '{args.shape}'")
    else:
        m = k = n = args.n
    if min(m, k, n) < 16 or max(m, k, n) > 16384 or not 1 <= args.repeats <= 1000 \
            or args.threads < 1:
        p.error("sizes must be 16..16384, repeats 1..1000, threads >= 1")
    torch.set_num_threads(args.threads)
    clock = time.process_time if args.cpu_time else time.perf_counter

    # Values in [-1, 1), as sgemm_peak.c (a different generator; the values do not matter).
    g = torch.Generator().manual_seed(12345)
    a = torch.rand(m, k, generator=g) * 2 - 1
    b = torch.rand(k, n, generator=g) * 2 - 1
    c = torch.mm(a, b)  # untimed: thread pool start-up and first-touch page faults
    ad, bd = a.double(), b.double()
    for q in range(16):
        i, j = (q * 7919) % m, (q * 104729) % n
        ref = float(ad[i] @ bd[:, j])
        if not abs(float(c[i, j]) - ref) <= 1e-4 * k:
            print(f"torch_sgemm: wrong result at ({i}, {j}): {float(c[i, j])} vs {ref}",
                  file=sys.stderr)
            return 1

    flops = 2.0 * m * k * n
    calls = max(1, round(2e9 / flops))  # about 2 GFLOP per timed run: small shapes loop
    rates = []
    for _ in range(args.repeats):
        t0 = clock()
        for _ in range(calls):
            torch.mm(a, b, out=c)
        rates.append(calls * flops / (clock() - t0) / 1e9)
    print(f"{statistics.median(rates):.1f} {blas_name()} in PyTorch {torch.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
