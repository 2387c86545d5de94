"""TorchScript: the ops and the modules run from scripted code as they run eagerly."""
import torch

import gorec


class Model(torch.nn.Module):
    def __init__(self, table):
        super().__init__()
        self.emb = gorec.Embedding(table)
        self.bag = gorec.EmbeddingBag(table, mode="sum")
        self.name = table.name

    def forward(self, ids):
        rows = torch.ops.gorec.emb_read(ids, 4, self.name)
        return self.emb(ids).sum(1) + self.bag(ids.view(-1, 1)).sum(1) + rows.sum(1)


def test_scripted_module(name):
    t = gorec.Table(name, 4, seed=9, optimizer="sgd", lr=0.5)
    try:
        m = Model(t)
        s = torch.jit.script(m)
        ids = torch.tensor([3, 4, 3])
        m(ids)  # inserts the ids: emb_read gave zeros for them before
        want = m(ids)
        got = s(ids)
        torch.testing.assert_close(got, want)
        before = t.read(ids).clone()
        got.sum().backward()  # through the scripted lookups: the table gets the gradient
        assert t.step()
        # d(sum)/d(row) is 1 per occurrence in emb and in bag: 2 for 4, 4 for the repeated 3
        torch.testing.assert_close(t.read(ids), before - 0.5 * torch.tensor([[4.], [2.], [4.]]))
    finally:
        t.close()


@torch.jit.script
def read_write(keys: torch.Tensor, values: torch.Tensor, table: str) -> torch.Tensor:
    torch.ops.gorec.emb_write(keys, values, table)
    pid = torch.ops.gorec.emb_prefetch(keys, table)
    return torch.ops.gorec.emb_wait_result(pid, values.size(1), table)


def test_scripted_function(name):
    t = gorec.Table(name, 2)
    try:
        v = torch.tensor([[1., 2.], [3., 4.]])
        assert torch.equal(read_write(torch.tensor([-2**63, 2**63 - 1]), v, name), v)
    finally:
        t.close()
