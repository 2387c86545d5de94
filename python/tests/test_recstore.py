"""RecStore's op set, called as RecStore's users call it: on the default table."""
import torch

from conftest import run_python

RECSTORE = """
import torch, gorec
ops = torch.ops.gorec
assert ops.init_embedding_table("recstore", 100, 4)
keys = torch.tensor([1, 2, 3])
assert torch.equal(ops.emb_read(keys, 4), torch.zeros(3, 4))   # absent ids read as zeros
ops.emb_write(keys, torch.ones(3, 4))
pid = ops.emb_prefetch(torch.tensor([3, 9]))
assert torch.equal(ops.emb_wait_result(pid, 4), torch.tensor([[1.] * 4, [0.] * 4]))
ops.emb_update(keys, torch.ones(3, 4))                        # SGD, lr 0.01
ops.emb_update_with_table("recstore", torch.tensor([1]), torch.ones(1, 4))
print(ops.emb_read(torch.tensor([1, 2]), 4)[:, 0].tolist(), ops.emb_len("recstore"))
"""


def test_recstore_op_set():
    out = run_python(RECSTORE)
    assert out.returncode == 0, out.stderr
    # exactly float32's 1 - 0.01 and 1 - 0.01 - 0.01
    want = [float(torch.tensor(0.98, dtype=torch.float32)), float(torch.tensor(0.99, dtype=torch.float32))]
    got = eval(out.stdout.split("]")[0] + "]")
    assert got == [float(torch.tensor(1.) - 0.01 - 0.01), float(torch.tensor(1.) - 0.01)], (got, want)
    assert out.stdout.split("]")[1].strip() == "3"


def test_shutdown_with_live_tables():
    # two tables alive (one with a prefetch never waited for, one with pending gradients) at exit
    code = ("import torch, gorec\n"
            "a = gorec.Table('a', 8, optimizer='sparse_adam')\n"
            "b = gorec.Table('b', 4, optimizer='adagrad')\n"
            "a.lookup(torch.arange(10000)).sum().backward()\n"
            "p = b.prefetch(torch.arange(50000))\n"
            "print(gorec.table_names())\n")
    out = run_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['a', 'b']" and out.stderr == ""


def test_shutdown_after_a_prefetch():
    # The rows a wait gave Python were also held by the prefetch's state, which the worker
    # thread released last: at exit, with torch 2.15, that release needed the GIL from a
    # finalizing interpreter and aborted the process (7 runs in 12). The race needs several runs.
    code = ("import torch, gorec\n"
            "t = gorec.Table('p', 4)\n"
            "rows = t.prefetch(torch.tensor([3, 9])).wait()\n")
    for _ in range(8):
        out = run_python(code)
        assert out.returncode == 0, out.stderr
