"""gorec.Table: a named embedding table of the C++ engine (torch.ops.gorec)."""
import torch

_ops = torch.ops.gorec

INITIALIZERS = ["zeros", "constant", "uniform", "normal", "truncated_normal", "xavier_uniform", "xavier_normal"]
OPTIMIZERS = ["none", "sgd", "adagrad", "rowwise_adagrad", "sparse_adam", "adamw", "ftrl"]
LAYOUTS = ["separate", "interleaved"]
READ_DEFAULTS = ["zeros", "initial"]

# Each initializer's and optimizer's parameters, in the C ABI's order (cgotorch.h), with the
# defaults of gorec's Go API (embedding.Config), which are torch's where torch has the rule.
_INIT_PARAMS = {
    "zeros": [],
    "constant": [("value", 0.0)],
    "uniform": [("low", 0.0), ("high", 1.0)],
    "normal": [("mean", 0.0), ("std", 1.0)],
    "truncated_normal": [("mean", 0.0), ("std", 1.0), ("low", None), ("high", None)],
    "xavier_uniform": [("gain", 1.0), ("fan_in", 0), ("fan_out", 0)],
    "xavier_normal": [("gain", 1.0), ("fan_in", 0), ("fan_out", 0)],
}
_OPT_PARAMS = {
    "none": [],
    "sgd": [("lr", 0.01), ("momentum", 0.0), ("dampening", 0.0), ("nesterov", False)],
    "adagrad": [("lr", 0.01), ("lr_decay", 0.0), ("initial_accumulator_value", 0.0), ("eps", 1e-10)],
    "rowwise_adagrad": [("lr", 0.01), ("lr_decay", 0.0), ("initial_accumulator_value", 0.0), ("eps", 1e-10)],
    "sparse_adam": [("lr", 1e-3), ("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-8)],
    "adamw": [("lr", 1e-3), ("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-8), ("weight_decay", 0.0)],
    "ftrl": [("alpha", 0.05), ("beta", 0.0), ("l1", 0.0), ("l2", 0.0), ("initial_accumulator_value", 0.0)],
}


def _params(kind, table, given, what):
    if kind not in table:
        raise ValueError("unknown %s %r, one of %s" % (what, kind, ", ".join(table)))
    given = dict(given)
    if "betas" in given:  # torch's spelling
        given["beta1"], given["beta2"] = given.pop("betas")
    out = []
    for name, default in table[kind]:
        out.append(given.pop(name, default))
    if given:
        raise TypeError("%s %r takes no parameter %s" % (what, kind, ", ".join(sorted(given))))
    return out


def _init_params(kind, given):
    p = _params(kind, _INIT_PARAMS, given, "initializer")
    if kind == "truncated_normal" and p[2] is None and p[3] is None:
        p[2], p[3] = p[0] - 2 * p[1], p[0] + 2 * p[1]  # embedding.TruncatedNormal's default
    return [float(0 if v is None else v) for v in p]


def table_names():
    """The names of the open tables of the process (Go's and Python's alike), sorted."""
    return list(_ops.table_names())


class Table:
    """A dynamic embedding table: rows of ``dim`` float32 values keyed by any int64 id.

    Ids need no vocabulary: a training lookup inserts absent ids, with rows from the
    initializer (a function of the seed and the id alone, as in Go: ``seed=0``, the default,
    derives the table's seed from its name, as Go's ``Config.Seed`` 0 does, so tables do not
    start alike; another ``seed`` is used as is; ``config()["seed"]`` is the seed in use). ``optimizer`` is the rule
    that ``update`` and ``step`` apply (none, sgd, adagrad, rowwise_adagrad, sparse_adam, adamw,
    ftrl), with its parameters under torch's names as keywords (``lr=0.1, momentum=0.9``);
    ``init`` gives the initializer's (``Table("t", 8, initializer="uniform",
    init={"low": -0.1, "high": 0.1})``). Defaults are gorec's: normal(0, 1) rows, SGD with lr 0.01.

    The table lives in the process's registry under ``name`` until ``close()`` (also for
    Go code in the same process); every method raises RuntimeError with the C ABI's message
    for bad input ("invalid argument: ..."), a closed table ("not found: ...", or "closed: ..."
    once another table took its name: a handle never reaches another table) and so on, and a
    failed call changes nothing.
    """

    def __init__(self, name, dim, *, initializer="normal", init=None, optimizer="sgd", seed=0, capacity=0,
                 block_rows=0, layout="separate", track_access=False, read_default="zeros", admit_after=0,
                 device=None, **optimizer_params):
        ip = _init_params(initializer, init or {})
        op = [float(v) for v in _params(optimizer, _OPT_PARAMS, optimizer_params, "optimizer")]
        if layout not in LAYOUTS:
            raise ValueError("unknown layout %r" % (layout,))
        self._attach(name, read_default)
        if block_rows == 0:  # embedding.Config's default
            block_rows = 65536 if device is not None and torch.device(device).type == "cuda" else 4096
        _ops.create_table(name, dim, INITIALIZERS.index(initializer), ip, OPTIMIZERS.index(optimizer), op,
                          _signed(seed), capacity, block_rows, LAYOUTS.index(layout), track_access,
                          None if device is None else torch.device(device), seed == 0)
        self._serial = _ops.table_serial(name)
        if admit_after > 1:
            _ops.set_admission(name, admit_after)

    def _attach(self, name, read_default):
        if read_default not in READ_DEFAULTS:
            raise ValueError("unknown read_default %r" % (read_default,))
        self.name = name
        self.read_default = read_default
        self._rd = READ_DEFAULTS.index(read_default)

    @classmethod
    def open(cls, name, read_default="zeros"):
        """The open table of that name (made by Python or Go in this process)."""
        t = cls.__new__(cls)
        t._attach(name, read_default)
        t._serial = _ops.table_serial(name)  # "not found: " when there is none
        return t

    def _live(self):
        """The table's name, once sure that it still names this table: the ops find tables by
        name, and a table closed, then another opened under its name, would take this handle's
        calls (and Go's tables share the names)."""
        if _ops.table_serial(self.name) != self._serial:
            raise RuntimeError("closed: table %r was closed (the open table of that name is another)" % (self.name,))
        return self.name

    # ---- configuration ----
    @property
    def dim(self):
        return self.config()["dim"]

    def config(self):
        """The table's configuration as a checkpoint's manifest names it."""
        ints, ip, op = _ops.table_config(self._live())
        dim, capacity, block_rows, init, opt, seed, layout, flags, admit = ints
        return {"dim": dim, "capacity": capacity, "block_rows": block_rows, "initializer": INITIALIZERS[init],
                "init_params": list(ip), "optimizer": OPTIMIZERS[opt], "opt_params": list(op),
                "seed": seed % (1 << 64), "layout": LAYOUTS[layout], "track_access": bool(flags & 2),
                "admit_after": admit, "read_default": self.read_default}

    def stats(self):
        size, capacity, nbytes, dim, step, num_states, opt = _ops.table_stats(self._live())
        return {"size": size, "capacity": capacity, "bytes": nbytes, "dim": dim, "step": step,
                "num_states": num_states, "optimizer": OPTIMIZERS[opt]}

    def __len__(self):
        return _ops.emb_len(self._live())

    def set_lr(self, lr):
        """The optimizer's learning rate from the next step on (as assigning a param_group's lr)."""
        _ops.set_lr(self._live(), float(lr))

    # ---- rows ----
    def lookup(self, ids, train=True, fused=False):
        """Rows of ids (int64, any shape) as float32 ids.shape + [dim]. A training lookup
        inserts absent ids and, with grad mode on, gives a result whose backward hands the
        rows' gradient to the table: kept for ``step()``, or, ``fused``, applied at once."""
        return _ops.emb_lookup(self._live(), ids, train, fused, None, 0.0, self._rd)

    def read(self, keys):
        """Rows of keys [N] without inserting: absent ids give the read default."""
        return _ops.emb_read(keys, self.dim, self._live(), self._rd)

    def write(self, keys, values):
        """Sets the rows of keys [N] to values [N, dim] (the last occurrence of an id wins)."""
        _ops.emb_write(keys, values, self._live())

    def update(self, keys, grads):
        """One optimizer step from grads [N, dim] (repeated ids' gradients summed first)."""
        _ops.emb_update(keys, grads, self._live())

    def prefetch(self, keys):
        """Starts an asynchronous read of keys [N]; ``wait()`` on the result gives the rows."""
        return Prefetch(self, _ops.emb_prefetch(keys, self._live(), self._rd))

    def delete(self, keys):
        """Removes keys [N]; returns how many were present."""
        return _ops.emb_delete(self._live(), keys)

    def step(self):
        """One optimizer step from the pending gradients of backward passes; False when none."""
        return _ops.emb_step(self._live())

    def zero_grad(self):
        """Drops the pending gradients."""
        _ops.emb_zero_grad(self._live())

    def export(self):
        """The stored contents, as a checkpoint holds them: a dict of CPU tensors (ids in row
        order, rows, state.<name>, last_step, frequency, stamp, admission.ids,
        admission.counts) and the step counter."""
        step, ids, rows, states, last, freq, stamp, aids, acounts = _ops.emb_save(self._live())
        out = {"ids": ids, "rows": rows}
        for n, s in zip(self.state_names(), states):
            out["state." + n] = s
        out.update({"last_step": last, "frequency": freq, "stamp": stamp, "admission.ids": aids,
                    "admission.counts": acounts})
        return out, step

    def state_names(self):
        """The optimizer states' names (torch.optim's: momentum_buffer, sum, exp_avg, ...)."""
        c = self.config()
        n = self.stats()["num_states"]
        return {"sgd": ["momentum_buffer"], "adagrad": ["sum"], "rowwise_adagrad": ["sum"],
                "sparse_adam": ["exp_avg", "exp_avg_sq"], "adamw": ["exp_avg", "exp_avg_sq"],
                "ftrl": ["z", "n"]}.get(c["optimizer"], [])[:n]

    def close(self):
        """Closes the table and frees its memory and name; later calls raise RuntimeError."""
        _ops.close_table(self._live())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "gorec.Table(%r)" % (self.name,)


class Prefetch:
    """An asynchronous read started by Table.prefetch; ``wait()`` once gives its rows."""

    def __init__(self, table, pid):
        self.table, self.id = table, pid

    def wait(self):
        return _ops.emb_wait_result(self.id, self.table.dim, self.table._live())

    def discard(self):
        _ops.emb_discard(self.id, self.table._live())


def _signed(seed):
    """A uint64 seed as the int64 the op schema carries (the same 64 bits)."""
    seed = int(seed) % (1 << 64)
    return seed - (1 << 64) if seed >= 1 << 63 else seed
