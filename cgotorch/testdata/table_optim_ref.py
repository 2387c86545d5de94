# Reference numbers for FTRL-Proximal (TF ApplyFtrlV2 formula), row-wise Adagrad (FBGEMM) and
# AdamW (torch.optim.AdamW on each touched row, global step).
import numpy as np, torch, math
np.set_printoptions(precision=9)
DIM = 5
IDS = [10, 11, 12, 13]
init = np.array([[0.5, -0.25, 1.0, 0.125, -1.5],
                 [-0.75, 0.3, 0.0, 2.0, 0.6],
                 [1.25, -1.0, 0.4, -0.2, 0.05],
                 [0.9, 0.9, 0.9, 0.9, 0.9]], dtype=np.float32)
# steps: list of (ids (indices into IDS), grads)
steps = [
    ([0, 1, 0], [[1, -2, 3, 0.5, -0.25], [0.5, 0.5, -0.5, 1, 2], [-0.5, 1, 0.25, 0.5, 0.75]]),
    ([1, 2], [[0, 0, 0, 0, 0], [2, -1, 0.5, 0.25, -3]]),
    ([0, 2, 2], [[0.3, -0.7, 1.1, -0.2, 0.4], [1, 1, 1, 1, 1], [-0.5, 0.25, 0, 2, -1]]),
    ([0, 1], [[-1, 0.5, 0.5, -2, 1], [1.5, -0.5, 0.25, 0.75, -1]]),
]
def summed(ids, grads):
    out = {}
    for i, g in zip(ids, grads):
        out[i] = out.get(i, 0) + np.array(g, dtype=np.float64)
    return out

def ftrl(alpha, beta, l1, l2, acc0, lr_at):
    # tf.raw_ops.ApplyFtrlV2 with lr_power=-0.5, l2_shrinkage=0; McMahan's beta folded in as
    # Keras does (l2_tf = l2/2 + beta/(2 lr)) so quadratic = (beta + sqrt(n))/lr + l2:
    # McMahan et al. 2013, Algorithm 1 (lambda2 not doubled).
    w = init.astype(np.float64).copy(); z = np.zeros_like(w); n = np.full_like(w, acc0)
    res = []
    for s, (ids, grads) in enumerate(steps):
        lr = lr_at.get(s, alpha) if s in lr_at else (res and cur_lr or alpha)
        cur_lr = lr
        for r, g in summed(ids, grads).items():
            nn = n[r] + g * g
            z[r] = z[r] + g - (np.sqrt(nn) - np.sqrt(n[r])) / lr * w[r]
            quad = (beta + np.sqrt(nn)) / lr + l2
            w[r] = np.where(np.abs(z[r]) > l1, (np.sign(z[r]) * l1 - z[r]) / quad, 0.0)
            n[r] = nn
        res.append((w.copy(), z.copy(), n.copy()))
    return res

def rowwise(lr0, lr_decay, acc0, eps, lr_at):
    w = init.astype(np.float64).copy(); acc = np.full((len(IDS), 1), acc0)
    res = []; lr = lr0
    for s, (ids, grads) in enumerate(steps):
        lr = lr_at.get(s, lr); t = s + 1
        clr = lr / (1 + (t - 1) * lr_decay)
        for r, g in summed(ids, grads).items():
            acc[r] += np.mean(g * g)                      # FBGEMM: momentum1 += sum(g^2)/D
            w[r] -= clr / (np.sqrt(acc[r]) + eps) * g     # multiplier = lr / (sqrt(m1) + eps)
        res.append((w.copy(), acc.copy()))
    return res

def adamw(lr0, b1, b2, eps, wd, lr_at):
    params = [torch.nn.Parameter(torch.tensor(init[r])) for r in range(len(IDS))]
    opts = [torch.optim.AdamW([p], lr=lr0, betas=(b1, b2), eps=eps, weight_decay=wd) for p in params]
    res = []; lr = lr0
    for s, (ids, grads) in enumerate(steps):
        lr = lr_at.get(s, lr)
        for r, g in summed(ids, grads).items():
            o, p = opts[r], params[r]
            for gr in o.param_groups: gr['lr'] = lr
            st = o.state[p]
            if len(st) == 0:
                st['step'] = torch.tensor(float(s)); st['exp_avg'] = torch.zeros(DIM); st['exp_avg_sq'] = torch.zeros(DIM)
            else:
                st['step'] = torch.tensor(float(s))
            p.grad = torch.tensor(g, dtype=torch.float32)
            o.step()
        res.append((np.stack([p.detach().numpy().copy() for p in params]),
                    np.stack([opts[r].state[params[r]].get('exp_avg', torch.zeros(DIM)).numpy().copy() for r in range(4)]),
                    np.stack([opts[r].state[params[r]].get('exp_avg_sq', torch.zeros(DIM)).numpy().copy() for r in range(4)])))
    return res

def show(name, arr):
    rows = ", ".join("{" + ", ".join("%.9g" % x for x in row) + "}" for row in arr)
    print("%s: {%s}," % (name, rows))

f = ftrl(0.1, 1.0, 0.01, 0.1, 0.1, {2: 0.05})
print("FTRL"); show("w", f[-1][0]); show("z", f[-1][1]); show("n", f[-1][2])
rw = rowwise(0.1, 0.1, 0.2, 1e-3, {2: 0.05})
print("RW"); show("w", rw[-1][0]); show("sum", rw[-1][1])
a = adamw(0.05, 0.8, 0.95, 1e-3, 0.3, {2: 0.02})
print("AdamW"); show("w", a[-1][0]); show("m", a[-1][1]); show("v", a[-1][2])
