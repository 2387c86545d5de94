"""Times in python3-torch the operations that gorec's benchmarks time, on the same thread count.

Prints `BENCH <name> <value> <unit>` lines. Run with Debian's /usr/bin/python3.
"""
import argparse
import time

import torch


def best_ns(fn, min_time=1.0, reps=5):
    """Best of `reps` runs of ns per call, each run repeating fn for about min_time/reps s."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt > min_time / reps:
            break
        n *= 2
    best = dt / n
    for _ in range(reps - 1):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    a = torch.rand(512, 512)
    b = torch.rand(512, 512)
    print(f"BENCH torch_mm512 {best_ns(lambda: a.mm(b)):.0f} ns/op")
    x = torch.ones(4)
    print(f"BENCH torch_numel_call {best_ns(lambda: x.numel()):.1f} ns/op")


if __name__ == "__main__":
    main()
