#!/usr/bin/env bash
# deploy/gpu-acceptance.sh - the GPU checks of the CUDA backend in one command,
# for a machine with a GPU. One with CUDA and Python with torch but none of
# our Debian libraries: pack a CUDA build with
#   deploy/gpu-bundle.sh build --with-data
# and run there, from the repository copy, after the prefix it prints:
#   . .gpu/env.sh && deploy/gpu-acceptance.sh .gpu/bin OUT
# Runs, each logged under OUT:
#   1. the gpu test suite (tests/gpu/test_cuda);
#   2. the MLP through a local cluster (2 servers, 2 workers, sync, 10 epochs)
#      and the CNN (1 server, 1 worker, 3 epochs), project defaults;
#   3. shardps-bench compute for both models on the CPU and on DEVICE, and
#      PyTorch eager on DEVICE for both (bench/torch/train.py), same batch;
# then prints one table: accuracies against the targets, samples/s, ratios.
#
#   usage: deploy/gpu-acceptance.sh BIN_DIR OUT_DIR [DEVICE]
# BIN_DIR is a build directory or the bundle's bin/; DEVICE defaults to cuda
# (cpu makes a dry run on a machine without a GPU). $SHARDPS_DATA, when set,
# names the dataset directory (the bundle's env.sh sets it); $PYTHON the Python
# with torch (default python3). Exit status: 0 when
# every step ran and every accuracy target holds, 1 otherwise.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 BIN_DIR OUT_DIR [DEVICE]" >&2; exit 2; }
bin=$(cd "$1" && pwd) || exit 2
out=$2
dev=${3:-cuda}
here=$(cd "$(dirname "$0")" && pwd)
data=${SHARDPS_DATA:-/usr/share/datasets/fashion-mnist}
python=${PYTHON:-python3}
mkdir -p "$out" || exit 2
failed=0

# step NAME CMD...: runs CMD with its output in OUT/NAME.log; notes a failure.
step() {
    local name=$1 rc
    shift
    echo "== $name: $*" >&2
    "$@" >"$out/$name.log" 2>&1
    rc=$?
    echo "   exit $rc ($(tail -n 1 "$out/$name.log"))" >&2
    [ "$rc" -eq 0 ] || failed=1
}

step test_cuda "$bin/tests/gpu/test_cuda"
launch=("$bin/deploy/shardps-launch" --data "$data" --device "$dev" --log-level info)
step mlp "${launch[@]}" --servers 2 --workers 2 --model mlp --epochs 10 --summary "$out/mlp.json"
step cnn "${launch[@]}" --servers 1 --workers 1 --model cnn --epochs 3 --summary "$out/cnn.json"
for m in mlp cnn; do
    steps=$([ "$m" = mlp ] && echo 2000 || echo 300)
    for d in $(printf '%s\n' cpu "$dev" | uniq); do
        step "compute_${m}_$d" "$bin/bench/shardps-bench" compute --model "$m" --device "$d" \
            --steps "$steps" --data "$data" --json "$out/compute_${m}_$d.json"
    done
    step "torch_${m}_$dev" "$python" "$here/../bench/torch/train.py" --model "$m" \
        --data "$data" --steps "$steps" --warmup 20 --device "$dev" \
        --out "$out/torch_${m}_$dev.json"
done

python3 - "$out" "$dev" <<'PY' || failed=1
import json, os, sys
out, dev = sys.argv[1], sys.argv[2]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None
ok = True
print("| check | figure | target | met |\n|---|---|---|---|")
for model, epoch, target in (("mlp", 1, 0.82), ("mlp", 10, 0.88), ("cnn", 3, 0.89)):
    s = load(model + ".json")
    acc = s["test_accuracy_per_epoch"][epoch - 1] if s and len(s.get("test_accuracy_per_epoch", [])) >= epoch else None
    met = acc is not None and acc >= target
    ok &= met
    print(f"| {model} {dev} test accuracy, epoch {epoch} | {acc if acc is not None else 'n/a'} | >= {target} | {'yes' if met else 'NO'} |")
for model in ("mlp", "cnn"):
    cpu, gpu = load(f"compute_{model}_cpu.json"), load(f"compute_{model}_{dev}.json")
    torch = load(f"torch_{model}_{dev}.json")
    c = cpu["samples_per_sec"] if cpu else None
    g = gpu["samples_per_sec"] if gpu else None
    t = torch["samples_per_sec"] if torch else None
    fig = " / ".join(str(round(v)) if v else "n/a" for v in (c, g, t))
    print(f"| {model} samples/s: shardps cpu / shardps {dev} / PyTorch {dev} | {fig} | "
          f"{dev} >= 1.0x PyTorch | {round(g / t, 2) if g and t else 'n/a'} |")
sys.exit(0 if ok else 1)
PY
exit "$failed"
