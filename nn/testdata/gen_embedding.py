#!/usr/bin/python3
"""Generates embedding.json: torch.nn.Embedding and torch.nn.EmbeddingBag outputs and weight
gradients, the reference the hash-table-backed nn.Embedding and nn.EmbeddingBag must match
(nn/embedding_test.go).

Run with Debian's python3-torch (1.13):  /usr/bin/python3 nn/testdata/gen_embedding.py

Each case is a dense twin holding known rows; row r of the twin is the table's id TABLE_IDS[r].
The looked-up ids repeat; the loss is sum(out * coef) for a fixed coef shaped like out, so the
gradient of every output element is known and distinct. The file records the output, the
dense gradient of every row (what the table must receive, summed over the occurrences of an
id), and for max_norm the rows after the forward pass (renormalised in place).
"""
import json
import os

import torch

TABLE_IDS = [1180210, 42, -7, 655922, 99, 3, 1 << 40, -123456789]


def table_ids(rows):
    return [TABLE_IDS[r] for r in rows]


def coef_like(out):
    # distinct, exact binary fractions: 0.25 * (k % 7 - 3) + 0.125 * (k % 3)
    n = out.numel()
    c = torch.tensor([0.25 * (k % 7 - 3) + 0.125 * (k % 3) + 0.0625 for k in range(n)], dtype=torch.float32)
    return c.reshape(out.shape)


def flat(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


def rows_of(weight):
    return [[float(x) for x in r] for r in weight.detach().tolist()]


def default_rows(n, dim):
    # row r, column j -> (r - 2.5) / 2 + j / 4 (norms from about 0.5 to 3)
    return [[(r - 2.5) / 2 + j / 4 for j in range(dim)] for r in range(n)]


def embedding_case(name, ids, dim=3, nrows=6, padding=None, max_norm=None, loss="coef", rows=None):
    rows = rows if rows is not None else default_rows(nrows, dim)
    if padding is not None:
        rows[padding] = [0.0] * dim  # the table gives zeros for the padding id
    emb = torch.nn.Embedding(nrows, dim, padding_idx=padding, max_norm=max_norm)
    with torch.no_grad():
        emb.weight.copy_(torch.tensor(rows, dtype=torch.float32))
    idx = torch.tensor(ids, dtype=torch.int64)
    out = emb(idx)
    coef = coef_like(out) if loss == "coef" else torch.ones_like(out)
    (out * coef).sum().backward()
    case = dict(
        name=name, kind="embedding", dim=dim, table_ids=TABLE_IDS[:nrows], rows=rows,
        ids=table_ids(idx.reshape(-1).tolist()), ids_shape=list(idx.shape),
        padding=None if padding is None else TABLE_IDS[padding], max_norm=max_norm,
        coef=flat(coef), out=flat(out), out_shape=list(out.shape), grad=rows_of(emb.weight.grad),
        rows_after=rows_of(emb.weight),
    )
    return case


def bag_case(name, ids, offsets, mode, dim=2, nrows=6, weights=None, padding=None, max_norm=None, rows=None):
    rows = rows if rows is not None else [[2 * r, 2 * r + 1] for r in range(nrows)]
    bag = torch.nn.EmbeddingBag(nrows, dim, mode=mode, padding_idx=padding, max_norm=max_norm)
    with torch.no_grad():
        bag.weight.copy_(torch.tensor(rows, dtype=torch.float32))
    idx = torch.tensor(ids, dtype=torch.int64)
    off = None if offsets is None else torch.tensor(offsets, dtype=torch.int64)
    psw = None if weights is None else torch.tensor(weights, dtype=torch.float32)
    out = bag(idx, off, per_sample_weights=psw)
    coef = coef_like(out)
    (out * coef).sum().backward()
    return dict(
        name=name, kind="bag", dim=dim, table_ids=TABLE_IDS[:nrows], rows=[[float(x) for x in r] for r in rows],
        ids=table_ids(idx.reshape(-1).tolist()), ids_shape=list(idx.shape), offsets=offsets, mode=mode,
        weights=weights, padding=None if padding is None else TABLE_IDS[padding], max_norm=max_norm,
        coef=flat(coef), out=flat(out), out_shape=list(out.shape), grad=rows_of(bag.weight.grad),
        rows_after=rows_of(bag.weight),
    )


def main():
    ref_ids, ref_off = [1, 2, 4, 5, 4, 3], [0, 2, 2]
    cases = [
        embedding_case("embedding_2d_duplicates", [[0, 2, 0, 5], [3, 2, 0, 1]]),
        embedding_case("embedding_1d", [4, 4, 4, 1]),
        embedding_case("embedding_padding", [[2, 1, 2], [1, 0, 3]], padding=1),
        embedding_case("embedding_max_norm", [5, 0, 5, 2, 3], max_norm=1.0),
        # optimizers.md's pitfall: a dim-1 table, one id, a .sum() loss
        embedding_case("embedding_dim1_single_sum", [3], dim=1, loss="sum"),
        # optimizers.md's reference values: W[r] = [2r, 2r+1], bags [1,2], [], [4,5,4,3]
        bag_case("bag_sum_reference", ref_ids, ref_off, "sum"),
        bag_case("bag_mean_reference", ref_ids, ref_off, "mean"),
        bag_case("bag_max_reference", ref_ids, ref_off, "max"),
        bag_case("bag_sum_weights", ref_ids, ref_off, "sum", weights=[0.5, -1.0, 2.0, 0.25, 1.5, -0.75]),
        bag_case("bag_sum_padding", [1, 0, 4, 0, 0, 3, 2], [0, 2, 2, 5, 6], "sum", padding=0),
        bag_case("bag_mean_padding", [1, 0, 4, 0, 0, 3, 2], [0, 2, 2, 5, 6], "mean", padding=0),
        bag_case("bag_max_padding", [1, 0, 4, 0, 0, 3, 2], [0, 2, 2, 5, 6], "max", padding=0),
        bag_case("bag_weights_padding", [1, 0, 4, 0, 3], [0, 2, 3], "sum", weights=[0.5, 3.0, -1.0, 2.0, 0.25], padding=0),
        bag_case("bag_mean_2d", [[5, 1, 5], [0, 2, 3]], None, "mean"),
        bag_case("bag_max_2d_real_rows", [[1, 2, 0], [3, 5, 4]], None, "max",
                 rows=[[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5], [1.0, 1.0], [-2.0, 3.0], [0.125, -0.5]]),
        bag_case("bag_sum_max_norm", [1, 2, 4, 5, 4, 3], [0, 2], "sum", max_norm=5.0),
    ]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "embedding.json")
    with open(path, "w") as f:
        json.dump(dict(torch=torch.__version__, cases=cases), f, indent=1)
        f.write("\n")
    print("wrote", path, len(cases), "cases")


if __name__ == "__main__":
    main()
