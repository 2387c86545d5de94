"""Parity with torch.nn.Embedding(sparse=True) and torch's sparse optimizers over 20 steps:
duplicate ids in a batch, ids first seen late (step 10 on) and int64's extreme ids. The torch
side gets the gorec rows' initial values (a function of seed and id: read_default="initial"
reads them without inserting). Tolerance: float32 rounding of the same arithmetic (rtol 1e-5,
atol 1e-6); the update rules are those of cgotorch/csrc/table/math.cc.h, written after torch's."""
import pytest
import torch

import gorec

VOCAB = [0, 1, 2, 7, 9, -5, 123456789012, 1 << 62, 2**63 - 1, -2**63]
EARLY = VOCAB[:6]  # ids of steps 0-9; steps 10-19 draw from all of VOCAB
DIM, STEPS, BATCH = 6, 20, 12

CASES = {
    "sgd": (dict(optimizer="sgd", lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    "adagrad": (dict(optimizer="adagrad", lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, eps=1e-10),
                lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, eps=1e-10)),
    "sparse_adam": (dict(optimizer="sparse_adam", lr=0.01, betas=(0.8, 0.99), eps=1e-8),
                    lambda p: torch.optim.SparseAdam(p, lr=0.01, betas=(0.8, 0.99), eps=1e-8)),
}


def batches(seed):
    g = torch.Generator().manual_seed(seed)
    for s in range(STEPS):
        pool = EARLY if s < 10 else VOCAB
        pos = torch.randint(len(pool), (BATCH,), generator=g)
        pos[1] = pos[0]  # a duplicate in every batch
        yield torch.tensor([pool[i] for i in pos]), torch.randn(BATCH, DIM, generator=g)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("fused", [False, True])
def test_parity_with_torch(name, case, fused):
    gconf, topt = CASES[case]
    t = gorec.Table(name, DIM, seed=11, read_default="initial", **gconf)
    try:
        vocab = torch.tensor(VOCAB)
        ref = torch.nn.Embedding(len(VOCAB), DIM, sparse=True)
        with torch.no_grad():
            ref.weight.copy_(t.read(vocab))  # the initial rows, nothing inserted
        assert len(t) == 0
        opt = topt(ref.parameters())
        index = {v: i for i, v in enumerate(VOCAB)}
        emb = gorec.Embedding(t, fused=fused)
        for ids, w in batches(5):
            (emb(ids) * w).sum().backward()
            if not fused:
                assert t.step()
            opt.zero_grad()
            (ref(torch.tensor([index[int(i)] for i in ids])) * w).sum().backward()
            opt.step()
        assert t.stats()["step"] == STEPS
        torch.testing.assert_close(t.read(vocab), ref.weight.detach(), rtol=1e-5, atol=1e-6)
        contents, _ = t.export()
        order = [index[int(i)] for i in contents["ids"]]
        for sname in t.state_names():
            want = opt.state[ref.weight][sname].to_dense()[order]
            torch.testing.assert_close(contents["state." + sname], want, rtol=1e-5, atol=1e-6)
    finally:
        t.close()


def test_embedding_bag_matches_torch(name):
    t = gorec.Table(name, 4, seed=2, read_default="initial", optimizer="sgd", lr=0.5)
    try:
        ids = torch.tensor([5, -2**63, 5, 2**63 - 1, 3])
        offsets = torch.tensor([0, 2, 2])
        vocab = torch.tensor([5, -2**63, 2**63 - 1, 3])
        ref = torch.nn.EmbeddingBag(4, 4, mode="mean", sparse=True)
        with torch.no_grad():
            ref.weight.copy_(t.read(vocab))
        bag = gorec.EmbeddingBag(t, mode="mean")
        out = bag(ids, offsets)
        want = ref(torch.tensor([0, 1, 0, 2, 3]), offsets)
        torch.testing.assert_close(out, want)
        out.pow(2).sum().backward()
        want.pow(2).sum().backward()
        t.step()
        torch.optim.SGD(ref.parameters(), lr=0.5).step()
        torch.testing.assert_close(t.read(vocab), ref.weight.detach())
    finally:
        t.close()


def test_padding_idx_and_max_norm_match_torch(name):
    t = gorec.Table(name, 4, seed=3, read_default="initial", optimizer="sgd", lr=0.5)
    try:
        vocab = torch.tensor([10, 20, 30])
        ref = torch.nn.Embedding(3, 4, padding_idx=1, max_norm=1.0, sparse=True)
        with torch.no_grad():
            ref.weight.copy_(t.read(vocab) * 2)  # norms of about 4: renormalised
            t.write(vocab[[0, 2]], ref.weight[[0, 2]].clone())
            ref.weight[1] = 0  # torch's padding row; gorec never stores the padding id
        emb = gorec.Embedding(t, padding_idx=20, max_norm=1.0)
        w = torch.randn(4, 4, generator=torch.Generator().manual_seed(1))
        out = emb(torch.tensor([10, 20, 30, 10]))
        want = ref(torch.tensor([0, 1, 2, 0]))
        torch.testing.assert_close(out, want)
        (out * w).sum().backward()
        (want * w).sum().backward()
        t.step()
        torch.optim.SGD(ref.parameters(), lr=0.5).step()
        assert len(t) == 2
        torch.testing.assert_close(t.read(vocab[[0, 2]]), ref.weight.detach()[[0, 2]])
    finally:
        t.close()
