"""bench/torch/train.py - the PyTorch loop a user would write for our models.

Trains the MLP or CNN of reference.py in one process on Fashion-MNIST with
plain SGD: each step gathers a batch on the host, moves it to --device, runs
forward, backward and the update, and reads the loss (as a shardps step does).
`shardps-bench compute --torch` runs it for the same model, batch, lr and
steps; deploy/gpu-acceptance.sh with --device cuda. The click model (--model
ctr, --data a click log in the Criteo layout) trains with Adagrad instead: the
rows touched by the batch through their sparse gradient, the MLP densely,
the logistic loss's mean; its steps take the training rows (the file less
its held-out tenth) in a seeded random order.

The strong GPU reference adds --resident (the training set on the device as
normalised float32; each batch one index_select there, the step's indices
drawn on the device from the epoch's permutation) and --graph (the whole
step - gather, forward, loss, backward, SGD - captured once with
torch.cuda.graphs and replayed; no per-step sync: the losses are summed on
the device and read once per epoch). TF32 stays off unless --tf32 1.

After --warmup untimed steps, each epoch of --steps steps (0: the whole
epoch) prints one JSON line: samples, seconds, samples_per_sec,
own_cpu_frac (CPU seconds of this process, all threads, per wall second),
train_loss, and with --eval test_accuracy/test_loss (strict JSON: a figure
that is not finite is null). The last line (also written to --out) adds
the run's settings and torch's version.

usage: python3 bench/torch/train.py --model mlp|cnn|ctr [--hidden H1,H2,...] [--embed-dim 16]
           [--threads 1] [--batch 64]
           [--lr 0.1] [--steps 0] [--warmup 0] [--epochs 1] [--eval] [--seed 1]
           [--data DIR|""] [--device cpu] [--resident] [--graph] [--tf32 0|1]
           [--out FILE] [--check]
--data "" trains on synthetic inputs. --check only says whether torch loads
(exit 3 and one line when it does not).
"""
import argparse
import json
import math
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as ref  # noqa: E402


def strict_json(rec):
    """rec as one line of strict JSON, which has no NaN or Infinity: null."""
    return json.dumps({k: None if isinstance(v, float) and not math.isfinite(v) else v
                       for k, v in rec.items()}, allow_nan=False)


ap = argparse.ArgumentParser(description="PyTorch reference training of shardps's models")
ap.add_argument("--model", choices=sorted(ref.TENSORS), default="mlp")
ap.add_argument("--hidden", default="", help='mlp, ctr: hidden widths "H1,H2,..." (default 256,128)')
ap.add_argument("--embed-dim", type=int, default=16, help="ctr: floats per row")
ap.add_argument("--threads", type=int, default=1, help="CPU threads (BLAS and OpenMP)")
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--lr", type=float, default=0.1)
ap.add_argument("--steps", type=int, default=0, help="timed steps per epoch (0: whole epoch)")
ap.add_argument("--warmup", type=int, default=0, help="untimed steps before the first epoch")
ap.add_argument("--epochs", type=int, default=1)
ap.add_argument("--eval", action="store_true", help="test accuracy after each epoch")
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--data", default=ref.DATA,
                help='Fashion-MNIST directory ("": synthetic); ctr: the click log')
ap.add_argument("--device", default="cpu", help="cpu or cuda")
ap.add_argument("--resident", action="store_true",
                help="keep the training set on the device; gather batches there")
ap.add_argument("--graph", action="store_true",
                help="capture the whole step in a CUDA graph (implies --resident)")
ap.add_argument("--tf32", type=int, choices=(0, 1), default=0,
                help="1: TF32 matmuls and convolutions on the GPU")
ap.add_argument("--out", help="also write the last JSON line to this file")
ap.add_argument("--check", action="store_true", help="only check that torch loads")
a = ap.parse_args()

ref.set_threads(a.threads)
torch = ref.import_torch()
if a.check:
    print(f"torch {torch.__version__}")
    sys.exit(0)
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(a.threads)
dev = torch.device(a.device)
a.resident = a.resident or a.graph
if a.graph and dev.type != "cuda":
    sys.exit("train.py: --graph needs --device cuda")
torch.backends.cuda.matmul.allow_tf32 = bool(a.tf32)
torch.backends.cudnn.allow_tf32 = bool(a.tf32)
ctr = a.model == "ctr"
if ctr and (a.resident or a.eval):
    sys.exit("train.py: --model ctr trains eagerly, without --resident, --graph or --eval")
if ctr:
    rows, x, y, vocab, ntrain = ref.load_ctr(a.data)
    rows, x, y = rows[:ntrain], x[:ntrain], y[:ntrain]
elif a.data:
    x, y = ref.load_split(a.data, "train")
else:  # as shardps-bench compute --data "": 16 batches of fixed inputs
    g = torch.Generator().manual_seed(a.seed)
    x = torch.rand(16 * a.batch, 1, 28, 28, generator=g) - 0.5
    y = torch.arange(16 * a.batch) % 10
torch.manual_seed(a.seed)
hidden = ref.parse_hidden(a.hidden) if a.hidden else None
if ctr:
    model = ref.make_model("ctr", hidden, vocab, a.embed_dim).to(dev)
    opt = torch.optim.Adagrad(model.parameters(), lr=a.lr)  # sparse rows, dense MLP
else:
    model = ref.make_model(a.model, hidden).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
order = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(a.seed))
per_epoch = x.shape[0] // a.batch
steps = a.steps or per_epoch
done = 0


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


def step():
    global done
    k = done % per_epoch
    idx = order[k * a.batch:(k + 1) * a.batch]
    xb, yb = x[idx].to(dev), y[idx].to(dev)
    opt.zero_grad(set_to_none=True)
    if ctr:
        loss = F.binary_cross_entropy_with_logits(model(rows[idx].to(dev), xb), yb)
    else:
        loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    done += 1
    return loss.item()


if a.resident:
    # the set on the device once; the step number on the device selects the
    # batch's slice of the permutation, so nothing is copied per step
    xd, yd, order_d = x.to(dev), y.to(dev), order.to(dev)
    k_d = torch.zeros((), dtype=torch.long, device=dev)
    loss_acc = torch.zeros((), device=dev)
    span = torch.arange(a.batch, device=dev)

    def dev_step():
        idx = order_d[(k_d % per_epoch) * a.batch + span]
        xb, yb = xd.index_select(0, idx), yd.index_select(0, idx)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        loss_acc.add_(loss.detach())
        k_d.add_(1)

    def zero():
        opt.zero_grad(set_to_none=False)

    if a.graph:
        # warm up on a side stream (as torch.cuda.graphs asks), then capture
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                zero()
                dev_step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        zero()
        with torch.cuda.graph(graph):
            zero()
            dev_step()
        run = graph.replay
    else:
        def run():
            zero()
            dev_step()

    def step():  # noqa: F811 - the resident loop's step
        global done
        run()
        done += 1
        return None

    def epoch_loss(n):
        v = loss_acc.item() / n
        loss_acc.zero_()
        return v


def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


for _ in range(a.warmup):
    step()
if a.eval:
    xt, yt = ref.load_split(a.data or ref.DATA, "t10k")
    xt, yt = xt.to(dev), yt.to(dev)
rec = {}
for ep in range(1, a.epochs + 1):
    sync()
    t0, c0 = time.perf_counter(), cpu_s()
    if a.resident:
        loss_acc.zero_()
        for _ in range(steps):
            step()
        sync()
        loss_sum = epoch_loss(1)
    else:
        loss_sum = sum(step() for _ in range(steps))
    sync()
    dt, cpu = time.perf_counter() - t0, cpu_s() - c0
    rec = dict(epoch=ep, samples=steps * a.batch, seconds=round(dt, 6),
               samples_per_sec=steps * a.batch / dt, own_cpu_frac=round(cpu / dt, 3),
               train_loss=loss_sum / steps)
    if a.eval:
        rec["test_accuracy"], rec["test_loss"] = ref.evaluate(model, xt, yt)
    if ep < a.epochs:
        print(strict_json(rec), flush=True)
rec.update(model=a.model, device=a.device, embed_dim=a.embed_dim if ctr else None, resident=a.resident, graph=a.graph, tf32=a.tf32,
           threads=a.threads, batch=a.batch, lr=a.lr,
           steps=steps, warmup=a.warmup,
           data="click log" if ctr else a.data and "fashion-mnist" or "synthetic",
           torch=torch.__version__,
           gpu=torch.cuda.get_device_name() if dev.type == "cuda" else "")
line = strict_json(rec)
print(line, flush=True)
if a.out:
    with open(a.out, "w") as f:
        f.write(line + "\n")
