"""bench/torch/reference.py - shardps's bundled models written in PyTorch.

The reference a user would reach for instead of shardps, used by
`shardps-bench compute --torch` (through train.py beside this file) and by
deploy/gpu-acceptance.sh. The models have the layouts of worker/models/*.c: the
same tensors under the same names in the same order (TENSORS), so
flat_params() of a model is laid out as shardps's parameter vector
(`--dump-params`). Initialisation is PyTorch's default, data normalisation is
worker/data.c's.

PyTorch is optional (Debian: `sudo apt-get install python3-torch`): import_torch()
turns its absence into one line saying so. Call set_threads() before it:
Debian's torch links an OpenBLAS that reads OPENBLAS_NUM_THREADS when it is
loaded, which torch.set_num_threads() does not reach.
"""
import gzip
import os
import struct
import sys

DATA = os.environ.get("SHARDPS_DATA", "/usr/share/datasets/fashion-mnist")
MEAN, STD = 0.2860, 0.3530  # worker/data.c: (x/255 - mean) / std
INSTALL_HINT = ("PyTorch is not installed for %s: install it with "
                "`sudo apt-get install python3-torch` (or deploy/install-deps.sh --with-torch)")

# name, shape: the tensor order of worker/models/mlp.c and cnn.c (the MLP's
# default widths; mlp_tensors() gives those of any --hidden).
TENSORS = {
    "mlp": [("fc1.weight", (256, 784)), ("fc1.bias", (256,)),
            ("fc2.weight", (128, 256)), ("fc2.bias", (128,)),
            ("fc3.weight", (10, 128)), ("fc3.bias", (10,))],
    "cnn": [("conv1.weight", (32, 1, 5, 5)), ("conv1.bias", (32,)),
            ("conv2.weight", (64, 32, 5, 5)), ("conv2.bias", (64,)),
            ("fc1.weight", (128, 3136)), ("fc1.bias", (128,)),
            ("fc2.weight", (10, 128)), ("fc2.bias", (10,))],
}


def parse_hidden(text):
    """--hidden "H1,H2,..." as a tuple of widths ("" or None: the default 256,128)."""
    return tuple(int(w) for w in text.split(",")) if text else (256, 128)


def mlp_tensors(hidden=None):
    """The MLP's tensors for hidden widths (a tuple; None: the default)."""
    widths = (784,) + tuple(hidden or (256, 128)) + (10,)
    out = []
    for i in range(len(widths) - 1):
        out += [(f"fc{i + 1}.weight", (widths[i + 1], widths[i])),
                (f"fc{i + 1}.bias", (widths[i + 1],))]
    return out


def set_threads(n):
    """Thread counts for every library torch may load; before import_torch()."""
    for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[v] = str(n)


def import_torch():
    """Returns the torch module, or exits 3 with one line when it is missing."""
    try:
        import torch
    except ImportError:
        sys.stderr.write(INSTALL_HINT % sys.executable + "\n")
        sys.exit(3)
    return torch


def _idx(path):
    """An IDX file of unsigned bytes (gzip or not) as a uint8 tensor."""
    import torch
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    magic = struct.unpack(">I", raw[:4])[0]
    if magic >> 8 != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def _idx_path(data, name):
    for p in (os.path.join(data, name + ".gz"), os.path.join(data, name)):
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{data}: no {name}[.gz] (Debian: dataset-fashion-mnist, or --data DIR)")


def load_split(data, split):
    """Fashion-MNIST split "train" or "t10k": x [N,1,28,28] float32 normalised, y int64."""
    x = _idx(_idx_path(data, f"{split}-images-idx3-ubyte"))
    y = _idx(_idx_path(data, f"{split}-labels-idx1-ubyte"))
    x = ((x.float() / 255.0 - MEAN) / STD).unsqueeze(1).contiguous()
    return x, y.long()


def make_model(name, hidden=None):
    """A fresh MLP (hidden widths: a tuple, None for 256,128) or CNN (PyTorch's
    default initialisation)."""
    import torch.nn as nn
    import torch.nn.functional as F

    class MLP(nn.Module):
        # 784-H1-...-HL-10, ReLU; by default 784-256-128-10: 235,146 parameters.
        # Layers fc1..fc(L+1), registered in order, as worker/models/mlp.c.
        def __init__(self):
            super().__init__()
            widths = (784,) + tuple(hidden or (256, 128)) + (10,)
            self.depth = len(widths) - 1
            for i in range(self.depth):
                setattr(self, f"fc{i + 1}", nn.Linear(widths[i], widths[i + 1]))

        def forward(self, x):
            x = x.reshape(x.shape[0], 784)
            for i in range(1, self.depth):
                x = F.relu(getattr(self, f"fc{i}")(x))
            return getattr(self, f"fc{self.depth}")(x)

    class CNN(nn.Module):
        # conv5x5x32 pad 2-relu-pool2, conv5x5x64 pad 2-relu-pool2,
        # fc 3136-128-relu, fc 128-10: 454,922 parameters
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
            self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
            self.fc1 = nn.Linear(3136, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            # NCHW flatten (c*49 + h*7 + w), as cnn.c's fc1 input
            x = F.relu(self.fc1(x.reshape(x.shape[0], 3136)))
            return self.fc2(x)

    if hidden and name != "mlp":
        raise ValueError(f"{name}: hidden widths are for the mlp")
    model = {"mlp": MLP, "cnn": CNN}[name]()
    got = [(k, tuple(v.shape)) for k, v in model.state_dict().items()]
    want = mlp_tensors(hidden) if name == "mlp" else TENSORS[name]
    assert got == want, f"{name}: tensors {got} differ from worker/models"
    return model


def flat_params(model):
    """The parameters as one float32 vector in shardps's order (--dump-params)."""
    import torch
    return torch.cat([v.detach().reshape(-1).cpu() for v in model.state_dict().values()])


def evaluate(model, x, y, batch=1000):
    """Test accuracy and mean cross-entropy loss."""
    import torch
    import torch.nn.functional as F
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, x.shape[0], batch):
            out = model(x[i:i + batch])
            loss += F.cross_entropy(out, y[i:i + batch], reduction="sum").item()
            correct += (out.argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return correct / x.shape[0], loss / x.shape[0]
