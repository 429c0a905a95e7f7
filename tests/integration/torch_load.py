#!/usr/bin/env python3
"""tests/integration/torch_load.py - a shardps model file, read without shardps.

Usage: torch_load.py FILE mlp[:H1,H2,...]|cnn DATA_DIR [EXPECTED_ACCURACY]

Always: parses the safetensors file by hand (json + struct: 8-byte length,
JSON header, raw little-endian float32) and checks that its tensors are the
reference model's state_dict names and shapes, contiguous and F32. Then, when
torch imports: loads it with load_state_dict(strict=True) into the reference
nn.Module of bench/torch/reference.py (the MLP, of any --hidden, and the CNN), evaluates the
Fashion-MNIST test set and checks the accuracy within 0.001 of EXPECTED.
Prints "torch: skipped: REASON" when torch is absent. Exit 0 = all checks ran
passed, 1 = a check failed.
"""
import gzip
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench", "torch"))
import reference as ref  # noqa: E402  the reference nn.Modules; torch only when built
MEAN, STD = 0.2860, 0.3530  # worker/data.c's normalisation


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def read_safetensors(path):
    """Returns (header dict without __metadata__, metadata, data bytes)."""
    blob = open(path, "rb").read()
    if len(blob) < 8:
        fail("%s: shorter than 8 bytes" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        fail("%s: header length %d beyond the file" % (path, n))
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    at = 0
    for b, e, k in spans:
        if b != at or e < b:
            fail("%s: tensor %s at [%d,%d] not contiguous after %d" % (path, k, b, e, at))
        at = e
    if at != len(data):
        fail("%s: tensors cover %d of %d data bytes" % (path, at, len(data)))
    return header, meta, data


def check_format(path, model):
    """model: "mlp", "mlp:H1,H2,..." or "cnn"."""
    header, meta, data = read_safetensors(path)
    name, _, widths = model.partition(":")
    tensors = ref.mlp_tensors(ref.parse_hidden(widths)) if name == "mlp" else ref.TENSORS[name]
    want = {k: list(v) for k, v in tensors}
    if set(header) != set(want):
        fail("names %s, want %s" % (sorted(header), sorted(want)))
    for k, v in header.items():
        if v["dtype"] != "F32" or v["shape"] != want[k]:
            fail("%s: dtype %s shape %s, want F32 %s" % (k, v["dtype"], v["shape"], want[k]))
        numel = 1
        for d in v["shape"]:
            numel *= d
        if v["data_offsets"][1] - v["data_offsets"][0] != 4 * numel:
            fail("%s: byte size does not match its shape" % k)
    print("format: ok: %d tensors %s, metadata %s" % (len(header), model, meta))
    return header, data


def idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    (magic,) = struct.unpack(">I", raw[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return dims, raw[4 + 4 * ndim:]


def main():
    if len(sys.argv) < 4:
        print(__doc__)
        sys.exit(2)
    path, model, data_dir = sys.argv[1:4]
    name, _, widths = model.partition(":")
    hidden = ref.parse_hidden(widths) if widths else None
    expected = float(sys.argv[4]) if len(sys.argv) > 4 else None
    header, data = check_format(path, model)
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means no torch
        print("torch: skipped: cannot import torch (%s)" % str(e).splitlines()[0])
        return

    net = ref.make_model(name, hidden)
    state = {}
    for k, v in header.items():
        b, e = v["data_offsets"]
        state[k] = torch.frombuffer(bytearray(data[b:e]), dtype=torch.float32).reshape(v["shape"])
    net.load_state_dict(state, strict=True)
    net.eval()
    (n, h, w), pix = idx(os.path.join(data_dir, "t10k-images-idx3-ubyte.gz"))
    _, lab = idx(os.path.join(data_dir, "t10k-labels-idx1-ubyte.gz"))
    x = torch.frombuffer(bytearray(pix), dtype=torch.uint8).float().reshape(n, 1, h, w)
    x = (x / 255.0 - MEAN) / STD
    y = torch.frombuffer(bytearray(lab), dtype=torch.uint8).long()
    correct = 0
    with torch.no_grad():
        for i in range(0, n, 1000):
            correct += int((net(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum())
    acc = correct / n
    print("torch: %s test_accuracy=%.6f (torch %s)" % (model, acc, torch.__version__))
    if expected is not None and abs(acc - expected) > 0.001:
        fail("torch accuracy %.6f, shardps reported %.6f" % (acc, expected))


if __name__ == "__main__":
    main()
