#!/usr/bin/python3
"""Generates optim.json: PyTorch's sparse optimizers applied to an nn.Embedding(sparse=True),
the reference the table's optimizers must match (embedding/optim_test.go).

Run with Debian's python3-torch (1.13):  /usr/bin/python3 embedding/testdata/gen_optim.py

Each case: a dense twin nn.Embedding(6, 6, sparse=True) with known initial rows, and steps of
(ids, per-occurrence gradients). Dim 6: the table's raw kernels take elements 0-3 four at a
time and 4-5 one at a time (cgotorch/csrc/table/lanes.h), so both paths meet PyTorch's numbers. The
ids repeat within a step (gradients are summed), row 3 is first seen at step 2 and row 4 at
step 4, row 2 gets a zero gradient at step 2 after a non-zero one at step 1, row 0 is absent
from steps 2 and 4, and row 5 is never seen. The gradient for the occurrences is pushed
through the real lookup: loss = sum(emb(ids) * grads). After every step the file records all
rows and the optimizer's per-row states.
"""
import json
import os

import torch

DIM = 6
ROWS = 6
# The raw ids the table uses for rows 0..5 of the dense twin.
TABLE_IDS = [1180210, 42, -7, 655922, 99, 3]

STEPS = [
    # (ids, gradient of each occurrence)
    ([0, 1, 0, 2], [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5], [-0.25, 0.75, 1.0], [0.3, -0.6, 0.9]]),
    ([1, 2, 3, 1], [[0.1, 0.2, -0.3], [0.0, 0.0, 0.0], [1.0, -1.0, 0.5], [-0.4, 0.8, 0.6]]),
    ([0, 0, 3], [[2.0, -0.5, 0.25], [-1.0, 1.0, 0.5], [0.7, 0.7, -0.7]]),
    ([4, 1, 4], [[0.2, -0.4, 0.6], [0.9, 0.1, -0.2], [0.3, 0.3, 0.3]]),
]


def widen(g):
    """A 3-column gradient row widened to DIM = 6 columns (a zero row stays zero)."""
    return g + [-1.5 * g[0], 0.75 * g[1], 2.0 * g[2]]


STEPS = [(ids, [widen(g) for g in grads]) for ids, grads in STEPS]

# Per case: when each row first takes part (step index, 0-based); the Go test writes a row's
# initial value just before that step, so the table first sees it then.
FIRST_SEEN = {0: 0, 1: 0, 2: 0, 3: 1, 4: 3}

CASES = [
    ("sgd", "SGD", dict(lr=0.1)),
    ("sgd_momentum", "SGD", dict(lr=0.1, momentum=0.9)),
    ("sgd_momentum_dampening", "SGD", dict(lr=0.1, momentum=0.8, dampening=0.3)),
    ("sgd_nesterov", "SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("adagrad", "Adagrad", dict(lr=0.1)),
    ("adagrad_decay_init", "Adagrad", dict(lr=0.2, lr_decay=0.05, initial_accumulator_value=0.3, eps=1e-6)),
    ("sparse_adam", "SparseAdam", dict(lr=0.01)),
    ("sparse_adam_lr01", "SparseAdam", dict(lr=0.1, betas=(0.8, 0.99), eps=1e-6)),
]

# Learning-rate schedules: before step s (0-based) every param_group's lr is set to LR_AT[s]
# (the table's SetLR). Row 0 is absent from steps 1 and 3 and row 2 from 2 and 3, so SGD with
# momentum moves them lazily across the changes, at the rate of the steps they missed.
LR_AT = {2: 0.02, 3: 0.3}
SCHEDULED = [
    ("sgd_momentum_lr_schedule", "SGD", dict(lr=0.1, momentum=0.9)),
    ("sgd_nesterov_lr_schedule", "SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("adagrad_lr_schedule", "Adagrad", dict(lr=0.2, lr_decay=0.05, initial_accumulator_value=0.3, eps=1e-6)),
    ("sparse_adam_lr_schedule", "SparseAdam", dict(lr=0.01)),
]

# States recorded per optimizer (PyTorch's state names).
STATES = {"SGD": ["momentum_buffer"], "Adagrad": ["sum"], "SparseAdam": ["exp_avg", "exp_avg_sq"]}


def initial_rows():
    # Simple exact binary fractions: row r, column j -> (r - 2.5) / 4 + j / 8.
    return [[(r - 2.5) / 4 + j / 8 for j in range(DIM)] for r in range(ROWS)]


def run_case(opt_name, kwargs, steps, lr_at=None):
    emb = torch.nn.Embedding(ROWS, DIM, sparse=True)
    with torch.no_grad():
        emb.weight.copy_(torch.tensor(initial_rows(), dtype=torch.float32))
    opt = getattr(torch.optim, opt_name)(emb.parameters(), **kwargs)
    out = []
    for s, (ids, grads) in enumerate(steps):
        if lr_at and s in lr_at:
            for g in opt.param_groups:
                g["lr"] = lr_at[s]
        opt.zero_grad()
        x = torch.tensor(ids, dtype=torch.int64)
        g = torch.tensor(grads, dtype=torch.float32)
        (emb(x) * g).sum().backward()
        opt.step()
        st = opt.state[emb.weight]
        states = {}
        for name in STATES[opt_name]:
            v = st.get(name)
            if v is None:
                continue
            if v.is_sparse:
                v = v.to_dense()
            states[name] = v.tolist()
        out.append({"weights": emb.weight.detach().tolist(), "states": states})
    return out


def adamw_case():
    """AdamW touches every row at every step (dense): with every row in every step the table's
    lazy AdamW must give the same numbers."""
    steps = []
    for s in range(3):
        ids = list(range(ROWS)) + [1]
        grads = [[((r * 7 + j * 3 + s * 5) % 11 - 5) / 4 for j in range(DIM)] for r in ids]
        steps.append((ids, grads))
    emb = torch.nn.Embedding(ROWS, DIM)  # dense gradient: torch's AdamW has no sparse support
    with torch.no_grad():
        emb.weight.copy_(torch.tensor(initial_rows(), dtype=torch.float32))
    kwargs = dict(lr=0.05, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1)
    opt = torch.optim.AdamW(emb.parameters(), **kwargs)
    out = []
    for ids, grads in steps:
        opt.zero_grad()
        (emb(torch.tensor(ids)) * torch.tensor(grads)).sum().backward()
        opt.step()
        st = opt.state[emb.weight]
        out.append({"weights": emb.weight.detach().tolist(),
                    "states": {k: st[k].tolist() for k in ("exp_avg", "exp_avg_sq")}})
    return {"name": "adamw_all_rows", "optimizer": "AdamW", "params": kwargs,
            "steps": [{"ids": i, "grads": g} for i, g in steps], "first_seen": {str(r): 0 for r in range(ROWS)},
            "results": out}


def main():
    torch.manual_seed(0)
    cases = []
    for name, opt_name, kwargs, lr_at in [c + ({},) for c in CASES] + [c + (LR_AT,) for c in SCHEDULED]:
        case = {
            "name": name,
            "optimizer": opt_name,
            "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in kwargs.items()},
            "steps": [{"ids": i, "grads": g} for i, g in STEPS],
            "first_seen": {str(k): v for k, v in FIRST_SEEN.items()},
            "results": run_case(opt_name, kwargs, STEPS, lr_at),
        }
        if lr_at:
            case["lr_at"] = {str(k): v for k, v in lr_at.items()}
        cases.append(case)
    adamw = adamw_case()
    adamw["params"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in adamw["params"].items()}
    cases.append(adamw)
    doc = {
        "torch": torch.__version__,
        "dim": DIM,
        "rows": ROWS,
        "table_ids": TABLE_IDS,
        "initial": initial_rows(),
        "cases": cases,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
