#!/usr/bin/python3
"""Generates model.json: a small recommendation model trained for STEPS steps in PyTorch, the
reference that nn/model_parity_test.go trains again in gorec and must match.

Run with Debian's python3-torch (1.13):  /usr/bin/python3 nn/testdata/gen_model.py

The model: two embedding fields over raw int64 ids (field "user": one id per sample, field
"item": two ids per sample, summed), their outputs concatenated -> Linear(2*DIM, HIDDEN) -> ReLU
-> Linear(HIDDEN, 1) -> BCE with logits (mean). The two fields draw from overlapping raw id sets
and every batch repeats ids within a field. In PyTorch each field is a dense twin,
nn.Embedding(len(ids), DIM, sparse=True), whose row r is raw id IDS[field][r]; in gorec each is a
hash table holding the same rows. The tables are trained with SGD, Adagrad or SparseAdam (one
run each), the dense part always with Adam. Some ids appear for the first time only in a late
batch, some never (their rows must not move).

The file records the initial rows and dense weights, the batches, and per run the loss of every
step, the final rows of both fields (row by row, keyed by raw id) and the final dense weights.
"""
import json
import os

import torch

STEPS = 24
BATCH = 8
DIM = 4
HIDDEN = 6
# Raw ids: large, negative and small, overlapping between the fields (42, -7, 1 << 40 are in both).
IDS = {
    "user": [42, -7, 1 << 40, 9001, 123456789012, -1, 0, 77],
    "item": [5, 42, -7, 1 << 40, 31337, -99999999999, 8, 64, 2048, 3],
}
LATE = {"user": 77, "item": 3}     # first seen at step LATE_STEP
NEVER = {"user": 0, "item": 2048}  # never looked up
LATE_STEP = 15

RUNS = {
    "sgd": (lambda p: torch.optim.SGD(p, lr=0.5), {"kind": "sgd", "lr": 0.5}),
    "adagrad": (lambda p: torch.optim.Adagrad(p, lr=0.3), {"kind": "adagrad", "lr": 0.3}),
    "sparse_adam": (lambda p: torch.optim.SparseAdam(p, lr=0.05), {"kind": "sparse_adam", "lr": 0.05}),
}
DENSE_LR = 0.01


def flat(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


def make_batches(gen):
    """Ids (as row positions) and labels of every step; each batch repeats ids in each field."""
    batches = []
    for step in range(STEPS):
        pools = {}
        for field, ids in IDS.items():
            pool = [r for r, i in enumerate(ids) if i != NEVER[field] and (i != LATE[field] or step >= LATE_STEP)]
            pools[field] = pool
        user = [pools["user"][int(k)] for k in torch.randint(len(pools["user"]), (BATCH,), generator=gen)]
        item = [pools["item"][int(k)] for k in torch.randint(len(pools["item"]), (BATCH, 2), generator=gen).reshape(-1)]
        user[1] = user[0]  # a duplicate in every batch, whatever the draw
        item[3] = item[0]
        if step == LATE_STEP:
            user[2] = IDS["user"].index(LATE["user"])
            item[5] = IDS["item"].index(LATE["item"])
        label = (torch.rand(BATCH, generator=gen) < 0.4).float().tolist()
        batches.append({"user": user, "item": item, "label": label})
    return batches


class Model(torch.nn.Module):
    def __init__(self, rows, dense):
        super().__init__()
        self.user = torch.nn.Embedding(len(IDS["user"]), DIM, sparse=True)
        self.item = torch.nn.Embedding(len(IDS["item"]), DIM, sparse=True)
        self.fc1 = torch.nn.Linear(2 * DIM, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, 1)
        with torch.no_grad():
            self.user.weight.copy_(rows["user"])
            self.item.weight.copy_(rows["item"])
            for name, p in self.named_parameters():
                if name in dense:
                    p.copy_(dense[name])

    def forward(self, user, item):
        u = self.user(user)                    # [B, D]
        i = self.item(item).sum(1)             # [B, 2, D] -> [B, D]
        h = torch.relu(self.fc1(torch.cat([u, i], 1)))
        return self.fc2(h).reshape(-1)


def main():
    torch.manual_seed(7)
    gen = torch.Generator().manual_seed(11)
    rows = {f: torch.randn(len(ids), DIM) * 0.5 for f, ids in IDS.items()}
    init = Model(rows, {})
    dense = {n: p.detach().clone() for n, p in init.named_parameters() if n.startswith("fc")}
    batches = make_batches(gen)
    runs = []
    for name, (make_opt, cfg) in RUNS.items():
        model = Model(rows, dense)
        sparse = make_opt([model.user.weight, model.item.weight])
        adam = torch.optim.Adam([p for n, p in model.named_parameters() if n.startswith("fc")], lr=DENSE_LR)
        losses = []
        for b in batches:
            sparse.zero_grad()
            adam.zero_grad()
            out = model(torch.tensor(b["user"]), torch.tensor(b["item"]).reshape(BATCH, 2))
            loss = torch.nn.functional.binary_cross_entropy_with_logits(out, torch.tensor(b["label"]))
            loss.backward()
            sparse.step()
            adam.step()
            losses.append(float(loss))
        runs.append({
            "name": name, "table_optimizer": cfg, "losses": losses,
            "rows": {f: [flat(r) for r in getattr(model, f).weight] for f in IDS},
            "dense": {n: flat(p) for n, p in model.named_parameters() if n.startswith("fc")},
        })
    out = {
        "steps": STEPS, "batch": BATCH, "dim": DIM, "hidden": HIDDEN, "dense_lr": DENSE_LR,
        "ids": IDS, "never": NEVER,
        "rows": {f: [flat(r) for r in rows[f]] for f in IDS},
        "dense": {n: {"shape": list(p.shape), "data": flat(p)} for n, p in dense.items()},
        # batches as raw ids (what gorec looks up)
        "batches": [{"user": [IDS["user"][r] for r in b["user"]], "item": [IDS["item"][r] for r in b["item"]],
                     "label": b["label"]} for b in batches],
        "runs": runs,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.json")
    with open(path, "w") as f:
        json.dump(out, f)
    print(f"wrote {path}: {len(runs)} runs x {STEPS} steps; final losses",
          {r["name"]: round(r["losses"][-1], 5) for r in runs})


if __name__ == "__main__":
    main()
