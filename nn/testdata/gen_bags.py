#!/usr/bin/python3
"""Generates bags.json: torch.nn.EmbeddingBag outputs and weight gradients for bags larger than
embedding.json's (rows of random floats, dims that exercise every part of a vectorised row:
1, 5, 16, 72, 128), the reference of the bags pooled on the C side (nn/embedding_bag_collection_test.go):
nn.EmbeddingBag and nn.EmbeddingBagCollection must give these outputs bit for bit (the forward
is fused multiply-adds in bag order, then / count for mean, as torch's CPU kernel) and these
gradients to a relative 1e-6 (torch sums each id's gradient in another order).

Run with Debian's python3-torch (1.13):  /usr/bin/python3 nn/testdata/gen_bags.py

Each case: a table of `rows` rows (row r holds id ID0 + 7919 r), bags given by lengths (a
KeyedJaggedTensor's) and by include_last_offset offsets, mode sum or mean, optional per-sample
weights and padding row, and loss = sum(out * coef) with coef random: grad is dL/dweight.
"""
import json
import os

import torch

ID0 = 1000003


class F32(float):
    """A float32 value, written with the 9 significant digits that identify it."""

    def __repr__(self):
        return "%.9g" % self


def f32s(t):
    return [F32(x) for x in t.reshape(-1).tolist()]


def dumps(v):
    if isinstance(v, F32):
        return repr(v)
    if isinstance(v, dict):
        return "{" + ", ".join(json.dumps(k) + ": " + dumps(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(dumps(x) for x in v) + "]"
    return json.dumps(v)


def case(name, gen, rows, dim, bags, mean_len, mode, weighted=False, padding=None, empty_every=0):
    weight = torch.randn(rows, dim, generator=gen)
    if padding is not None:
        weight[padding] = 0  # the table has no row for the padding id
    lengths = torch.poisson(torch.full((bags,), float(mean_len)), generator=gen).long()
    if empty_every:
        lengths[::empty_every] = 0
    n = int(lengths.sum())
    idx = torch.randint(0, rows, (n,), generator=gen)
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
    psw = torch.rand(n, generator=gen) * 2 - 0.5 if weighted else None
    bag = torch.nn.EmbeddingBag(rows, dim, mode=mode, include_last_offset=True, padding_idx=padding)
    with torch.no_grad():
        bag.weight.copy_(weight)
    out = bag(idx, offsets, per_sample_weights=psw)
    coef = torch.randn(out.shape, generator=gen)
    (out * coef).sum().backward()
    ids = [ID0 + 7919 * int(i) for i in idx]
    return dict(
        name=name, dim=dim, mode=mode, table_ids=[ID0 + 7919 * r for r in range(rows)],
        rows=f32s(weight), ids=ids, lengths=lengths.tolist(), offsets=offsets.tolist(),
        weights=None if psw is None else f32s(psw),
        padding=None if padding is None else ID0 + 7919 * padding,
        coef=f32s(coef), out=f32s(out.detach()),
        grad=f32s(bag.weight.grad),
    )


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(2024)
    cases = [
        case("sum_d128", gen, 32, 128, 10, 20, "sum"),
        case("mean_d72_empty", gen, 24, 72, 16, 8, "mean", empty_every=7),
        case("sum_d5_weights", gen, 50, 5, 40, 6, "sum", weighted=True, empty_every=9),
        case("mean_d16_padding", gen, 40, 16, 20, 10, "mean", padding=3, empty_every=6),
        case("sum_d1_weights_padding", gen, 30, 1, 25, 8, "sum", weighted=True, padding=0),
        # weights and padding, rows wide enough for the vector kernels (product rounded apart)
        case("sum_d72_weights_padding", gen, 30, 72, 25, 12, "sum", weighted=True, padding=2),
    ]
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bags.json")
    with open(out, "w") as f:
        f.write(dumps(dict(generator="gen_bags.py", torch=torch.__version__, cases=cases)))
        f.write("\n")


if __name__ == "__main__":
    main()
