"""Bad input raises RuntimeError with the C ABI's message (cgotorch.h: "invalid argument: ",
"not found: ", "unknown prefetch: ") and changes nothing; ops on unknown or closed tables are
errors, not crashes."""
import pytest
import torch

import gorec
from conftest import run_python

ops = torch.ops.gorec
K = torch.tensor([1, 2])


@pytest.fixture
def table(name):
    t = gorec.Table(name, 3, optimizer="adagrad", lr=0.1)
    t.update(torch.tensor([1, 5]), torch.ones(2, 3))
    yield t
    t.close()


BAD = {
    "keys dtype": (lambda t: t.update(K.float(), torch.zeros(2, 3)), "invalid argument: keys must be int64, got Float"),
    "keys rank": (lambda t: t.write(K.view(1, 2), torch.zeros(2, 3)),
                  "invalid argument: keys must be one-dimensional, got 2 dimensions"),
    "grads dtype": (lambda t: t.update(K, torch.zeros(2, 3, dtype=torch.float64)),
                    "invalid argument: grads must be float32, got Double"),
    "grads rows": (lambda t: t.update(K, torch.zeros(3, 3)), "invalid argument: grads has 3 rows for 2 keys"),
    "grads width": (lambda t: t.update(K, torch.zeros(2, 4)), "invalid argument: grads has width 4, the table's dim is 3"),
    "grads NaN": (lambda t: t.update(K, torch.tensor([[0., 1, 2], [3, float("nan"), 5]])),
                  "invalid argument: gradients contain NaN or Inf: the batch is rejected"),
    "values NaN": (lambda t: t.write(K, torch.full((2, 3), float("inf"))),
                   "invalid argument: values contain NaN or Inf, or magnitudes of 2^64 (1.8446744e19) or more: the batch is "
                   "rejected"),
    "read dim": (lambda t: ops.emb_read(K, 4, t.name), "invalid argument: embedding_dim is 4, the table's dim is 3"),
    "lookup dtype": (lambda t: t.lookup(K.float()), "invalid argument: ids must be int64, got Float"),
    "unknown table": (lambda t: ops.emb_update_with_table("no such table", K, torch.zeros(2, 3)),
                      'not found: no open table named "no such table"'),
    "unknown prefetch": (lambda t: gorec.Prefetch(t, 12345).wait(),
                         'unknown prefetch: no pending prefetch 12345 on table "%s" (never started, already waited '
                         'for, or discarded)'),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_changes_nothing(table, case):
    f, msg = BAD[case]
    before, step = table.export()
    with pytest.raises(RuntimeError) as e:
        f(table)
    assert str(e.value) == (msg % table.name if "%s" in msg else msg)
    after, step2 = table.export()
    assert step2 == step
    for k in before:
        assert torch.equal(before[k], after[k]), k


def test_waiting_twice(table):
    p = table.prefetch(torch.tensor([5, 6, 5]))
    rows = p.wait()
    assert rows.shape == (3, 3) and torch.equal(rows[2], table.read(torch.tensor([5]))[0])
    with pytest.raises(RuntimeError, match="^unknown prefetch: no pending prefetch %d " % p.id):
        p.wait()


def test_closed_table(name):
    t = gorec.Table(name, 2)
    emb = gorec.Embedding(t)
    out = emb(torch.tensor([1, 2]))
    t.close()
    msg = '^not found: no open table named "%s"$' % name
    for f in (lambda: t.read(K), lambda: t.write(K, torch.zeros(2, 2)), lambda: t.update(K, torch.zeros(2, 2)),
              lambda: len(t), lambda: t.step(), lambda: emb(K), lambda: t.close(), lambda: t.export(),
              lambda: t.prefetch(K), lambda: t.delete(K)):
        with pytest.raises(RuntimeError, match=msg):
            f()
    # the graph of a lookup made before the close: its backward reports the closed table
    with pytest.raises(RuntimeError, match="^closed: "):
        out.sum().backward()


def test_recstore_ops_need_a_table():
    # a process without init_embedding_table: the default table is an error, not a crash
    code = ("import torch, gorec\n"
            "try:\n    torch.ops.gorec.emb_read(torch.tensor([1]), 4)\n"
            "except RuntimeError as e:\n    print(e)\n")
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "not found: no default table: call init_embedding_table first or pass table="


def test_create_errors(name):
    with pytest.raises(RuntimeError, match="^invalid argument: "):
        gorec.Table(name, 0)
    t = gorec.Table(name, 2)
    try:
        with pytest.raises(RuntimeError, match='^name taken: a table named "%s" is open$' % name):
            gorec.Table(name, 2)
    finally:
        t.close()


def test_empty_keys(table):
    # the friendlier choice of embedding-ops.md: no keys give [0, dim] rows (RecStore refuses them)
    e = torch.empty(0, dtype=torch.int64)
    step = table.stats()["step"]
    assert table.read(e).shape == (0, 3) and table.lookup(e).shape == (0, 3)
    assert table.prefetch(e).wait().shape == (0, 3)
    table.update(e, torch.empty(0, 3))  # still a step, as in Go
    assert table.stats()["step"] == step + 1


def test_delete_and_len(table):
    assert len(table) == 2
    assert table.delete(torch.tensor([5, 5, 77])) == 1  # 5 once; 77 was never there
    assert len(table) == 1 and table.export()[0]["ids"].tolist() == [1]
    assert torch.equal(table.read(torch.tensor([5])), torch.zeros(1, 3))  # gone: the read default
