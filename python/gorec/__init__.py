"""gorec's embedding tables in PyTorch.

The tables are those of gorec's Go API, the same C++ engine behind the same C ABI, reached
through the ops of libgorec_torch.so (``torch.ops.gorec.*``, built by ``make python``):

    import torch, gorec
    t = gorec.Table("user", 16, optimizer="sparse_adam", lr=0.01)
    emb = gorec.Embedding(t)
    loss = emb(torch.tensor([3, 7, 3])).sum()
    loss.backward()          # the rows' gradient goes to the table
    t.step()                 # one SparseAdam step, as torch.optim.SparseAdam takes it
    gorec.save("ckpt", t)    # the checkpoint format of docs/checkpoint.md, read by Go too

The library is found at $GOREC_TORCH_LIB, else at build/py/libgorec_torch.so of the source
tree this package sits in.
"""
import os

import torch

_DEFAULT_LIB = os.path.join(os.path.dirname(__file__), "..", "..", "build", "py", "libgorec_torch.so")
torch.ops.load_library(os.environ.get("GOREC_TORCH_LIB", _DEFAULT_LIB))

from .table import Table, Prefetch, table_names  # noqa: E402
from .modules import Embedding, EmbeddingBag  # noqa: E402
from .checkpoint import save, load, CheckpointError  # noqa: E402

__all__ = ["Table", "Prefetch", "table_names", "Embedding", "EmbeddingBag", "save", "load", "CheckpointError"]
