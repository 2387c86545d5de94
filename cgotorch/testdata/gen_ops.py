#!/usr/bin/python3
"""Reference values for the tensor operations of cgotorch (see ops_test.go).

Run with Debian's interpreter, which has python3-torch (1.13):

    /usr/bin/python3 cgotorch/testdata/gen_ops.py

It writes ops.json beside itself: for every case, the inputs, the outputs (shape, dtype,
values) and, for differentiable cases, the gradients of sum(out[0] * weight) with respect to
the named inputs. The Go test runs the same operation (the case of the same name in
ops_test.go) through gorec and compares. Every input is a small fixed tensor written here.
"""
import json
import os

import torch

F = torch.nn.functional
F32, F64, I64, BOOL = torch.float32, torch.float64, torch.int64, torch.bool


def t(data, dtype=F32):
    return torch.tensor(data, dtype=dtype)


# The fixed inputs. No ties where a gradient depends on which of two equal values wins.
X = t([[-1.5, 0.25, 2.0], [0.5, -0.75, 1.25]])
Y = t([[0.5, 1.5, -2.5], [2.25, 0.125, -0.5]])
P = t([[0.5, 1.25, 2.0], [3.0, 0.75, 1.5]])  # positive
ROW = t([1.0, -2.0, 0.5])
ROW4 = t([0.25, -1.5, 0.75, 2.0])
COL = t([[2.0], [-0.5]])
M = t([[0.5, -1.0, 0.25, 2.0], [1.5, 0.75, -0.5, 1.0], [-1.25, 0.5, 1.0, -0.25]])
A3 = t([[[0.5, -1.0, 1.5], [2.0, 0.25, -0.75]], [[-0.5, 1.0, 0.125], [1.25, -1.5, 0.75]]])
I = t([[3, -7, 0], [5, 2, -4]], I64)
J = t([[2, 3, -3], [5, -5, 1]], I64)  # nonzero; J[1][0] == I[1][0]
B1 = t([[True, False, True], [False, False, True]], BOOL)
B2 = t([[True, True, False], [False, True, True]], BOOL)
Z = torch.zeros(2, 3)
IDX = t([1, 0, 1], I64)
GIDX = t([[0, 2], [1, 1]], I64)
SIDX = t([[1, 0, 1], [0, 1, 0]], I64)
U = t([[3, 1, 3, 2], [1, 3, 5, 2]], I64)
LOGITS = t([[1.0, -0.5, 2.0], [0.25, 1.5, -1.0], [-0.75, 0.5, 0.0], [2.5, -1.5, 1.0]])
CLASSES = t([2, 1, 0, 0], I64)
PROBS = t([[0.2, 0.3, 0.5], [0.1, 0.8, 0.1], [1.0, 0.0, 0.0], [0.25, 0.25, 0.5]])
SCORES = t([[1.0, -0.5], [0.25, 2.0], [-1.5, 0.75]])
LABELS = t([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
PROBA = torch.sigmoid(SCORES)

cases = []


def case(name, fn, grad=(), **inputs):
    """Records fn(**inputs); grad names the inputs to differentiate sum(out[0] * weight) by."""
    ins = {k: v.clone().requires_grad_(k in grad) for k, v in inputs.items()}
    out = fn(**ins)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    c = {"name": name, "inputs": {k: enc(v) for k, v in inputs.items()},
         "outputs": [enc(o) for o in outs]}
    if grad:
        first = outs[0]
        n = first.numel()
        w = ((torch.arange(n, dtype=F64) * 0.37) % 1.3 + 0.2).reshape(first.shape).to(first.dtype)
        (first * w).sum().backward()
        c["weight"] = enc(w)
        c["grads"] = {k: enc(ins[k].grad) for k in grad}
    cases.append(c)


def enc(x):
    x = x.detach()
    return {"dtype": str(x.dtype).replace("torch.", ""), "shape": list(x.shape),
            "data": x.double().flatten().tolist()}


def inplace(fn):
    """An in-place method applied to a clone of a, returning the clone."""
    def run(**kw):
        a = kw.pop("a").detach().clone()
        fn(a, **kw)
        return a
    return run


# ---- elementwise, one tensor ---------------------------------------------------------------
for op, src, diff in [
    ("neg", X, True), ("abs", X, True), ("sqrt", P, True), ("rsqrt", P, True),
    ("exp", X, True), ("log", P, True), ("log1p", P, True), ("sigmoid", X, True),
    ("tanh", X, True), ("relu", X, True), ("gelu", X, True), ("silu", X, True),
    ("square", X, True), ("reciprocal", P, True), ("sign", X, False), ("floor", X, False),
    ("ceil", X, False), ("round", X, False),
]:
    fn = getattr(torch, op, None) or getattr(F, op)
    case(op, lambda a, fn=fn: fn(a), grad=("a",) if diff else (), a=src)
case("neg_int", lambda a: -a, a=I)
case("abs_int", lambda a: a.abs(), a=I)
case("logical_not", lambda a: a.logical_not(), a=I)

# ---- elementwise, two tensors ----------------------------------------------------------------
for op in ["add", "sub", "mul", "div", "maximum", "minimum", "remainder"]:
    case(op, lambda a, b, op=op: getattr(torch, op)(a, b), grad=("a", "b"), a=X, b=Y)
case("pow", lambda a, b: a.pow(b), grad=("a", "b"), a=P, b=Y)
case("add_broadcast_row", lambda a, b: a + b, grad=("a", "b"), a=X, b=ROW)
case("mul_broadcast_col", lambda a, b: a * b, grad=("a", "b"), a=X, b=COL)
case("add_int", lambda a, b: a + b, a=I, b=J)
case("div_int", lambda a, b: a / b, a=I, b=J)
case("remainder_int", lambda a, b: a % b, a=I, b=J)
for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
    case(op, lambda a, b, op=op: getattr(a, op)(b), a=I, b=J)
case("logical_and", lambda a, b: a.logical_and(b), a=B1, b=B2)
case("logical_or", lambda a, b: a.logical_or(b), a=B1, b=B2)

# ---- elementwise with a scalar ---------------------------------------------------------------
case("add_scalar", lambda a: a + 2, grad=("a",), a=X)
case("sub_scalar", lambda a: a - 0.5, grad=("a",), a=X)
case("mul_scalar", lambda a: a * 3, grad=("a",), a=X)
case("div_scalar", lambda a: a / 4, grad=("a",), a=X)
case("pow_scalar", lambda a: a ** 2, grad=("a",), a=X)
case("pow_scalar_half", lambda a: a ** 0.5, grad=("a",), a=P)
case("remainder_scalar", lambda a: a % 1.5, a=X)
case("add_scalar_int", lambda a: a + 1, a=I)
case("mul_scalar_int_frac", lambda a: a * 0.5, a=I)
case("remainder_scalar_int", lambda a: a % 3, a=I)
for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
    case(op + "_scalar", lambda a, op=op: getattr(a, op)(0.25), a=X)
case("clamp", lambda a: a.clamp(-1, 1), grad=("a",), a=X)
case("clamp_min", lambda a: a.clamp(min=0.3), grad=("a",), a=X)
case("clamp_max", lambda a: a.clamp(max=0.3), grad=("a",), a=X)
case("clamp_int", lambda a: a.clamp(-3, 3), a=I)
case("where", lambda c, a, b: torch.where(c, a, b), grad=("a", "b"), c=B1, a=X, b=Y)
case("masked_fill", lambda a, m: a.masked_fill(m, -1.0), grad=("a",), a=X, m=B2)

# ---- in place ---------------------------------------------------------------------------------
case("add_inplace", inplace(lambda a, b: a.add_(b)), a=X, b=Y)
case("add_scaled_inplace", inplace(lambda a, b: a.add_(b, alpha=-0.5)), a=X, b=Y)
case("sub_inplace", inplace(lambda a, b: a.sub_(b)), a=X, b=ROW)
case("mul_inplace", inplace(lambda a, b: a.mul_(b)), a=X, b=Y)
case("div_inplace", inplace(lambda a, b: a.div_(b)), a=X, b=P)
case("copy_from", inplace(lambda a, b: a.copy_(b)), a=Z, b=ROW)
case("add_scalar_inplace", inplace(lambda a: a.add_(2)), a=X)
case("sub_scalar_inplace", inplace(lambda a: a.sub_(0.25)), a=X)
case("mul_scalar_inplace", inplace(lambda a: a.mul_(-3)), a=X)
case("div_scalar_inplace", inplace(lambda a: a.div_(8)), a=X)
case("fill", inplace(lambda a: a.fill_(7.5)), a=X)
case("zero", inplace(lambda a: a.zero_()), a=X)
case("add_scalar_inplace_int", inplace(lambda a: a.add_(3)), a=I)

# ---- reductions -------------------------------------------------------------------------------
case("sum", lambda a: a.sum(), grad=("a",), a=X)
case("sum_dim", lambda a: a.sum(dim=[1]), grad=("a",), a=X)
case("sum_dims_keep", lambda a: a.sum(dim=[0, 1], keepdim=True), grad=("a",), a=X)
case("sum_int", lambda a: a.sum(), a=I)
case("mean", lambda a: a.mean(), grad=("a",), a=X)
case("mean_dim_keep", lambda a: a.mean(dim=[0], keepdim=True), grad=("a",), a=X)
case("prod", lambda a: a.prod(), grad=("a",), a=X)
case("prod_dim", lambda a: a.prod(dim=1), grad=("a",), a=X)
case("prod_dims_keep", lambda a: a.prod(0, keepdim=True).prod(2, keepdim=True), grad=("a",), a=A3)
case("max", lambda a: a.max(), grad=("a",), a=X)
case("min", lambda a: a.min(), grad=("a",), a=X)
case("amax", lambda a: a.amax(dim=[1]), grad=("a",), a=X)
case("amin_keep", lambda a: a.amin(dim=[0], keepdim=True), grad=("a",), a=X)
case("logsumexp", lambda a: a.logsumexp(dim=[1]), grad=("a",), a=X)
case("logsumexp_all", lambda a: a.logsumexp(dim=[0, 1]), grad=("a",), a=X)
case("std", lambda a: a.std(), grad=("a",), a=X)
case("std_dim", lambda a: a.std(dim=[1]), grad=("a",), a=X)
case("var", lambda a: a.var(), grad=("a",), a=X)
case("var_dim_keep", lambda a: a.var(dim=[0], keepdim=True), grad=("a",), a=X)
case("norm", lambda a: a.norm(), grad=("a",), a=X)
case("norm_dim", lambda a: a.norm(dim=[1]), grad=("a",), a=X)
case("any", lambda a: a.any(), a=B1)
case("any_dim", lambda a: a.any(dim=1), a=B1)
case("all", lambda a: a.all(), a=I)
case("all_dim_keep", lambda a: a.all(dim=0, keepdim=True), a=B2)
case("max_dim", lambda a: a.max(dim=1), grad=("a",), a=X)
case("min_dim_keep", lambda a: a.min(dim=0, keepdim=True), grad=("a",), a=X)
case("argmax", lambda a: a.argmax(dim=1), a=X)
case("argmin_keep", lambda a: a.argmin(dim=0, keepdim=True), a=X)
case("topk", lambda a: a.topk(2, dim=1), grad=("a",), a=X)
case("topk_smallest", lambda a: a.topk(1, dim=0, largest=False), grad=("a",), a=X)
case("sort", lambda a: a.sort(dim=1, stable=True), grad=("a",), a=X)
case("sort_desc_int", lambda a: a.sort(dim=0, descending=True, stable=True), a=I)

# ---- shapes -----------------------------------------------------------------------------------
case("reshape", lambda a: a.reshape(3, 2), grad=("a",), a=X)
case("reshape_infer", lambda a: a.reshape(-1), grad=("a",), a=X)
case("view", lambda a: a.view(1, 6), grad=("a",), a=X)
case("expand", lambda a: a.expand(2, 3), grad=("a",), a=COL)
case("permute", lambda a: a.permute(2, 0, 1), grad=("a",), a=A3)
case("transpose", lambda a: a.transpose(0, 1), grad=("a",), a=X)
case("squeeze_all", lambda a: a.reshape(1, 2, 1, 3).squeeze(), grad=("a",), a=X)
case("squeeze_dim", lambda a: a.reshape(1, 2, 1, 3).squeeze(2), grad=("a",), a=X)
case("unsqueeze", lambda a: a.unsqueeze(1), grad=("a",), a=X)
case("flatten", lambda a: a.flatten(1, 2), grad=("a",), a=A3)
case("contiguous", lambda a: a.t().contiguous(), grad=("a",), a=X)
case("clone", lambda a: a.clone(), grad=("a",), a=X)
case("narrow", lambda a: a.narrow(1, 1, 2), grad=("a",), a=X)
case("cat", lambda a, b: torch.cat([a, b], 0), grad=("a", "b"), a=X, b=Y)
case("cat_dim1", lambda a, b, c: torch.cat([a, b, c], 1), grad=("a", "b", "c"), a=X, b=COL, c=Y)
case("stack", lambda a, b: torch.stack([a, b], 1), grad=("a", "b"), a=X, b=Y)

# ---- indexing ---------------------------------------------------------------------------------
case("index_select", lambda a, i: a.index_select(0, i), grad=("a",), a=X, i=IDX)
case("index_select_dim1", lambda a, i: a.index_select(1, i), grad=("a",), a=X, i=IDX)
case("gather", lambda a, i: a.gather(1, i), grad=("a",), a=X, i=GIDX)
case("index_add", lambda a, i, s: a.index_add(0, i, s), grad=("a", "s"), a=Z, i=IDX, s=M[:, :3].contiguous())
case("index_add_inplace", inplace(lambda a, i, s: a.index_add_(0, i, s)), a=Z, i=IDX, s=M[:, :3].contiguous())
case("scatter", lambda a, i, s: a.scatter(0, i, s), grad=("a",), a=X, i=t([[1, 0, 1]], I64), s=Y)
case("scatter_inplace", inplace(lambda a, i, s: a.scatter_(1, i, s)), a=X, i=GIDX, s=Y)
case("scatter_add", lambda a, i, s: a.scatter_add(0, i, s), grad=("a", "s"), a=X, i=SIDX, s=Y)
case("scatter_add_inplace", inplace(lambda a, i, s: a.scatter_add_(1, i, s)), a=Z, i=SIDX, s=Y)
case("unique", lambda a: torch.unique(a, sorted=True, return_inverse=True, return_counts=True), a=U)
case("unique_values", lambda a: torch.unique(a, sorted=True), a=U)

# ---- layers -----------------------------------------------------------------------------------
case("mm", lambda a, b: a.mm(b), grad=("a", "b"), a=X, b=M)
case("matmul_batched", lambda a, b: a.matmul(b), grad=("a", "b"), a=A3, b=M)
case("matmul_vector", lambda a, b: a.matmul(b), grad=("a", "b"), a=X, b=ROW)
case("linear", lambda a, w, b: F.linear(a, w, b), grad=("a", "w", "b"), a=X, w=M.t().contiguous(), b=ROW4)
case("linear_nobias", lambda a, w: F.linear(a, w), grad=("a", "w"), a=X, w=M.t().contiguous())
case("linear_batched", lambda a, w, b: F.linear(a, w, b), grad=("a", "w", "b"), a=A3, w=M.t().contiguous(), b=ROW4)
case("softmax", lambda a: a.softmax(1), grad=("a",), a=X)
case("softmax_dim0", lambda a: a.softmax(0), grad=("a",), a=X)
case("log_softmax", lambda a: a.log_softmax(1), grad=("a",), a=X)
case("dropout_eval", lambda a: torch.dropout(a, 0.5, False), grad=("a",), a=X)
case("dropout_p0", lambda a: torch.dropout(a, 0.0, True), grad=("a",), a=X)

# ---- losses -----------------------------------------------------------------------------------
LOSSES = [
    ("mse", F.mse_loss, X, Y),
    ("l1", F.l1_loss, X, Y),
    ("smooth_l1", F.smooth_l1_loss, X, Y),
    ("bce", F.binary_cross_entropy, PROBA, LABELS),
    ("bce_with_logits", F.binary_cross_entropy_with_logits, SCORES, LABELS),
    ("cross_entropy", F.cross_entropy, LOGITS, CLASSES),
    ("cross_entropy_probs", F.cross_entropy, LOGITS, PROBS),
    ("nll", F.nll_loss, torch.log_softmax(LOGITS, 1), CLASSES),
]
for name, fn, inp, target in LOSSES:
    for red in ["none", "mean", "sum"]:
        case(f"{name}_loss_{red}", lambda input, target, fn=fn, red=red: fn(input, target, reduction=red),
             grad=("input",), input=inp, target=target)

names = [c["name"] for c in cases]
assert len(names) == len(set(names)), "duplicate case names"
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops.json")
with open(path, "w") as f:
    json.dump({"generator": "gen_ops.py", "torch_version": torch.__version__, "cases": cases}, f,
              indent=None, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {path}")
