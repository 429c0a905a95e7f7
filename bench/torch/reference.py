"""bench/torch/reference.py - shardps's bundled models written in PyTorch.

The reference a user would reach for instead of shardps, used by
`shardps-bench compute --torch` (through train.py beside this file) and by
deploy/gpu-acceptance.sh. The models have the layouts of worker/models/*.c: the
same tensors under the same names in the same order (TENSORS), so
flat_params() of a model is laid out as shardps's parameter vector
(`--dump-params`). Initialisation is PyTorch's default, data normalisation is
worker/data.c's.

The click model (ctr) keeps its rows in one nn.Embedding of the click log's
vocabulary (every distinct key of the file, each a row) with sparse
gradients, beside the MLP; its rows start uniform in +-1/sqrt(E), as
shardps's (ps_job_row_bound), and are not in flat_params(). load_ctr() reads
the Criteo TSV as worker/ctr_data.c does.

PyTorch is optional (Debian: `sudo apt-get install python3-torch`): import_torch()
turns its absence into one line saying so. Call set_threads() before it:
Debian's torch links an OpenBLAS that reads OPENBLAS_NUM_THREADS when it is
loaded, which torch.set_num_threads() does not reach.
"""
import gzip
import os
import struct
import sys

import math

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


CTR_NUM, CTR_CAT = 13, 26  # worker/ctr_data.h: numeric and categorical fields
CTR_TEST_FRACTION = 0.1  # worker/ctr_job.h: the held-out tail


def ctr_tensors(hidden=None, dim=16):
    """The ctr model's dense tensors (worker/models/ctr.c): fc1 takes the 26
    rows then the 13 numeric fields, the last layer gives one logit."""
    widths = (CTR_CAT * dim + CTR_NUM,) + tuple(hidden or (256, 128)) + (1,)
    return [t for i in range(len(widths) - 1)
            for t in ((f"fc{i + 1}.weight", (widths[i + 1], widths[i])),
                      (f"fc{i + 1}.bias", (widths[i + 1],)))]


TENSORS["ctr"] = ctr_tensors()


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


def _ctr_line(line, keys, num):
    """One line of a click log into keys and num (worker/ctr_data.c:
    ps_ctr_key, sign(x)*log1p(|x|) with missing 0); its label, or None when
    it is malformed."""
    cols = line.rstrip("\n").split("\t")
    if len(cols) != 1 + CTR_NUM + CTR_CAT or cols[0] not in ("0", "1"):
        return None
    try:
        for c in cols[1:1 + CTR_NUM]:
            v = int(c) if c else 0
            num.append(math.copysign(math.log1p(abs(v)), v))
        for f, c in enumerate(cols[1 + CTR_NUM:]):
            if c and len(c) != 8:
                return None
            keys.append((f + 1) << 40 | (int(c, 16) if c else 1 << 32))
    except ValueError:
        return None
    return float(cols[0])


def load_ctr(path):
    """A click log in the Criteo layout (plain or gzip) with the training
    rows first: (rows [N,26] int64 row indices into the vocabulary, num
    [N,13] float32, label [N] float32, V the vocabulary's size, the number of
    training rows). The vocabulary is every distinct key of the file."""
    import torch
    keys, num, label = [], [], []
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        for line in f:
            k, n = len(keys), len(num)
            y = _ctr_line(line, keys, num)
            if y is None:  # skipped, as the C reader does
                del keys[k:], num[n:]
                continue
            label.append(y)
    if not label:
        raise ValueError(f"{path}: no samples")
    vocab = {}
    rows = [vocab.setdefault(k, len(vocab)) for k in keys]
    n = len(label)
    train = n - int(math.floor(n * CTR_TEST_FRACTION + 0.5))
    return (torch.tensor(rows, dtype=torch.int64).reshape(n, CTR_CAT),
            torch.tensor(num, dtype=torch.float32).reshape(n, CTR_NUM),
            torch.tensor(label, dtype=torch.float32), len(vocab), train)


def make_model(name, hidden=None, vocab=0, dim=16):
    """A fresh MLP (hidden widths: a tuple, None for 256,128), CNN (PyTorch's
    default initialisation) or ctr (vocab rows of dim floats)."""
    import torch
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

    class CTR(nn.Module):
        # x = [the 26 rows, the 13 numeric fields] -> H1 -> ... -> HL -> 1, ReLU;
        # the rows one table of the vocabulary, sparse gradients (Adagrad's)
        def __init__(self):
            super().__init__()
            widths = (CTR_CAT * dim + CTR_NUM,) + tuple(hidden or (256, 128)) + (1,)
            self.depth = len(widths) - 1
            for i in range(self.depth):
                setattr(self, f"fc{i + 1}", nn.Linear(widths[i], widths[i + 1]))
            self.rows = nn.Embedding(vocab, dim, sparse=True)
            nn.init.uniform_(self.rows.weight, -1 / math.sqrt(dim), 1 / math.sqrt(dim))

        def forward(self, rows, num):
            x = torch.cat([self.rows(rows).reshape(rows.shape[0], -1), num], 1)
            for i in range(1, self.depth):
                x = F.relu(getattr(self, f"fc{i}")(x))
            return getattr(self, f"fc{self.depth}")(x).squeeze(1)

    if hidden and name == "cnn":
        raise ValueError(f"{name}: hidden widths are for the mlp and the ctr")
    model = {"mlp": MLP, "cnn": CNN, "ctr": CTR}[name]()
    got = [(k, tuple(v.shape)) for k, v in model.state_dict().items() if k != "rows.weight"]
    want = {"mlp": mlp_tensors(hidden), "cnn": TENSORS["cnn"],
            "ctr": ctr_tensors(hidden, dim)}[name]
    assert got == want, f"{name}: tensors {got} differ from worker/models"
    return model


def flat_params(model):
    """The dense parameters as one float32 vector in shardps's order
    (--dump-params; a ctr's rows are not in it)."""
    import torch
    return torch.cat([v.detach().reshape(-1).cpu() for k, v in model.state_dict().items()
                      if k != "rows.weight"])


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
