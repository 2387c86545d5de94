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


def embedding_step(fields, dim, batch, n_ids, dense):
    """One training step over 16 fixed batches: `fields` nn.Embedding(n_ids, dim, sparse=True)
    tables (SparseAdam), their rows concatenated into the module `dense` (Adam), BCE with
    logits; the step of gorec's benchmarks of the same shape."""
    embs = [torch.nn.Embedding(n_ids, dim, sparse=True) for _ in range(fields)]
    for e in embs:
        torch.nn.init.normal_(e.weight, std=0.01)
    sparse = torch.optim.SparseAdam([e.weight for e in embs], lr=1e-3)
    adam = torch.optim.Adam(dense.parameters(), lr=1e-3)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(1)
    data = [([torch.randint(n_ids, (batch,), generator=gen) for _ in range(fields)],
             torch.randint(2, (batch, 1), generator=gen).float()) for _ in range(16)]
    k = [0]

    def step():
        ids, label = data[k[0] % len(data)]
        k[0] += 1
        sparse.zero_grad()
        adam.zero_grad()
        out = dense(torch.cat([e(i) for e, i in zip(embs, ids)], 1))
        loss_fn(out, label).backward()
        sparse.step()
        adam.step()

    return step


def ctr_step_bench(min_time):
    """nn/bench_test.go's BenchmarkCTRStep in PyTorch: 8 nn.Embedding(100000, 16, sparse=True)
    tables (SparseAdam), concat -> Linear(128, 64) -> ReLU -> Linear(64, 1) (Adam), BCE with
    logits, batch 1,024; returns samples/s."""
    fields, dim, batch = 8, 16, 1024
    mlp = torch.nn.Sequential(torch.nn.Linear(fields * dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    step = embedding_step(fields, dim, batch, 100_000, mlp)
    return batch / (best_ns(step, min_time=min_time) * 1e-9)


def tiny_step_us(min_time):
    """nn/bench_tiny_test.go's BenchmarkTinyStep in PyTorch: 2 nn.Embedding(1000, 8, sparse=True)
    tables (SparseAdam), concat -> Linear(16, 1) (Adam), BCE with logits, batch 32; returns µs
    per step."""
    fields, dim = 2, 8
    step = embedding_step(fields, dim, 32, 1_000, torch.nn.Linear(fields * dim, 1))
    return best_ns(step, min_time=min_time) / 1e3


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
    print(f"BENCH torch_CTRStep {ctr_step_bench(3.0):.0f} samples/s")
    print(f"BENCH torch_TinyStep {tiny_step_us(3.0):.1f} µs/step")
    print(f"BENCH torch_numel_call {best_ns(lambda: x.numel()):.1f} ns/op")


if __name__ == "__main__":
    main()
