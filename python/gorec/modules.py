"""gorec.Embedding and gorec.EmbeddingBag: nn.Modules over a gorec.Table."""
from typing import Optional

import torch

_ops = torch.ops.gorec

_MODES = {"sum": 0, "mean": 1, "max": 2}


class Embedding(torch.nn.Module):
    """torch.nn.Embedding over a gorec.Table: forward(ids) gives ids.shape + [dim].

    The table is the parameter, outside ``parameters()``: a backward pass hands the gradient
    of the looked-up rows to the table (repeated ids summed), and ``step()`` (the table's)
    applies one step of the table's optimizer, as torch.optim does for a sparse
    nn.Embedding; with ``fused=True`` the backward pass applies it at once. In eval mode
    lookups are reads: nothing is inserted, absent ids get the table's read default
    (under ``torch.no_grad()`` alone a training-mode lookup still inserts absent ids).
    ``padding_idx`` and ``max_norm`` are nn.Embedding's.

    Neither ``zero_grad()`` (the module's or a torch.optim optimizer's) nor ``state_dict()``
    and ``torch.save`` reach the table: ``table.zero_grad()`` drops its pending gradients and
    ``gorec.save`` checkpoints its rows.
    """

    padding_idx: Optional[int]

    def __init__(self, table, padding_idx=None, max_norm=None, fused=False):
        super().__init__()
        self.table = table
        self.table_name = table.name
        self.table_serial = table._serial  # (the ops find the table by name: see _check)
        self.padding_idx = padding_idx
        self.max_norm = float(max_norm or 0.0)
        self.fused = fused
        self.read_default = table._rd

    def forward(self, ids):
        self._check()
        return _ops.emb_lookup(self.table_name, ids, self.training, self.fused, self.padding_idx, self.max_norm,
                               self.read_default)

    def _check(self):
        """Refuses a lookup once the module's table was closed and another opened under its
        name, which the name alone would reach."""
        if _ops.table_serial(self.table_name) != self.table_serial:
            raise RuntimeError("closed: the module's table was closed (the open table of its name is another)")

    def step(self):
        """One optimizer step of the table from the pending gradients."""
        return self.table.step()

    def extra_repr(self):
        return "table=%r, dim=%d" % (self.table_name, self.table.dim)


class EmbeddingBag(Embedding):
    """torch.nn.EmbeddingBag over a gorec.Table: forward(ids, offsets=None,
    per_sample_weights=None) pools the rows of each bag (mode sum, mean or max) into
    float32 [B, dim]; ids [N] with offsets [B], or ids [B, L] without. Empty bags give zeros."""

    def __init__(self, table, mode="mean", padding_idx=None, max_norm=None, fused=False):
        super().__init__(table, padding_idx, max_norm, fused)
        if mode not in _MODES:
            raise ValueError("unknown mode %r" % (mode,))
        self.mode = _MODES[mode]

    def forward(self, ids, offsets: Optional[torch.Tensor] = None,
                per_sample_weights: Optional[torch.Tensor] = None):
        self._check()
        return _ops.emb_lookup_bag(self.table_name, ids, offsets, per_sample_weights, self.mode, self.training,
                                   self.fused, self.padding_idx, self.max_norm, self.read_default)
