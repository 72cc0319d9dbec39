"""PyTorch twins of the layer models of models/ for bench/layer_models.sh:
resnet.dtf (conv 3x3 without bias, BatchNorm with momentum 0.1 in PyTorch's
convention = dtf's 0.9, eps 1e-3, two residual blocks, global average pool),
transformer.dtf (7x7 patches, a linear embedding plus a learned position,
two post-norm encoder blocks of 4-head attention with key_dim 16 and a
128-unit feed-forward layer, LayerNorm eps 1e-5, mean over patches),
vit.dtf (the same patches and embedding with a learned class token, zeros,
before them and a position embedding for the 17 tokens; two pre-norm blocks
of 4-head attention with dropout 0.1 on the attention weights, as Keras'
MultiHeadAttention(dropout=0.1) and nn.MultiheadAttention(dropout=0.1), and
a 128-unit GELU MLP; a final LayerNorm; the classifier on token 0) and
lstm.dtf (an LSTM of 64 units over the 28 rows, the last output), gru.dtf
(the same with nn.GRU, whose reset gate scales the recurrent product as
TensorFlow 2's reset_after does),
autoencoder.dtf (784-256-64-256-784, relu, sigmoid output, mean squared
error; its "accuracy" is the test set's mean squared error) and mlp.dtf run
in one process (784-256-128-10, dropout 0.2, momentum SGD 0.05 decayed by
0.96 every 1000 steps, gradients clipped to global norm 5, a 0.999 moving
average of the weights for evaluation; batch 100). Same optimizer, learning
rates, batch and data as dtf; Keras' initializers (glorot uniform kernels,
zero biases).

Prints one JSON line: images_per_sec over the timed steps, and the test
accuracy after training (evaluation mode: BatchNorm's moving statistics).
"""
import argparse
import json
import time

import fmnist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["resnet", "transformer", "vit", "lstm", "gru", "autoencoder", "mlp"])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default=fmnist.DEFAULT_DIR)
    a = ap.parse_args()

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)

    def keras_init(module):
        for m in module.modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def bn(c):
        return nn.BatchNorm2d(c, eps=1e-3, momentum=0.1)

    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), bn(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), bn(c)

        def forward(self, x):
            h = F.relu(self.b1(self.c1(x)))
            return F.relu(self.b2(self.c2(h)) + x)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.s1, self.sb1 = nn.Conv2d(1, 16, 3, padding=1, bias=False), bn(16)
            self.r1 = Residual(16)
            self.s2, self.sb2 = nn.Conv2d(16, 32, 3, padding=1, bias=False), bn(32)
            self.r2 = Residual(32)
            self.out = nn.Linear(32, 10)

        def forward(self, x):
            h = x.view(-1, 1, 28, 28)
            h = self.r1(F.relu(self.sb1(self.s1(h))))
            h = F.max_pool2d(h, 2)
            h = self.r2(F.relu(self.sb2(self.s2(h))))
            h = F.max_pool2d(h, 2)
            return self.out(h.mean(dim=(2, 3)))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.att = nn.MultiheadAttention(64, 4, batch_first=True, kdim=64, vdim=64)
            self.n1, self.n2 = nn.LayerNorm(64, eps=1e-5), nn.LayerNorm(64, eps=1e-5)
            self.ff1, self.ff2 = nn.Linear(64, 128), nn.Linear(128, 64)

        def forward(self, x):
            h = self.n1(x + self.att(x, x, x, need_weights=False)[0])
            return self.n2(h + self.ff2(F.relu(self.ff1(h))))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(49, 64)
            self.position = nn.Parameter(torch.randn(16, 64) * 0.02)
            self.b1, self.b2 = Encoder(), Encoder()
            self.out = nn.Linear(64, 10)

        def forward(self, x):
            p = x.view(-1, 4, 7, 4, 7).permute(0, 1, 3, 2, 4).reshape(-1, 16, 49)
            h = self.b2(self.b1(self.embed(p) + self.position))
            return self.out(h.mean(dim=1))

    class PreNormEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(64, eps=1e-5), nn.LayerNorm(64, eps=1e-5)
            self.att = nn.MultiheadAttention(64, 4, dropout=0.1, batch_first=True)
            self.mlp1, self.mlp2 = nn.Linear(64, 128), nn.Linear(128, 64)

        def forward(self, x):
            n = self.n1(x)
            h = x + self.att(n, n, n, need_weights=False)[0]
            return h + self.mlp2(F.gelu(self.mlp1(self.n2(h))))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(49, 64)
            self.class_token = nn.Parameter(torch.zeros(1, 1, 64))
            self.position = nn.Parameter(torch.randn(17, 64) * 0.02)
            self.b1, self.b2 = PreNormEncoder(), PreNormEncoder()
            self.norm = nn.LayerNorm(64, eps=1e-5)
            self.out = nn.Linear(64, 10)

        def forward(self, x):
            p = self.embed(x.view(-1, 4, 7, 4, 7).permute(0, 1, 3, 2, 4).reshape(-1, 16, 49))
            t = torch.cat([self.class_token.expand(p.shape[0], -1, -1), p], dim=1) + self.position
            h = self.norm(self.b2(self.b1(t)))
            return self.out(h[:, 0])

    class Rows(nn.Module):
        """lstm.dtf and gru.dtf: `cell` (nn.LSTM or nn.GRU) of 64 units over
        the 28 rows, a linear classifier on the last output."""
        def __init__(self, cell):
            super().__init__()
            self.rnn = cell(28, 64, batch_first=True)
            self.out = nn.Linear(64, 10)

        def forward(self, x):
            y, _ = self.rnn(x.view(-1, 28, 28))
            return self.out(y[:, -1])

    class Autoencoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.code = nn.Linear(784, 256), nn.Linear(256, 64)
            self.d1, self.d2 = nn.Linear(64, 256), nn.Linear(256, 784)

        def forward(self, x):
            h = F.relu(self.code(F.relu(self.e1(x.view(-1, 784)))))
            return torch.sigmoid(self.d2(F.relu(self.d1(h))))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.h1, self.h2, self.out = nn.Linear(784, 256), nn.Linear(256, 128), nn.Linear(128, 10)

        def forward(self, x):
            h = F.dropout(F.relu(self.h1(x.view(-1, 784))), 0.2, self.training)
            h = F.dropout(F.relu(self.h2(h)), 0.2, self.training)
            return self.out(h)

    model, lr = {"resnet": (ResNet, 0.002), "transformer": (Transformer, 0.001),
                 "vit": (ViT, 0.001),
                 "lstm": (lambda: Rows(nn.LSTM), 0.002), "gru": (lambda: Rows(nn.GRU), 0.002),
                 "autoencoder": (Autoencoder, 0.001),
                 "mlp": (MLP, 0.05)}[a.model]
    model = model()
    keras_init(model)
    autoencoder, mlp = a.model == "autoencoder", a.model == "mlp"
    if mlp:
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1000, gamma=0.96)
        average = [p.detach().clone() for p in model.parameters()]
    else:
        opt = torch.optim.Adam(model.parameters(), lr=lr)
    x_np, y_np = fmnist.load_train(a.data)
    xt_np, yt_np = fmnist.load_train(a.data, split="test")
    order = fmnist.batches(len(x_np), a.batch, seed=1)

    def step():
        idx = next(order)
        xb = torch.from_numpy(fmnist.to_float(x_np[idx]))
        yb = torch.from_numpy(y_np[idx])
        opt.zero_grad(set_to_none=True)
        if autoencoder:
            loss = F.mse_loss(model(xb), xb.view(-1, 784))
        else:
            loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        if mlp:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        if mlp:
            sched.step()
            with torch.no_grad():
                for avg, p in zip(average, model.parameters()):
                    avg.mul_(0.999).add_(p, alpha=0.001)

    model.train()
    for _ in range(a.warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(a.steps - a.warmup):
        step()
    dt = time.perf_counter() - t0
    model.eval()
    if mlp:  # evaluation reads the averaged weights, as dtf's moving_average
        with torch.no_grad():
            for avg, p in zip(average, model.parameters()):
                p.copy_(avg)
    correct = 0
    with torch.no_grad():
        for i in range(0, len(xt_np), 500):
            xb = torch.from_numpy(fmnist.to_float(xt_np[i:i + 500]))
            if autoencoder:  # the summed squared error, as a mean below
                correct += float(((model(xb) - xb.view(-1, 784)) ** 2).mean()) * len(xb)
            else:
                correct += int((model(xb).argmax(1).numpy() == yt_np[i:i + 500]).sum())
    print(json.dumps({
        "framework": "PyTorch " + torch.__version__,
        "images_per_sec": (a.steps - a.warmup) * a.batch / dt,
        "test_accuracy": correct / len(xt_np),
        "rss_mb": fmnist.rss_mb(),
    }))


if __name__ == "__main__":
    main()
