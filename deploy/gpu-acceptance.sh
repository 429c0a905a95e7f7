#!/usr/bin/env bash
# deploy/gpu-acceptance.sh - the GPU checks of the CUDA backend in one command,
# for a machine with a GPU. One with CUDA and Python with torch but none of
# our Debian libraries: pack a CUDA build with
#   deploy/gpu-bundle.sh build --with-data --with-torch
# and run this there, from the repository copy, after the prefix it prints.
# Runs, each logged under OUT, each step at most 10 minutes:
#   1. the gpu test suite (tests/gpu/test_cuda);
#   2. the MLP through a local cluster (2 servers, 2 workers, sync, 10 epochs)
#      and the CNN (1 server, 1 worker, 3 epochs), project defaults;
#   3. shardps-bench compute for both models on the CPU (batch 64), and on
#      DEVICE at batch 64, 256 and 1024, each with --tf32 0 and 1, beside
#      PyTorch on DEVICE eager and strong (--resident --graph) in the same
#      call (compute --torch), its results page under OUT/pages; batch 64
#      with the step queued by hand (--cuda-graph 0), to show what the graph
#      saves; and the CNN at each batch in FP32 with its convolutions on cuDNN
#      (--conv cudnn; the sweep's runs are im2col + GEMM, the default);
#   4. the suite again under compute-sanitizer memcheck (when installed),
#      whose reports are counted apart from the suite's one deliberate
#      out-of-memory allocation;
# then prints one table: accuracies against the targets, memcheck, samples/s
# against both references (target: >= 1.0x strong in FP32), and the CNN's
# batch scaling (target: batch 1024 >= 5x batch 64's samples/s).
#
#   usage: deploy/gpu-acceptance.sh BIN_DIR OUT_DIR [DEVICE]
# BIN_DIR is a build directory or the bundle's bin/; DEVICE defaults to cuda
# (cpu makes a dry run on a machine without a GPU: no sweep, no memcheck).
# $SHARDPS_DATA, when set, names the dataset directory (the bundle's env.sh
# sets it); $PYTHON the Python with torch (default python3). Exit status: 0
# when every step ran and every target holds, 1 otherwise.
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

limit=600 # seconds any one step may take: a hung step fails, the rest still run

# step NAME CMD...: runs CMD with its output in OUT/NAME.log; notes a failure.
step() {
    local name=$1 rc
    shift
    echo "== $name: $*" >&2
    timeout "$limit" "$@" >"$out/$name.log" 2>&1
    rc=$?
    echo "   exit $rc ($(tail -n 1 "$out/$name.log"))" >&2
    [ "$rc" -eq 0 ] || failed=1
}

step test_cuda "$bin/tests/gpu/test_cuda"
launch=("$bin/deploy/shardps-launch" --data "$data" --device "$dev" --log-level info)
step mlp "${launch[@]}" --servers 2 --workers 2 --model mlp --epochs 10 --summary "$out/mlp.json"
step cnn "${launch[@]}" --servers 1 --workers 1 --model cnn --epochs 3 --summary "$out/cnn.json"
compute=("$bin/bench/shardps-bench" compute --data "$data" --python "$(command -v "$python")"
    --torch-script "$here/../bench/torch/train.py" --out "$out/pages")
for m in mlp cnn; do
    steps=$([ "$m" = mlp ] && echo 2000 || echo 300)
    step "compute_${m}_cpu" "${compute[@]}" --model "$m" --device cpu --steps "$steps" \
        --json "$out/compute_${m}_cpu.json"
    [ "$dev" != cpu ] || continue
    for b in 64 256 1024; do
        for t in 0 1; do
            step "compute_${m}_${dev}_b${b}_tf${t}" "${compute[@]}" --model "$m" --device "$dev" \
                --batch "$b" --tf32 "$t" --steps "$steps" --torch \
                --json "$out/compute_${m}_${dev}_b${b}_tf${t}.json"
        done
    done
    # what replaying the step as one CUDA graph saves: the smallest batch queued by hand
    step "compute_${m}_${dev}_b64_nograph" "${compute[@]}" --model "$m" --device "$dev" \
        --batch 64 --cuda-graph 0 --steps "$steps" --json "$out/compute_${m}_${dev}_b64_nograph.json"
    [ "$m" = cnn ] || continue
    # cuDNN's convolutions against im2col + GEMM's (the sweep's tf32 0 runs,
    # whose PyTorch figures serve both)
    for b in 64 256 1024; do
        step "compute_cnn_${dev}_b${b}_cudnn" "${compute[@]}" --model cnn --device "$dev" \
            --batch "$b" --conv cudnn --steps "$steps" --json "$out/compute_cnn_${dev}_b${b}_cudnn.json"
    done
done

# memcheck last, as it is the slowest: every child the suite forks is checked
# too. The suite asks for more memory than any GPU has once, on purpose: that
# API error is counted apart from the others, which must be none.
if [ "$dev" != cpu ] && command -v compute-sanitizer >/dev/null; then
    timeout "$limit" compute-sanitizer --tool memcheck --target-processes all \
        --print-limit 100 "$bin/tests/gpu/test_cuda" >"$out/memcheck.log" 2>&1
    echo "   memcheck exit $? ($(grep -c 'ERROR SUMMARY' "$out/memcheck.log") summaries)" >&2
fi

python3 - "$out" "$dev" <<'PY' || failed=1
import json, os, re, sys
out, dev = sys.argv[1], sys.argv[2]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None
def r(v, nd=0):
    return "n/a" if v is None else (round(v) if nd == 0 else round(v, nd))
ok = True
print("| check | figure | target | met |\n|---|---|---|---|")
for model, epoch, target in (("mlp", 1, 0.82), ("mlp", 10, 0.88), ("cnn", 3, 0.89)):
    s = load(model + ".json")
    acc = s["test_accuracy_per_epoch"][epoch - 1] if s and len(s.get("test_accuracy_per_epoch", [])) >= epoch else None
    met = acc is not None and acc >= target
    ok &= met
    print(f"| {model} {dev} test accuracy, epoch {epoch} | {r(acc, 4)} | >= {target} | {'yes' if met else 'NO'} |")
if dev != "cpu":
    try:
        log = open(os.path.join(out, "memcheck.log"), errors="replace").read()
        total = sum(int(n) for n in re.findall(r"ERROR SUMMARY: (\d+) error", log))
        oom = len(re.findall(r"Program hit cudaErrorMemoryAllocation", log))
        other = total - oom
        met = "ERROR SUMMARY" in log and other == 0
        print(f"| memcheck reports: deliberate out-of-memory / other | {oom} / {other} | 0 other | {'yes' if met else 'NO'} |")
    except OSError:
        met = False
        print("| memcheck | not run (no compute-sanitizer) | 0 other | NO |")
    ok &= met
for model in ("mlp", "cnn"):
    cpu = load(f"compute_{model}_cpu.json")
    print(f"| {model} samples/s, shardps cpu, batch 64 | {r(cpu and cpu['samples_per_sec'])} | - | - |")
    if dev == "cpu":
        continue
    sps = {}
    for b in (64, 256, 1024):
        for t in (0, 1):
            g = load(f"compute_{model}_{dev}_b{b}_tf{t}.json") or {}
            v, e, st = g.get("samples_per_sec"), g.get("torch_samples_per_sec"), g.get("torch_strong_samples_per_sec")
            sps[b, t] = v
            ratio = v / st if v and st else None
            met = ratio is not None and ratio >= 1.0
            if t == 0:
                ok &= met
            split = g.get("time_split", {})
            ms = " / ".join(str(r(split.get(k) and 1e3 * split[k], 3)) for k in ("kernels", "copies", "host"))
            print(f"| {model} b{b} tf32={t} samples/s: shardps / PyTorch eager / strong (ms kernels / copies / host) "
                  f"| {r(v)} / {r(e)} / {r(st)} ({ms}) | {'>= 1.0x strong' if t == 0 else 'reported'} "
                  f"| {r(ratio, 2)}{' (tf32)' if t else ''}{' NO' if t == 0 and not met else ''} |")
    g = load(f"compute_{model}_{dev}_b64_nograph.json") or {}
    v = g.get("samples_per_sec")
    print(f"| {model} b64 samples/s, steps queued by hand (--cuda-graph 0) | {r(v)} | reported "
          f"| {r(v / sps[64, 0], 2) if v and sps.get((64, 0)) else 'n/a'}x the graph |")
    if model == "cnn":
        for b in (64, 256, 1024):
            v = (load(f"compute_cnn_{dev}_b{b}_cudnn.json") or {}).get("samples_per_sec")
            gemm = sps.get((b, 0))
            print(f"| cnn b{b} fp32 samples/s, convolutions on cuDNN (--conv cudnn) | {r(v)} | reported "
                  f"| {r(v / gemm, 2) if v and gemm else 'n/a'}x im2col + GEMM |")
        lo, hi = sps.get((64, 0)), sps.get((1024, 0))
        scale = hi / lo if lo and hi else None
        met = scale is not None and scale >= 5.0
        ok &= met
        print(f"| cnn samples/s batch 1024 / batch 64 (fp32) | {r(scale, 2)} | >= 5 | {'yes' if met else 'NO'} |")
sys.exit(0 if ok else 1)
PY
exit "$failed"
