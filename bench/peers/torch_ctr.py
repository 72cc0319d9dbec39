"""The CTR model of models/ctr.dtf in PyTorch, for bench/embedding.sh: a
sparse nn.Embedding of 2,000,000 x 32 (one table; PyTorch has no ps shards),
26 ids per example side by side, Linear 832 -> 64, ReLU, Linear 64 -> 2,
Adagrad (lr 0.05, initial accumulator 0.1 as TensorFlow's and dtf's), batch
256, random ids and labels drawn once (as dtf's synthetic source).

Prints one JSON line: examples_per_sec over the timed steps only.
"""
import ctr_common


def main():
    a = ctr_common.parse_args()

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    emb = nn.Embedding(a.rows, 32, sparse=True)
    nn.init.normal_(emb.weight, std=0.05)
    hidden, out = nn.Linear(26 * 32, 64), nn.Linear(64, 2)
    dense_params = list(hidden.parameters()) + list(out.parameters())
    # Sparse gradients need their own optimizer instance; Adagrad takes both.
    opt = torch.optim.Adagrad(list(emb.parameters()) + dense_params, lr=0.05,
                              initial_accumulator_value=0.1)
    ids_all = torch.randint(0, a.rows, (ctr_common.EXAMPLES, 26))
    y_all = torch.randint(0, 2, (ctr_common.EXAMPLES,))

    def step(i):
        lo, hi = ctr_common.window(i, a.batch)
        ids, y = ids_all[lo:hi], y_all[lo:hi]
        opt.zero_grad(set_to_none=True)
        h = F.relu(hidden(emb(ids).flatten(1)))
        loss = F.cross_entropy(out(h), y)
        loss.backward()
        opt.step()
        return float(loss)

    ctr_common.run_timed(step, a, "PyTorch " + torch.__version__)


if __name__ == "__main__":
    main()
