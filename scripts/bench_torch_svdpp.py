"""Times in python3-torch nn/bench_movielens_test.go's models: biased matrix factorisation and
SVD++ (the implicit term an nn.EmbeddingBag(mode="sum", sparse=True) with per-sample weights
|N(u)|^-1/2 over each user's rated items, ~61k ids a batch), batch 512, dim 128, SparseAdam
(lr 0.003) on pre-sized tables, on the same synthetic data shape (671 users, 9,066 items,
20 + Exp(100) items a user, Zipf(1.05, 8) item popularity).

Prints `BENCH torch_MovieLensMF <ns> ns/op`, `BENCH torch_MovieLensSVDpp <ns> ns/op` and their
ratio. Run with Debian's /usr/bin/python3 (scripts/bench.sh does, with its thread count).
"""
import argparse
import time

import torch

USERS, ITEMS, DIM, BATCH = 671, 9066, 128, 512


def data(gen):
    pop = 1.0 / (torch.arange(ITEMS, dtype=torch.float64) + 8) ** 1.05
    rated, ratings = [], []
    for u in range(USERS):
        n = min(20 + int(torch.empty(1).exponential_(1 / 100, generator=gen)), ITEMS // 2)
        items = torch.multinomial(pop, n, replacement=False, generator=gen)
        rated.append(items)
        for it in items.tolist():
            ratings.append((u, it, float(torch.randint(1, 10, (1,), generator=gen)) / 2))
    order = torch.randperm(len(ratings), generator=gen).tolist()
    return [ratings[i] for i in order], rated


class Model(torch.nn.Module):
    def __init__(self, svdpp):
        super().__init__()
        self.user_bias = torch.nn.Embedding(USERS, 1, sparse=True)
        self.item_bias = torch.nn.Embedding(ITEMS, 1, sparse=True)
        self.user = torch.nn.Embedding(USERS, DIM, sparse=True)
        self.item = torch.nn.Embedding(ITEMS, DIM, sparse=True)
        for e in (self.user_bias, self.item_bias):
            torch.nn.init.zeros_(e.weight)
        for e in (self.user, self.item):
            torch.nn.init.normal_(e.weight, std=0.1)
        self.implicit = None
        if svdpp:
            self.implicit = torch.nn.EmbeddingBag(ITEMS, DIM, mode="sum", sparse=True)
            torch.nn.init.normal_(self.implicit.weight, std=0.01)

    def forward(self, users, items, bag_ids, offsets, scale):
        p = self.user(users)
        if self.implicit is not None:
            p = p + self.implicit(bag_ids, offsets, per_sample_weights=scale)
        pred = (self.user_bias(users) + self.item_bias(items)).reshape(-1) + 3.5
        return pred + (p * self.item(items)).sum(1)


def batch_input(batch, rated, svdpp):
    users = torch.tensor([r[0] for r in batch])
    items = torch.tensor([r[1] for r in batch])
    values = torch.tensor([r[2] for r in batch], dtype=torch.float32)
    if not svdpp:
        return users, items, values, None, None, None
    bags = [rated[r[0]] for r in batch]
    lengths = torch.tensor([len(b) for b in bags])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
    scale = torch.repeat_interleave(lengths.float().rsqrt(), lengths)
    return users, items, values, torch.cat(bags), offsets, scale


def step_ns(svdpp, ratings, rated, min_time):
    torch.manual_seed(0)
    m = Model(svdpp)
    opt = torch.optim.SparseAdam(list(m.parameters()), lr=0.003)
    nb = len(ratings) // BATCH
    k = [0]

    def step():
        b = k[0] % nb
        k[0] += 1
        users, items, values, bag_ids, offsets, scale = batch_input(ratings[b * BATCH:(b + 1) * BATCH], rated, svdpp)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(m(users, items, bag_ids, offsets, scale), values)
        loss.backward()
        opt.step()

    for _ in range(20):
        step()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_time:
        step()
        n += 1
    return (time.perf_counter() - t0) / n * 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--time", type=float, default=2.0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    ratings, rated = data(torch.Generator().manual_seed(3))
    mf = step_ns(False, ratings, rated, args.time)
    svdpp = step_ns(True, ratings, rated, args.time)
    print(f"BENCH torch_MovieLensMF {mf:.0f} ns/op")
    print(f"BENCH torch_MovieLensSVDpp {svdpp:.0f} ns/op")
    print(f"BENCH torch_movielens_svdpp_over_mf {svdpp / mf:.2f} x")


if __name__ == "__main__":
    main()
