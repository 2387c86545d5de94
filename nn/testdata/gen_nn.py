#!/usr/bin/python3
"""Reference values for package nn (see nn_test.go, optim_test.go, safetensors_test.go).

Run with Debian's interpreter, which has python3-torch (1.13), from the repository root:

    /usr/bin/python3 nn/testdata/gen_nn.py

It writes beside itself:

- nn.json: for every case a name, a config (hyperparameters) and named tensors (dtype, shape,
  row-major values): inputs, parameters, outputs, and the gradients of sum(out * gy) for a fixed
  gy; for the optimizers, the parameters and the loss after every step of a small MLP trained
  on fixed batches from fixed initial weights; for clip_grad_norm_ (cases clip_*), the total
  norm and the clipped gradients of the MLP's first batch; for the learning-rate schedulers
  (cases sched_*), the rates of three groups after every step.
- optim_state/<case>.safetensors: for every optimizer case, torch.optim's state after step 3
  (SAVE_AT) in gorec's optimizer state format (Optimizer.LoadState), with the parameter groups'
  step counts; Go loads it and must take steps 4 to 6 as torch did.
- torch_state.safetensors: the state_dict of a small model (Linear, BatchNorm1d, ReLU, Linear),
  written with struct + json (no safetensors package); Go loads it (case "torch_state").
- It also reads gorec_state.safetensors, written by Go (go test ./nn -run Golden -update), with
  its own parser, loads it into the same architecture with load_state_dict(strict=True) and
  records the model's output (case "gorec_state"), which the Go test compares with its own.
"""
import json
import os
import struct

import torch

nn = torch.nn
F32, I64 = torch.float32, torch.int64
HERE = os.path.dirname(os.path.abspath(__file__))


def t(data, dtype=F32):
    return torch.tensor(data, dtype=dtype)


def enc(x):
    x = x.detach()
    dtype = {torch.float32: "float32", torch.int64: "int64"}[x.dtype]
    return {"dtype": dtype, "shape": list(x.shape), "data": x.reshape(-1).tolist()}


cases = []


def case(name, tensors, config=None):
    cases.append({"name": name, "config": config or {},
                  "tensors": {k: enc(v) for k, v in tensors.items()}})


def det(*shape, scale=1.0, shift=0.0):
    """A deterministic, tie-free tensor: scaled sines of 1, 2, 3, ..."""
    n = 1
    for s in shape:
        n *= s
    return (torch.sin(torch.arange(1, n + 1, dtype=torch.float64) * 1.7) * scale + shift).to(F32).reshape(shape)


def layer_case(name, module, x, config=None, extra=None):
    """Forward x, then backward sum(y * gy); record input, parameters, buffers, output, grads."""
    x = x.clone().requires_grad_(True)
    tensors = {"x": x.detach().clone()}
    for k, v in module.state_dict().items():
        tensors["param." + k] = v.clone()
    y = module(x)
    gy = det(*y.shape, scale=0.9, shift=0.1)
    (y * gy).sum().backward()
    tensors.update({"y": y, "gy": gy, "grad.x": x.grad})
    for k, p in module.named_parameters():
        tensors["grad." + k] = p.grad
    for k, b in module.named_buffers():
        tensors["after." + k] = b
    if extra:
        tensors.update(extra)
    case(name, tensors, config)


X = det(5, 4, scale=2.0)

# Linear with explicit weights.
lin = nn.Linear(4, 3)
with torch.no_grad():
    lin.weight.copy_(det(3, 4, scale=0.5))
    lin.bias.copy_(t([0.1, -0.2, 0.3]))
layer_case("linear", lin, X)
lin_nb = nn.Linear(4, 2, bias=False)
with torch.no_grad():
    lin_nb.weight.copy_(det(2, 4, scale=0.7, shift=0.05))
layer_case("linear_nobias", lin_nb, det(2, 3, 4))

# LayerNorm over the last dimension and over the last two, with non-trivial affine parameters.
ln = nn.LayerNorm(4)
with torch.no_grad():
    ln.weight.copy_(t([1.5, 0.5, -1.0, 2.0]))
    ln.bias.copy_(t([0.1, 0.2, -0.3, 0.0]))
layer_case("layernorm", ln, X, {"shape": [4]})
ln2 = nn.LayerNorm([3, 4])
with torch.no_grad():
    ln2.weight.copy_(det(3, 4, scale=0.5, shift=1.0))
    ln2.bias.copy_(det(3, 4, scale=0.2))
layer_case("layernorm2d", ln2, det(2, 3, 4, scale=3.0), {"shape": [3, 4]})

# BatchNorm1d: a training step from non-trivial running statistics, then eval.
for name, x in [("batchnorm", det(6, 3, scale=2.0, shift=0.5)), ("batchnorm3d", det(4, 3, 5, scale=2.0))]:
    bn = nn.BatchNorm1d(3, momentum=0.2)
    with torch.no_grad():
        bn.weight.copy_(t([1.5, -0.5, 2.0]))
        bn.bias.copy_(t([0.1, 0.2, -0.3]))
        bn.running_mean.copy_(t([0.5, -0.25, 1.0]))
        bn.running_var.copy_(t([2.0, 0.5, 1.5]))
        bn.num_batches_tracked.fill_(3)
    bn.train()
    layer_case(name + "_train", bn, x, {"momentum": 0.2})
    bn.eval()
    for p in bn.parameters():
        p.grad = None
    layer_case(name + "_eval", bn, x * 0.5 + 0.25, {"momentum": 0.2})

# Dropout: p = 0 in training and p = 0.5 in evaluation are the identity.
layer_case("dropout_p0_train", nn.Dropout(0.0).train(), X, {"p": 0.0})
layer_case("dropout_eval", nn.Dropout(0.5).eval(), X, {"p": 0.5})

# Activations.
XA = t([[-2.0, -0.5, 0.25, 1.5], [3.0, -1.25, 0.75, -0.1]])
layer_case("relu", nn.ReLU(), XA)
layer_case("sigmoid", nn.Sigmoid(), XA)
layer_case("tanh", nn.Tanh(), XA)
layer_case("leaky_relu", nn.LeakyReLU(), XA, {"slope": 0.01})
layer_case("leaky_relu_0.2", nn.LeakyReLU(0.2), XA, {"slope": 0.2})

# Losses: value and gradient with respect to the input.
LOGITS = det(4, 3, scale=2.0)
for red in ["mean", "sum"]:
    for name, inp, target, fn in [
        ("bce_with_logits", det(3, 2, scale=2.0), t([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
         nn.BCEWithLogitsLoss(reduction=red)),
        ("mse", det(3, 2, scale=2.0), det(3, 2, scale=1.0, shift=0.3), nn.MSELoss(reduction=red)),
        ("cross_entropy", LOGITS, t([2, 1, 0, 0], I64), nn.CrossEntropyLoss(reduction=red)),
    ]:
        x = inp.clone().requires_grad_(True)
        loss = fn(x, target)
        loss.backward()
        case(name + "_" + red, {"x": inp, "target": target, "loss": loss, "grad.x": x.grad},
             {"reduction": red})

# Optimizers: a small MLP, fixed initial weights, fixed batches, BCE-with-logits loss.
torch.manual_seed(0)
MLP_INIT = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1)).state_dict()
BATCHES = [(det(6, 4, scale=1.5, shift=0.1 * i) + i, (det(6, 1, shift=0.2 * i) > 0).to(F32)) for i in range(3)]
STEPS = 6
case("mlp", dict([("init." + k, v) for k, v in MLP_INIT.items()] +
                 [("x%d" % i, b[0]) for i, b in enumerate(BATCHES)] +
                 [("y%d" % i, b[1]) for i, b in enumerate(BATCHES)]), {"steps": STEPS})

OPTIMIZERS = [
    ("sgd", {"optimizer": "sgd", "lr": 0.1}),
    ("sgd_momentum_nesterov_wd", {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True,
                                  "weight_decay": 0.01}),
    ("sgd_momentum_dampening", {"optimizer": "sgd", "lr": 0.05, "momentum": 0.8, "dampening": 0.3,
                                "weight_decay": 0.02}),
    ("sgd_set_lr", {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "set_lr": {"3": 0.02}}),
    ("sgd_groups", {"optimizer": "sgd", "lr": 0.1, "momentum": 0.5,
                    "groups": [{"params": ["0.weight", "0.bias"], "lr": 0.1, "weight_decay": 0.0},
                               {"params": ["2.weight", "2.bias"], "lr": 0.01, "weight_decay": 0.05}]}),
    ("adam", {"optimizer": "adam", "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-8}),
    ("adam_wd_amsgrad", {"optimizer": "adam", "lr": 0.02, "betas": [0.8, 0.99], "eps": 1e-6,
                         "weight_decay": 0.1, "amsgrad": True}),
    ("adamw", {"optimizer": "adamw", "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.1}),
    ("adamw_set_lr", {"optimizer": "adamw", "lr": 0.01, "betas": [0.9, 0.999], "eps": 1e-8,
                      "weight_decay": 0.01, "set_lr": {"2": 0.03, "4": 0.001}}),
    ("adagrad", {"optimizer": "adagrad", "lr": 0.1, "eps": 1e-10}),
    ("adagrad_decay_wd_init", {"optimizer": "adagrad", "lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.01,
                               "initial_accumulator_value": 0.1, "eps": 1e-10}),
]


def make_optimizer(model, cfg):
    named = dict(model.named_parameters())
    if "groups" in cfg:
        params = [{"params": [named[n] for n in g["params"]], "lr": g["lr"],
                   "weight_decay": g["weight_decay"]} for g in cfg["groups"]]
    else:
        params = model.parameters()
    kind = cfg["optimizer"]
    if kind == "sgd":
        return torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg.get("momentum", 0.0),
                               dampening=cfg.get("dampening", 0.0), nesterov=cfg.get("nesterov", False),
                               weight_decay=cfg.get("weight_decay", 0.0))
    if kind in ("adam", "adamw"):
        cls = torch.optim.Adam if kind == "adam" else torch.optim.AdamW
        return cls(params, lr=cfg["lr"], betas=tuple(cfg["betas"]), eps=cfg["eps"],
                   weight_decay=cfg.get("weight_decay", 0.0), amsgrad=cfg.get("amsgrad", False))
    if kind == "adagrad":
        return torch.optim.Adagrad(params, lr=cfg["lr"], lr_decay=cfg.get("lr_decay", 0.0),
                                   weight_decay=cfg.get("weight_decay", 0.0),
                                   initial_accumulator_value=cfg.get("initial_accumulator_value", 0.0),
                                   eps=cfg["eps"])
    raise ValueError(kind)


ST_DTYPES = {torch.float32: ("F32", "<f4"), torch.int64: ("I64", "<i8")}


def write_safetensors(path, state, metadata):
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for k, v in state.items():
        v = v.detach().contiguous()
        data = v.numpy().astype(ST_DTYPES[v.dtype][1]).tobytes()
        header[k] = {"dtype": ST_DTYPES[v.dtype][0], "shape": list(v.shape),
                     "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    js = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + b"".join(blobs))


# clip_grad_norm_ on the MLP's gradients of batch 0 (from MLP_INIT): per norm type and max norm,
# the total norm returned and the gradients after clipping (max norm 1e3: none clipped).
CLIPS = [("clip_l2", 2.0, 0.05), ("clip_inf", float("inf"), 0.02), ("clip_l1", 1.0, 0.3), ("clip_p3", 3.0, 0.04),
         ("clip_none", 2.0, 1e3)]
for name, norm_type, max_norm in CLIPS:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    model.load_state_dict(MLP_INIT)
    x, y = BATCHES[0]
    nn.BCEWithLogitsLoss()(model(x), y).backward()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type)
    tensors = {"total": total}
    for k, p in model.named_parameters():
        tensors["grad." + k] = p.grad
    case(name, tensors, {"norm_type": "inf" if norm_type == float("inf") else norm_type, "max_norm": max_norm})


# Learning-rate schedulers: three param groups (base lr 0.1, 0.03, 0.05; gorec's test puts the
# third on an embedding table); the lrs after construction and after each of 12 scheduler steps.
SCHEDULES = [
    ("sched_step", "StepLR", dict(step_size=3, gamma=0.5)),
    ("sched_exponential", "ExponentialLR", dict(gamma=0.9)),
    ("sched_cosine", "CosineAnnealingLR", dict(T_max=10, eta_min=0.001)),
    ("sched_linear", "LinearLR", dict(start_factor=0.1, end_factor=1.0, total_iters=5)),
]
for name, kind, kwargs in SCHEDULES:
    ps = [torch.nn.Parameter(torch.zeros(1)) for _ in range(3)]
    opt = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(ps, (0.1, 0.03, 0.05))], lr=0.1)
    sched = getattr(torch.optim.lr_scheduler, kind)(opt, **kwargs)
    lrs = [[g["lr"] for g in opt.param_groups]]
    for _ in range(12):
        opt.step()
        sched.step()
        lrs.append([g["lr"] for g in opt.param_groups])
    case(name, {}, dict(kwargs, scheduler=kind, lrs=lrs))


# torch.optim's state in gorec's optimizer state format (nn/optim_state.go): written after
# step SAVE_AT of every optimizer case; Go loads it and must continue as torch did.
SAVE_AT = 2
STATE_NAMES = ("momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "sum")
HYPER = {"SGD": ("momentum", "dampening", "nesterov"), "Adam": ("betas", "eps", "amsgrad"),
         "AdamW": ("betas", "eps", "amsgrad"), "Adagrad": ("lr_decay", "eps", "initial_accumulator_value")}


def optimizer_state(model, opt, steps_taken):
    names = {id(p): n for n, p in model.named_parameters()}
    kind = type(opt).__name__
    tensors, groups = {}, []
    for g in opt.param_groups:
        params = []
        for p in g["params"]:
            st = opt.state.get(p, {})
            for k in STATE_NAMES:
                if st.get(k) is not None:
                    tensors[names[id(p)] + "." + k] = st[k]
            # SGD keeps no step count; gorec counts the steps each parameter took
            params.append({"name": names[id(p)], "step": int(st["step"]) if "step" in st else steps_taken})
        groups.append({"lr": g["lr"], "weight_decay": g["weight_decay"], "params": params})
    g0 = opt.param_groups[0]
    options = {k: list(g0[k]) if k == "betas" else g0[k] for k in HYPER[kind]}
    metadata = {"format": "gorec-optimizer", "version": "1", "optimizer": kind,
                "options": json.dumps(options), "param_groups": json.dumps(groups)}
    return tensors, metadata


os.makedirs(os.path.join(HERE, "optim_state"), exist_ok=True)
for name, cfg in OPTIMIZERS:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    model.load_state_dict(MLP_INIT)
    opt = make_optimizer(model, cfg)
    lossf = nn.BCEWithLogitsLoss()
    tensors = {}
    for step in range(STEPS):
        if str(step) in cfg.get("set_lr", {}):
            for g in opt.param_groups:
                g["lr"] = cfg["set_lr"][str(step)]
        x, y = BATCHES[step % len(BATCHES)]
        opt.zero_grad()
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        tensors["loss%d" % step] = loss
        for k, v in model.state_dict().items():
            tensors["step%d.%s" % (step, k)] = v.clone()
        if step == SAVE_AT:
            write_safetensors(os.path.join(HERE, "optim_state", name + ".safetensors"),
                              *optimizer_state(model, opt, step + 1))
    case("opt_" + name, tensors, cfg)


# ---- safetensors interop ------------------------------------------------------------------------

def interop_model():
    return nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2))


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + n:]
    spans = sorted(tuple(e["data_offsets"]) for e in header.values())
    pos = 0
    for b, e in spans:
        assert b == pos, "hole or overlap"
        pos = e
    assert pos == len(data), "data size"
    by_name = {"F32": torch.float32, "I64": torch.int64, "F64": torch.float64}
    out = {}
    for k, e in header.items():
        b, end = e["data_offsets"]
        buf = bytearray(data[b:end])
        out[k] = torch.frombuffer(buf, dtype=by_name[e["dtype"]]).reshape(e["shape"]).clone() \
            if end > b else torch.zeros(e["shape"], dtype=by_name[e["dtype"]])
    return out, metadata


XI = det(5, 4, scale=1.5)
torch.manual_seed(1)
m = interop_model()
m.train()
for i in range(3):
    m(det(8, 4, scale=1.0 + i, shift=0.1 * i))  # non-trivial running statistics
m.eval()
write_safetensors(os.path.join(HERE, "torch_state.safetensors"), m.state_dict(), {"format": "pt"})
with torch.no_grad():
    case("torch_state", {"x": XI, "y_eval": m(XI)})

golden = os.path.join(HERE, "gorec_state.safetensors")
if os.path.exists(golden):
    state, metadata = read_safetensors(golden)
    assert metadata == {"format": "pt"}, metadata
    g = interop_model()
    g.load_state_dict(state, strict=True)
    g.eval()
    with torch.no_grad():
        case("gorec_state", {"x": XI, "y_eval": g(XI),
                             "num_batches_tracked": state["1.num_batches_tracked"]})
else:
    print("warning: %s is missing; run go test ./nn -run Golden -update, then this script again" % golden)

with open(os.path.join(HERE, "nn.json"), "w") as f:
    json.dump({"torch_version": torch.__version__, "cases": cases}, f, indent=None, separators=(",", ":"))
    f.write("\n")
print("wrote %d cases" % len(cases))
