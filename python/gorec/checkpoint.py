"""gorec.save and gorec.load: checkpoints in the format of docs/checkpoint.md, which Go's
embedding.Save writes and embedding.Load reads (and the other way round).

A checkpoint is a directory: manifest.json (version 2, with the CRC-32C of its canonical
bytes) and a safetensors file per table. The table's stored contents come out of and go into
the C++ engine through torch.ops.gorec.emb_save and emb_load, which make the same C calls as
Go's save and load, so a table goes through either language bit for bit.
"""
import fcntl
import json
import os
import random
import re
import time
from decimal import Decimal

import numpy as np
import torch

from .table import INITIALIZERS, OPTIMIZERS, LAYOUTS, READ_DEFAULTS, Table, _signed

_ops = torch.ops.gorec

FORMAT, VERSION = "gorec-checkpoint", 2
TABLE_FORMAT, TABLE_VERSION = "gorec-table", "1"
_OURS = re.compile(r"^(g[0-9a-f]+\.(t[0-9]+\.safetensors|f\.[A-Za-z0-9_-]+)|manifest\.json\.tmp-g[0-9a-f]+)$")
_TABLE_FILE = re.compile(r"^g[0-9a-f]+\.t[0-9]+\.safetensors$")
_DTYPES = {"I64": (np.int64, torch.int64), "F32": (np.float32, torch.float32)}


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be loaded: corrupt, incompatible or missing."""


# ---- the manifest's canonical bytes (Go's encoding/json of embedding's manifest struct) ----

_TABLE_FIELDS = [("name", str), ("file", str), ("size", int), ("rows", int), ("admission_counts", int),
                 ("step", int), ("dim", int), ("block_rows", int), ("layout", str), ("initializer", str),
                 ("init_params", "f4"), ("optimizer", str), ("opt_params", "f8"), ("seed", int),
                 ("read_default", str), ("track_access", "omitbool"), ("admit_after", int), ("states", "strs"),
                 ("crc32c", "sums")]
_FILE_FIELDS = [("name", str), ("file", str), ("size", int), ("crc32c", int)]


def _go_float(x):
    """x as Go's encoding/json writes a float64."""
    x = float(x)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError("not a finite number: %r" % x)
    d = Decimal(repr(x)).normalize()
    if x != 0 and (abs(x) < 1e-6 or abs(x) >= 1e21):
        return format(d, "e")
    return format(d, "f")


def _go_str(s):
    s = json.dumps(s, ensure_ascii=False)
    for c, e in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(c, e)
    return s


def _encode(v, kind):
    if kind is str:
        return _go_str(v if isinstance(v, str) else "")
    if kind is int:
        return str(int(v or 0))
    if kind in ("f4", "f8"):
        n = int(kind[1])
        v = list(v or [])[:n] + [0.0] * max(0, n - len(v or []))
        return "[" + ",".join(_go_float(x) for x in v) + "]"
    if kind == "strs":
        return "null" if v is None else "[" + ",".join(_go_str(x) for x in v) + "]"
    if kind == "sums":
        return "null" if v is None else "{" + ",".join(_go_str(k) + ":" + str(int(v[k])) for k in sorted(v)) + "}"
    raise AssertionError(kind)


def _struct(d, fields):
    parts = []
    for name, kind in fields:
        v = d.get(name)
        if kind == "omitbool":
            if v:
                parts.append('"%s":true' % name)
            continue
        parts.append('"%s":%s' % (name, _encode(v, kind)))
    return "{" + ",".join(parts) + "}"


def canonical(m):
    """The manifest's canonical bytes, whose CRC-32C is manifest_crc32c (docs/checkpoint.md)."""
    def objs(v, fields):
        return "null" if v is None else "[" + ",".join(_struct(e, fields) for e in v) + "]"
    s = '{"format":%s,"version":%s,"generation":%s,"tables":%s,"files":%s}' % (
        _encode(m.get("format"), str), _encode(m.get("version"), int), _encode(m.get("generation"), str),
        objs(m.get("tables"), _TABLE_FIELDS), objs(m.get("files"), _FILE_FIELDS))
    return s.encode("utf-8")


def _crc(data, crc=0):
    if isinstance(data, (bytes, bytearray)):
        data = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
    return _ops.crc32c(data.contiguous(), crc)


# ---- safetensors, by hand ----

def _st_header(tensors, meta):
    """The header bytes (length prefix and padded JSON) of tensors [(name, dtype, shape)]."""
    h, off = {"__metadata__": meta}, 0
    for name, dt, shape in tensors:
        n = int(np.prod(shape, dtype=np.int64)) * 8 if dt == "I64" else int(np.prod(shape, dtype=np.int64)) * 4
        h[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    b = json.dumps(h, separators=(",", ":")).encode()
    b += b" " * (-len(b) % 8)
    return len(b).to_bytes(8, "little") + b


def _read_st(path):
    """The tensors (name -> CPU tensor) and metadata of a safetensors file; checks its layout."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise CheckpointError("%s: too short" % path)
    n = int.from_bytes(data[:8], "little")
    if n > len(data) - 8:
        raise CheckpointError("%s: header length %d beyond the file" % (path, n))
    try:
        h = json.loads(data[8:8 + n])
    except ValueError as e:
        raise CheckpointError("%s: header: %s" % (path, e))
    meta = h.pop("__metadata__", {})
    base, out, spans = 8 + n, {}, []
    for name, d in h.items():
        if d.get("dtype") not in _DTYPES:
            raise CheckpointError("%s: tensor %r: dtype %r" % (path, name, d.get("dtype")))
        npt, _ = _DTYPES[d["dtype"]]
        a, b = d["data_offsets"]
        count = int(np.prod(d["shape"], dtype=np.int64))
        if b - a != count * np.dtype(npt).itemsize or a < 0 or base + b > len(data):
            raise CheckpointError("%s: tensor %r: offsets do not match its shape" % (path, name))
        spans.append((a, b))
        arr = np.frombuffer(data, dtype=np.dtype(npt).newbyteorder("<"), count=count, offset=base + a)
        out[name] = torch.from_numpy(arr.reshape(d["shape"]).copy())
    spans.sort()
    if [s for s in spans if s[0] != s[1]] and (spans[0][0] != 0 or spans[-1][1] != len(data) - base or
                                                any(x[1] != y[0] for x, y in zip(spans, spans[1:]))):
        raise CheckpointError("%s: the tensors do not tile the data" % path)
    return out, meta


def _fsync_dir(d):
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path, chunks):
    with open(path, "wb") as f:
        for c in chunks:
            f.write(c)
        f.flush()
        os.fsync(f.fileno())


# ---- save ----

def _table_entry(t, path):
    """Writes table t's file at path; its manifest entry (without "file")."""
    c = t.config()
    contents, step = t.export()
    names = list(contents)
    meta = {"format": TABLE_FORMAT, "version": TABLE_VERSION, "step": str(step)}
    specs = [(n, "F32" if contents[n].dtype == torch.float32 else "I64", tuple(contents[n].shape)) for n in names]
    header = _st_header(specs, meta)
    _write_synced(path, [header] + [contents[n].numpy().astype(contents[n].numpy().dtype.newbyteorder("<")).tobytes()
                                    for n in names])
    e = {"name": t.name, "size": os.path.getsize(path), "rows": int(contents["ids"].shape[0]),
         "admission_counts": int(contents["admission.ids"].shape[0]), "step": step, "dim": c["dim"],
         "block_rows": c["block_rows"], "layout": c["layout"], "initializer": c["initializer"],
         "init_params": c["init_params"], "optimizer": c["optimizer"], "opt_params": c["opt_params"],
         "seed": c["seed"], "read_default": c["read_default"], "track_access": c["track_access"],
         "admit_after": c["admit_after"], "states": t.state_names(),
         "crc32c": {n: _crc(contents[n]) for n in names}}
    if not e["track_access"]:
        del e["track_access"]  # omitted when false, as Go writes it
    return e


def save(dir, *tables):
    """Writes a checkpoint of tables to dir (created if needed), replacing the one there only
    once the new one is complete and durable (new files under a fresh generation, fsynced, then
    the manifest renamed over manifest.json), as Go's embedding.Save does. Like Go's, it holds
    an exclusive flock on dir while it runs: another save into dir at once (a thread's, or
    another process's, Go's too) raises RuntimeError at once and changes nothing."""
    os.makedirs(dir, exist_ok=True)
    fd = os.open(dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError("invalid argument: another save into %s is in progress: saves into one "
                               "directory must not overlap" % dir) from None
        _save(dir, tables)
    finally:
        os.close(fd)  # releases the lock


def _save(dir, tables):
    gen = "g%x%08x" % (time.time_ns(), random.getrandbits(32))
    m = {"format": FORMAT, "version": VERSION, "generation": gen, "tables": [], "files": []}
    created = []
    try:
        if len({t.name for t in tables}) != len(tables):
            raise ValueError("a table is listed twice")
        for i, t in enumerate(tables):
            name = "%s.t%d.safetensors" % (gen, i)
            created.append(os.path.join(dir, name))
            e = _table_entry(t, created[-1])
            e["file"] = name
            m["tables"].append(e)
        _fsync_dir(dir)
        m["manifest_crc32c"] = _crc(canonical(m))
        tmp = os.path.join(dir, "manifest.json.tmp-" + gen)
        created.append(tmp)
        _write_synced(tmp, [json.dumps(m, indent=2).encode()])
        os.replace(tmp, os.path.join(dir, "manifest.json"))
        _fsync_dir(dir)
    except BaseException:
        for p in created:
            if os.path.exists(p):
                os.remove(p)
        raise
    for f in os.listdir(dir):  # the older generations' files, and leftovers of dead saves
        if _OURS.match(f) and not f.startswith(gen + "."):
            os.remove(os.path.join(dir, f))


# ---- load ----

def _read_manifest(dir):
    path = os.path.join(dir, "manifest.json")
    if not os.path.exists(path):
        raise CheckpointError("not found: no checkpoint in %s" % dir)
    try:
        with open(path, "rb") as f:
            m = json.load(f)
    except ValueError as e:
        raise CheckpointError("corrupt: manifest: %s" % e)
    if m.get("format") != FORMAT or m.get("version") not in (1, 2):
        raise CheckpointError("corrupt: manifest: format %r version %r" % (m.get("format"), m.get("version")))
    if m["version"] == 2 or "manifest_crc32c" in m:
        if "manifest_crc32c" not in m:
            raise CheckpointError("corrupt: manifest: version 2 without manifest_crc32c")
        sum_ = _crc(canonical(m))
        if sum_ != m["manifest_crc32c"]:
            raise CheckpointError("corrupt: manifest: checksum %s, its contents give %d" % (m["manifest_crc32c"], sum_))
    for e in m.get("tables") or []:
        if not _TABLE_FILE.match(e.get("file", "")):
            raise CheckpointError("corrupt: manifest: bad file name %r" % e.get("file"))
        for k, names in (("initializer", INITIALIZERS), ("optimizer", OPTIMIZERS), ("layout", LAYOUTS),
                         ("read_default", READ_DEFAULTS)):
            if e.get(k) not in names:
                raise CheckpointError("corrupt: manifest: table %r: unknown %s %r" % (e.get("name"), k, e.get(k)))
    return m


def _load_table(dir, e):
    path = os.path.join(dir, e["file"])
    if not os.path.exists(path) or os.path.getsize(path) != e["size"]:
        raise CheckpointError("corrupt: table %r: file missing or not of %d bytes" % (e["name"], e["size"]))
    ts, meta = _read_st(path)
    if meta.get("format") != TABLE_FORMAT or meta.get("version") != TABLE_VERSION or meta.get("step") != str(e["step"]):
        raise CheckpointError("corrupt: table %r: metadata %r" % (e["name"], meta))
    for n, want in (e.get("crc32c") or {}).items():
        if n not in ts or _crc(ts[n]) != want:
            raise CheckpointError("corrupt: table %r: tensor %r missing or its checksum differs" % (e["name"], n))
    p8 = list(e["opt_params"])
    t = Table.__new__(Table)
    t._attach(e["name"], e["read_default"])
    _ops.create_table(e["name"], e["dim"], INITIALIZERS.index(e["initializer"]), [float(x) for x in e["init_params"]],
                      OPTIMIZERS.index(e["optimizer"]), [float(x) for x in p8], _signed(e["seed"]), 0,
                      e["block_rows"], LAYOUTS.index(e["layout"]), bool(e.get("track_access")), None)
    t._serial = _ops.table_serial(e["name"])
    try:
        want = ["ids", "rows"] + ["state." + s for s in e["states"]] + [
            "last_step", "frequency", "stamp", "admission.ids", "admission.counts"]
        if sorted(ts) != sorted(want) or t.state_names() != e["states"]:
            raise CheckpointError("corrupt: table %r: tensors %s, want %s" % (e["name"], sorted(ts), want))
        if ts["ids"].shape[0] != e["rows"] or ts["admission.ids"].shape[0] != e["admission_counts"]:
            raise CheckpointError("corrupt: table %r: row counts differ from the manifest's" % e["name"])
        if e.get("admit_after", 0) > 1:
            _ops.set_admission(e["name"], e["admit_after"])
        try:
            _ops.emb_load(e["name"], e["step"], ts["ids"], ts["rows"], [ts["state." + s] for s in e["states"]],
                          ts["last_step"], ts["frequency"], ts["stamp"], ts["admission.ids"], ts["admission.counts"])
        except RuntimeError as err:
            raise CheckpointError("corrupt: table %r: %s" % (e["name"], err))
        if len(t) != e["rows"]:
            raise CheckpointError("corrupt: table %r: %d distinct ids for %d rows" % (e["name"], len(t), e["rows"]))
    except BaseException:
        t.close()
        raise
    return t


def load(dir):
    """The tables of the checkpoint in dir, as new open tables: a dict name -> Table, in the
    manifest's order. Everything is checked as Go's embedding.Load checks it (the manifest's
    checksum, each tensor's CRC-32C, and the rows as the C engine imports them); a failed
    load raises CheckpointError (a RuntimeError; a table name already open in the process is
    RuntimeError "name taken: ...") and leaves no table behind."""
    try:
        return _load(dir)
    except (KeyError, TypeError, AttributeError, IndexError) as e:  # a manifest of another shape
        raise CheckpointError("corrupt: manifest: %s: %s" % (type(e).__name__, e)) from e


def _load(dir):
    m = _read_manifest(dir)
    out = {}
    try:
        for e in m.get("tables") or []:
            out[e["name"]] = _load_table(dir, e)
    except BaseException:
        for t in out.values():
            t.close()
        raise
    return out
