"""make python-bench (and so make bench): one training step of an embedding table from Python,
through torch.ops.gorec next to torch's own, in one process, alternating.

The step: a lookup of a batch of 4,096 ids (uniform over the table's 1M ids, so with a few
duplicates), a backward pass of (rows * w).sum(), and one SparseAdam step. gorec: gorec.Embedding
over a table holding the 1M ids (hashed int64 ids: the ids are spread over int64, not 0..1M),
backward into the table, Table.step(). torch: nn.Embedding(1M, 64, sparse=True) with
torch.optim.SparseAdam, its table pre-sized (no hashing: ids are indices). Prints `BENCH` lines:
the median step time of each over the rounds and the ratio torch / gorec (above 1: gorec faster).
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gorec  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1 << 20)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=20, help="steps per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("BENCH_THREADS", "1")))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    keys = torch.randint(-2**63, 2**63 - 1, (a.rows,), dtype=torch.int64, generator=g)  # the table's ids
    batches = [torch.randint(a.rows, (a.batch,), generator=g) for _ in range(a.steps)]
    weights = [torch.randn(a.batch, a.dim, generator=g) for _ in range(a.steps)]

    t = gorec.Table("bench", a.dim, optimizer="sparse_adam", lr=1e-3, capacity=a.rows)
    for i in range(0, a.rows, 1 << 16):
        t.lookup(keys[i:i + (1 << 16)], train=True)  # the 1M ids, inserted up front
    emb = gorec.Embedding(t)
    gbatches = [keys[b] for b in batches]

    ref = torch.nn.Embedding(a.rows, a.dim, sparse=True)
    opt = torch.optim.SparseAdam(ref.parameters(), lr=1e-3)

    def gorec_round():
        for ids, w in zip(gbatches, weights):
            (emb(ids) * w).sum().backward()
            t.step()

    def torch_round():
        for ids, w in zip(batches, weights):
            opt.zero_grad()
            (ref(ids) * w).sum().backward()
            opt.step()

    times = {"gorec": [], "torch": []}
    gorec_round(), torch_round()  # warm up: the states' first touch
    for _ in range(a.rounds):
        for name, f in (("gorec", gorec_round), ("torch", torch_round)):
            s = time.perf_counter()
            f()
            times[name].append((time.perf_counter() - s) / a.steps)
    t.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    tag = "b%d_r%d_d%d" % (a.batch, a.rows, a.dim)
    print("BENCH py_gorec_sparse_adam_step_%s %.1f us/step" % (tag, med["gorec"] * 1e6))
    print("BENCH py_torch_sparse_adam_step_%s %.1f us/step" % (tag, med["torch"] * 1e6))
    print("BENCH py_sparse_adam_step_torch_over_gorec %.2f x" % (med["torch"] / med["gorec"]))
    print("# torch %s, %d thread(s), rounds of %d steps: gorec %s us, torch %s us" % (
        torch.__version__, a.threads, a.steps, [round(x * 1e6) for x in times["gorec"]],
        [round(x * 1e6) for x in times["torch"]]), file=sys.stderr)


if __name__ == "__main__":
    main()
