"""PyTorch eager on one GPU: the baseline of `shardps-bench compute --device cuda`.

The models and data loading are the project's PyTorch reference
(../shared/tools/torch-baseline/common.py, passed as --baseline); each step
gathers a batch on the host, copies it to the GPU, runs forward, backward and
an SGD update, and reads the loss (as shardps's step does), so the loop is the
one a PyTorch user writes. Prints one JSON line.

usage: python3 deploy/torch_gpu.py --baseline DIR --model mlp|cnn [--data DIR]
           [--batch 64] [--steps 500] [--warmup 20] [--lr 0.1] [--device cuda]
"""
import argparse
import json
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--baseline", required=True, help="directory of the reference common.py")
ap.add_argument("--model", choices=["mlp", "cnn"], required=True)
ap.add_argument("--data", default=None, help="Fashion-MNIST directory (default: the reference's)")
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--steps", type=int, default=500)
ap.add_argument("--warmup", type=int, default=20)
ap.add_argument("--lr", type=float, default=0.1)
ap.add_argument("--device", default="cuda")
a = ap.parse_args()

sys.path.insert(0, a.baseline)
import common  # noqa: E402

if a.data:
    common.DATA = a.data
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

dev = torch.device(a.device)
Xtr, ytr, _, _ = common.load_fmnist()
torch.manual_seed(1)
model = common.make_models()[a.model]().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=a.lr)
perm = torch.randperm(Xtr.shape[0], generator=torch.Generator().manual_seed(1))
per_epoch = Xtr.shape[0] // a.batch


def step(i):
    idx = perm[(i % per_epoch) * a.batch:(i % per_epoch + 1) * a.batch]
    xb, yb = Xtr[idx].to(dev), ytr[idx].to(dev)
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    return loss.item()


for i in range(a.warmup):
    step(i)
if dev.type == "cuda":
    torch.cuda.synchronize()
t0 = time.perf_counter()
for i in range(a.steps):
    step(a.warmup + i)
if dev.type == "cuda":
    torch.cuda.synchronize()
dt = time.perf_counter() - t0
print(json.dumps(dict(model=a.model, device=a.device, batch=a.batch, steps=a.steps,
                      samples_per_sec=a.steps * a.batch / dt, torch=torch.__version__,
                      gpu=torch.cuda.get_device_name() if dev.type == "cuda" else "")))
