"""Keys on the GPU: every op copies them to the host, works on the table, and gives values on
the caller's device, as the C ABI does. Skipped where torch sees no CUDA device (CI has none;
the device machine runs them)."""
import pytest
import torch

import gorec

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@cuda
def test_ops_with_keys_on_the_gpu(name):
    t = gorec.Table(name, 4, optimizer="sgd", lr=0.5)
    keys = torch.tensor([1, 2, 2, 7], device="cuda")
    rows = t.lookup(keys, train=False)
    assert rows.device.type == "cuda"
    assert torch.equal(rows.cpu(), t.lookup(keys.cpu(), train=False))
    t.write(keys[:2], torch.ones(2, 4, device="cuda"))
    got = t.read(keys)
    assert got.device.type == "cuda"
    assert torch.equal(got[:3].cpu(), torch.ones(3, 4))
    t.update(keys[:1], torch.ones(1, 4, device="cuda"))
    assert torch.equal(t.read(torch.tensor([1])), torch.full((1, 4), 0.5))


@cuda
def test_lookup_backward_on_the_gpu(name):
    t = gorec.Table(name, 4, optimizer="sgd", lr=1.0, initializer="zeros")
    keys = torch.tensor([3, 3, 5], device="cuda")
    rows = t.lookup(keys)
    assert rows.device.type == "cuda" and rows.requires_grad
    rows.sum().backward()
    t.step()
    assert torch.equal(t.read(torch.tensor([3, 5])), torch.tensor([[-2.0] * 4, [-1.0] * 4]))
