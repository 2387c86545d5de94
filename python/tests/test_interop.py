"""One checkpoint format for Go and Python (docs/checkpoint.md): tables trained and saved by Go
load in Python with the same ids, rows, optimizer states, metadata and step, bit for bit; saved
again by Python, Go loads them and saves the same tensors; and the same seed (or, by default,
the same table name) gives the same initial row for an id in both. The Go side is
python/tests/goside, built once per session."""
import json
import os
import shutil
import subprocess

import pytest
import torch

import gorec
from gorec.checkpoint import _read_st
from conftest import ROOT


@pytest.fixture(scope="session")
def goside(tmp_path_factory):
    exe = os.environ.get("GOSIDE")  # a goside built elsewhere (against another gorec)
    if not exe:
        go = shutil.which("go") or "/usr/local/go/bin/go"
        if not os.path.exists(go):
            pytest.skip("no Go toolchain")
        exe = str(tmp_path_factory.mktemp("goside") / "goside")
        subprocess.run([go, "build", "-o", exe, "./python/tests/goside"], cwd=ROOT, check=True)

    def run(*args):
        out = subprocess.run([exe] + [str(a) for a in args], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
    return run


def files(d):
    """The manifest's entries by table name, with each table file's tensors."""
    with open(os.path.join(d, "manifest.json")) as f:
        m = json.load(f)
    return {e["name"]: (e, _read_st(os.path.join(d, e["file"]))[0]) for e in m["tables"]}


def same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype == torch.float32:
        a, b = a.view(torch.int32), b.view(torch.int32)
    return torch.equal(a, b)


def admission_sorted(t):
    """The admission counts sorted by id: a count table's order is its hash map's, not kept."""
    t = dict(t)
    order = torch.argsort(t["admission.ids"])
    t["admission.ids"], t["admission.counts"] = t["admission.ids"][order], t["admission.counts"][order]
    return t


def assert_same_contents(got, want, what):
    got, want = admission_sorted(got), admission_sorted(want)
    assert sorted(got) == sorted(want), what
    for k in want:
        assert same_bits(got[k], want[k]), (what, k)


def assert_same_tables(x, y):
    assert sorted(x) == sorted(y)
    for n in x:
        (ex, tx), (ey, ty) = x[n], y[n]
        assert strip(ex) == strip(ey), n
        assert_same_contents(tx, ty, n)


def strip(e):
    """A manifest entry without what depends on the writer: its file's name and size (the
    header's JSON), and the admission tensors' checksums (their order)."""
    e = {k: v for k, v in e.items() if k not in ("file", "size")}
    e["crc32c"] = {k: v for k, v in e["crc32c"].items() if not k.startswith("admission.")}
    return e


def close_all(tables):
    for t in tables.values():
        t.close()


def test_go_to_python_and_back(goside, tmp_path):
    goside("train", tmp_path / "go")
    saved = files(tmp_path / "go")
    assert sorted(saved) == ["go_adagrad", "go_adam", "go_rowwise", "go_sgd"]
    tables = gorec.load(tmp_path / "go")
    try:
        for name, t in tables.items():
            e, want = saved[name]
            got, step = t.export()
            assert step == e["step"] == 3
            assert_same_contents(got, want, name)
            assert t.config()["admit_after"] == e["admit_after"]
        assert saved["go_adagrad"][0]["admission_counts"] > 0  # admission counts travel too
        gorec.save(tmp_path / "py", *tables.values())
    finally:
        close_all(tables)
    assert_same_tables(files(tmp_path / "py"), saved)
    goside("resave", tmp_path / "py", tmp_path / "go2")  # Go loads Python's checkpoint
    assert_same_tables(files(tmp_path / "go2"), saved)


def test_python_to_go(goside, name, tmp_path):
    a = gorec.Table(name + "-adamw", 5, optimizer="adamw", lr=0.01, weight_decay=0.1, seed=1, track_access=True)
    b = gorec.Table(name + "-ftrl", 3, optimizer="ftrl", alpha=0.1, l1=0.01, seed=2 ** 64 - 1, admit_after=2,
                    initializer="truncated_normal", init={"std": 0.5})
    try:
        for s in range(4):
            ids = torch.tensor([s, -2 ** 63, 2 ** 63 - 1, s, 17 + s])
            for t in (a, b):
                (t.lookup(ids) * (s + 1)).pow(2).sum().backward()
                t.step()
        gorec.save(tmp_path / "py", a, b)
    finally:
        a.close()
        b.close()
    goside("resave", tmp_path / "py", tmp_path / "go")
    got, want = files(tmp_path / "go"), files(tmp_path / "py")
    assert want[name + "-ftrl"][0]["seed"] == 2 ** 64 - 1
    assert want[name + "-ftrl"][0]["admission_counts"] > 0
    assert_same_tables(got, want)


def test_initial_rows_agree(goside, name, tmp_path):
    goside("init", tmp_path / "go")
    saved = files(tmp_path / "go")
    batches = [[1, 2, 1, 2 ** 63 - 1], [-2 ** 63, 2, 7, 7], [1 << 62, -5, 1, 9]]  # goside's
    # The default seed is derived from the table's name: that table has Go's name here.
    for go_name, py_name, kw in (("go_init_normal", name + "go_init_normal", dict(seed=1234)),
                                 ("go_init_xavier", name + "go_init_xavier",
                                  dict(seed=(1 << 63) + 99, initializer="xavier_uniform")),
                                 ("go_init_default", "go_init_default", dict())):
        t = gorec.Table(py_name, 8, **kw)
        try:
            for b in batches:
                t.lookup(torch.tensor(b), train=True)
            got, _ = t.export()
        finally:
            t.close()
        e, want = saved[go_name]
        assert e["rows"] == 8
        assert same_bits(got["ids"], want["ids"]) and same_bits(got["rows"], want["rows"]), go_name


@pytest.mark.parametrize("writer", ["go", "python"])
def test_load_refuses_a_corrupt_manifest(goside, name, tmp_path, writer):
    if writer == "go":
        goside("init", tmp_path)
    else:
        t = gorec.Table(name, 2)
        t.lookup(torch.tensor([1]))
        gorec.save(tmp_path, t)
        t.close()
    p = tmp_path / "manifest.json"
    m = json.loads(p.read_text())
    loaded = gorec.load(tmp_path)  # intact, it loads
    close_all(loaded)
    m["tables"][0]["seed"] += 1
    p.write_text(json.dumps(m))
    with pytest.raises(gorec.CheckpointError, match="^corrupt: manifest: checksum "):
        gorec.load(tmp_path)
    assert not set(loaded) & set(gorec.table_names())


def test_default_seed_depends_on_the_name(name):
    """seed=0 (the default) derives each table's seed from its name, as Go's Config.Seed 0: two
    tables do not start alike; an explicit seed is used as is, whatever the name."""
    tables = [gorec.Table(name + s, 4, **kw) for s, kw in (("-a", {}), ("-b", {}), ("-c", dict(seed=5)),
                                                          ("-d", dict(seed=5)))]
    try:
        rows = [t.lookup(torch.tensor([42]), train=True) for t in tables]
        assert not torch.equal(rows[0], rows[1])
        assert torch.equal(rows[2], rows[3])
        assert tables[0].config()["seed"] not in (0, tables[1].config()["seed"])
        assert tables[2].config()["seed"] == 5
    finally:
        for t in tables:
            t.close()
