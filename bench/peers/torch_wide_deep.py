"""models/wide_deep.dtf in PyTorch, for bench/wide_deep.sh. The ids are made
in the step as dtf makes them (torch.bucketize with right=True: TensorFlow's
Bucketize counts the boundaries <= x); the wide part is a sparse
nn.Embedding(480, 2), zero-initialized, summed over the 12 ids; the deep part
a sparse nn.Embedding(80, 8) (normal, stddev 0.05) beside the features,
Linear 72 -> 64 -> 32 -> 2 with ReLU (Glorot-uniform kernels, zero biases, as
dtf's dense). PyTorch has no FTRL: the wide table's update is TensorFlow's
SparseApplyFtrlV2 written here (learning_rate 0.2, learning_rate_power -0.5,
initial accumulator 0.1, no l1/l2), on the rows of the coalesced sparse
gradient; the deep part takes torch.optim.Adagrad (lr 0.05, initial
accumulator 0.1, eps 0: TensorFlow's ApplyAdagrad).

Prints one JSON line (wide_deep_common.run_timed).
"""
import wide_deep_common as common


def main():
    a = common.parse_args()

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    # Subnormal floats flushed to zero, as TensorFlow does by default.
    torch.set_flush_denormal(True)
    torch.manual_seed(1)
    x_all, y_all = (torch.from_numpy(v) for v in common.data(a))
    boundaries = torch.tensor(common.BOUNDARIES, dtype=torch.float32)
    cat_offsets = torch.from_numpy(common.CATEGORICAL_OFFSETS)
    cross_offsets = torch.from_numpy(common.CROSS_OFFSETS)

    wide = nn.Embedding(common.VOCAB, 2, sparse=True)
    nn.init.zeros_(wide.weight)
    deep_emb = nn.Embedding(80, 8, sparse=True)
    nn.init.normal_(deep_emb.weight, std=0.05)
    layers = [nn.Linear(72, 64), nn.Linear(64, 32), nn.Linear(32, 2)]
    for layer in layers:
        nn.init.xavier_uniform_(layer.weight)
        nn.init.zeros_(layer.bias)
    deep_params = list(deep_emb.parameters()) + [p for l in layers for p in l.parameters()]
    adagrad = torch.optim.Adagrad(deep_params, lr=0.05, initial_accumulator_value=0.1, eps=0.0)
    lr, accum, linear = 0.2, torch.full_like(wide.weight, 0.1), torch.zeros_like(wide.weight)

    def ftrl_sparse(grad):
        # TensorFlow's SparseApplyFtrlV2 at lr_power -0.5, l1 = l2 = 0.
        g = grad.coalesce()
        rows, gv = g.indices()[0], g.values()
        with torch.no_grad():
            var, acc, lin = wide.weight[rows], accum[rows], linear[rows]
            new_acc = acc + gv * gv
            lin = lin + gv - (new_acc.sqrt() - acc.sqrt()) / lr * var
            wide.weight[rows] = -lin / (new_acc.sqrt() / lr)
            accum[rows], linear[rows] = new_acc, lin

    def step(i):
        lo, hi = i * a.batch, (i + 1) * a.batch
        x, y = x_all[lo:hi], y_all[lo:hi]
        b = torch.bucketize(x, boundaries, right=True)
        categorical = b + cat_offsets
        crossed = b[:, 0::2] * 10 + b[:, 1::2] + cross_offsets
        ids = torch.cat([categorical, crossed], dim=1)
        adagrad.zero_grad(set_to_none=True)
        wide.weight.grad = None
        h = torch.cat([deep_emb(categorical).flatten(1), x], dim=1)
        h = F.relu(layers[0](h))
        h = F.relu(layers[1](h))
        logits = wide(ids).sum(1) + layers[2](h)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        ftrl_sparse(wide.weight.grad)
        adagrad.step()
        return loss.item(), (logits.argmax(1) == y).float().mean().item()

    common.run_timed(step, a, "PyTorch " + torch.__version__)


if __name__ == "__main__":
    main()
