# The step rule PyTorch follows, which embedding's doc.go states for Update and Step: an
# optimizer step counts when the parameter has a gradient, even one with no rows (an empty
# sparse gradient), and does nothing when it has none (grad None: after zero_grad(set_to_none)
# or before any backward pass). Run with Debian's /usr/bin/python3 (torch 1.13); the output is
# step_rule.txt, which TestStepRuleMatchesPyTorch reads.
import torch

e = torch.nn.Embedding(4, 2, sparse=True)
o = torch.optim.SparseAdam(e.parameters(), lr=0.1)


def step():
    return int(o.state[e.weight]["step"]) if o.state[e.weight] else 0


e(torch.tensor([1])).sum().backward()
o.step()
print("rows", step())
o.zero_grad(set_to_none=False)  # (torch 1.13 fails on an empty gradient accumulated into None)
e(torch.tensor([], dtype=torch.long)).sum().backward()
assert e.weight.grad._nnz() == 0
before = (e.weight.detach().clone(), o.state[e.weight]["exp_avg"].clone())
o.step()
unchanged = torch.equal(before[0], e.weight) and torch.equal(before[1], o.state[e.weight]["exp_avg"])
print("empty", step(), "unchanged" if unchanged else "changed")
o.zero_grad(set_to_none=True)
o.step()
print("none", step())
