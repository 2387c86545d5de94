"""nn/bench_test.go's BenchmarkCTRStep model in TorchRec: the reference of issue 34.

8 tables of 100,000 x 16 (one id per table and sample) in one FusedEmbeddingBagCollection, whose
optimizer runs inside the backward pass (FBGEMM's table-batched kernels), concat -> Linear(128, 64)
-> ReLU -> Linear(64, 1) with Adam, BCE with logits, batch 1,024, cycling over 16 batches drawn as
scripts/bench_torch.py draws them. FBGEMM's CPU path refuses Adam for the tables, so they use
exact Adagrad (--table-optimizer rowwise-adagrad for FBGEMM's cheaper row-wise form); gorec's
benchmark uses SparseAdam, which does more work per row.

Prints `BENCH torchrec_CTRStep <samples/s> samples/s` as scripts/bench.sh parses it. Run with the
venv of `make torchrec-venv` (mk/torchrec.mk): `make torchrec-ref`.
"""
import argparse
import functools
import importlib.metadata

import torch
import torchrec
from torchrec.modules.fused_embedding_modules import FusedEmbeddingBagCollection
from torchrec.optim import RowWiseAdagrad
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

from bench_torch import best_ns

# torch.optim.Adam would fail: "Optimizer adam is not supported in CPU mode." (fbgemm-gpu-cpu 1.9.0).
TABLE_OPTIMIZERS = {"adagrad": torch.optim.Adagrad, "rowwise-adagrad": RowWiseAdagrad}


def ctr_step_bench(min_time, table_optimizer):
    """Returns samples/s of one training step of the CTR model."""
    fields, dim, batch, n_ids = 8, 16, 1024, 100_000
    names = [f"f{f}" for f in range(fields)]
    tables = [torchrec.EmbeddingBagConfig(
        name=f"t{f}", embedding_dim=dim, num_embeddings=n_ids, feature_names=[names[f]],
        init_fn=functools.partial(torch.nn.init.normal_, std=0.01)) for f in range(fields)]
    ebc = FusedEmbeddingBagCollection(tables=tables, optimizer_type=TABLE_OPTIMIZERS[table_optimizer],
                                      optimizer_kwargs={"lr": 1e-3}, device=torch.device("cpu"))
    mlp = torch.nn.Sequential(torch.nn.Linear(fields * dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    adam = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(1)
    data = []
    for _ in range(16):
        ids = [torch.randint(n_ids, (batch,), generator=gen) for _ in range(fields)]
        label = torch.randint(2, (batch, 1), generator=gen).float()
        kjt = KeyedJaggedTensor.from_lengths_sync(
            keys=names, values=torch.cat(ids), lengths=torch.ones(fields * batch, dtype=torch.int64))
        data.append((kjt, label))
    k = [0]

    def step():
        kjt, label = data[k[0] % len(data)]
        k[0] += 1
        adam.zero_grad()
        out = mlp(ebc(kjt).values())  # [batch, 8 x 16], the features in key order
        loss_fn(out, label).backward()  # also updates the tables
        adam.step()

    return batch / (best_ns(step, min_time=min_time) * 1e-9)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--time", type=float, default=3.0, help="seconds of timing")
    ap.add_argument("--table-optimizer", choices=sorted(TABLE_OPTIMIZERS), default="adagrad")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    rate = ctr_step_bench(args.time, args.table_optimizer)
    print(f"BENCH torchrec_CTRStep {rate:.0f} samples/s  # threads={args.threads} "
          f"tables={args.table_optimizer} torch={torch.__version__} torchrec={importlib.metadata.version('torchrec')}")


if __name__ == "__main__":
    main()
