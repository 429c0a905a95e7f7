#!/usr/bin/env bash
# shardps-bench produces its tables: `comm` with one tiny payload and `train`
# with a tiny --max-steps sweep write CSV and markdown files with the expected
# columns and one row per configuration (allreduce included: ring members in
# `comm`, `--mode allreduce` jobs without servers in `train`); `compute` on a
# few steps writes its JSON with every field, and with --torch the PyTorch
# reference's figure (or one line saying how to install PyTorch, when it is
# absent). No timing is judged here: the bench measures, it does not assert
# (see README, Benchmarks). `checkpoint` on one short round writes its row
# with the checkpoints it counted.
. "$(dirname "$0")/lib.sh"

BENCH=$SPS_BUILD/bench/shardps-bench
[ -x "$BENCH" ] || fail "no $BENCH"

# header FILE EXPECTED: the CSV's first line is exactly EXPECTED.
header() {
    local got
    got=$(head -1 "$1")
    [ "$got" = "$2" ] || fail "$1: header '$got', expected '$2'"
}
# rows FILE N: the CSV has N data rows.
rows() {
    local got
    got=$(($(wc -l <"$1") - 1))
    [ "$got" -eq "$2" ] || fail "$1: $got rows, expected $2: $(cat "$1")"
}

"$BENCH" comm --sizes 4K --servers 1,2 --inflight 1,2 --reps 1 --seconds 0.05 \
    --allreduce-workers 2 --out "$TMP/comm" >"$TMP/comm.log" 2>&1 ||
    fail "bench comm failed: $(tail -5 "$TMP/comm.log")"
header "$TMP/comm/comm.csv" \
    "payload_bytes,payload,servers,inflight,mode,ps_rounds_per_sec,ps_goodput_gbs,zmq_rounds_per_sec,zmq_goodput_gbs,ratio,ratio_min,ratio_max,ps_cpu_ms_per_round,zmq_cpu_ms_per_round,ps_faults_per_round,zmq_faults_per_round"
rows "$TMP/comm/comm.csv" 4
# Every row measured both sides: no empty cell.
grep -q ',,' "$TMP/comm/comm.csv" && fail "comm.csv has unmeasured cells: $(cat "$TMP/comm/comm.csv")"
grep -q '^| 4096 | 4K | 2 | 2 | async |' "$TMP/comm/comm.md" || fail "comm.md lacks a row: $(cat "$TMP/comm/comm.md")"
header "$TMP/comm/allreduce.csv" \
    "payload_bytes,payload,workers,shardps_busbw_gbs,mpi_busbw_gbs,ratio,ratio_min,ratio_max"
rows "$TMP/comm/allreduce.csv" 1
# shardps's ring measured (the MPI column depends on OpenMPI being installed).
grep -Eq '^4096,4K,2,[0-9.]+,' "$TMP/comm/allreduce.csv" ||
    fail "allreduce.csv lacks the ring's figure: $(cat "$TMP/comm/allreduce.csv")"

"$BENCH" train --workers 1,2 --modes sync,async,sync:k/n,allreduce --max-steps 8 --epochs 1 \
    --out "$TMP/train" >"$TMP/train.log" 2>&1 ||
    fail "bench train failed: $(tail -5 "$TMP/train.log")"
header "$TMP/train/train.csv" \
    "mode,workers,status,samples_per_sec,speedup,time_to_target_s,final_accuracy,wall_seconds,bytes_per_step,staleness_mean,staleness_p99,staleness_max,pushes_dropped"
rows "$TMP/train/train.csv" 6 # sync:k/n and allreduce have no 1-worker run
[ "$(grep -c ',ok,' "$TMP/train/train.csv")" -eq 6 ] || fail "a training run failed: $(cat "$TMP/train/train.csv")"
grep -q '^sync:1/2,2,ok,' "$TMP/train/train.csv" || fail "sync:k/n did not become sync:1/2"
grep -q '^allreduce,2,ok,' "$TMP/train/train.csv" || fail "allreduce did not run"
expect "$TMP/train/runs/allreduce_w2.json" "d['mode'] == 'allreduce' and d['servers'] == 0" \
    "the allreduce job had servers"
header "$TMP/train/train_epochs.csv" "mode,workers,epoch,elapsed_s,test_accuracy"
rows "$TMP/train/train_epochs.csv" 6 # one evaluation per run, at its last step
grep -q '^| sync | 1 | ok |' "$TMP/train/train.md" || fail "train.md lacks a row: $(cat "$TMP/train/train.md")"

# compute: one worker alone, a few steps; every JSON field there (no PyTorch).
"$BENCH" compute --model mlp --steps 5 --warmup 1 --profile-steps 2 \
    --json "$TMP/compute.json" >"$TMP/compute.log" 2>&1 ||
    fail "bench compute failed: $(tail -5 "$TMP/compute.log")"
for key in model device threads batch steps samples_per_sec cpu_samples_per_sec \
    time_split gather copy_in forward backward copy_out update torch_samples_per_sec \
    torch_cpu_samples_per_sec cpu_ratio_vs_torch \
    ratio_vs_torch; do
    grep -q "\"$key\": " "$TMP/compute.json" || fail "compute.json lacks $key: $(cat "$TMP/compute.json")"
done
grep -q '"model": "mlp", "device": "cpu", "threads": 1,' "$TMP/compute.json" ||
    fail "compute.json: $(cat "$TMP/compute.json")"
grep -Eq '"samples_per_sec": [0-9.e+]+,' "$TMP/compute.json" || fail "no samples/s: $(cat "$TMP/compute.json")"
grep -Eq '"forward": [0-9.e+-]+,' "$TMP/compute.json" || fail "no time split: $(cat "$TMP/compute.json")"
grep -q '^| mlp | cpu | 1 | 64 | 5 |' "$TMP/compute.log" || fail "no markdown row: $(cat "$TMP/compute.log")"
# --device cuda where no GPU answers: one line, non-zero exit.
if "$BENCH" compute --device cuda --steps 1 --profile-steps 0 >"$TMP/cuda.out" 2>"$TMP/cuda.err"; then
    echo "a GPU answered: --device cuda ran"
else
    [ "$(wc -l <"$TMP/cuda.err")" -eq 1 ] || fail "--device cuda without a GPU: $(cat "$TMP/cuda.err")"
fi
"$BENCH" compute --model resnet >/dev/null 2>&1 && fail "compute took --model resnet"
# --torch without PyTorch (a Python that skips its site packages): one line
# saying how to install it, before any training.
printf '#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n' >"$TMP/python-no-torch"
chmod +x "$TMP/python-no-torch"
"$BENCH" compute --torch --python "$TMP/python-no-torch" >"$TMP/notorch.out" 2>"$TMP/notorch.err" &&
    fail "--torch ran without PyTorch"
{ [ "$(wc -l <"$TMP/notorch.err")" -eq 1 ] && grep -q 'install python3-torch' "$TMP/notorch.err"; } ||
    fail "--torch without PyTorch: $(cat "$TMP/notorch.err")"
# --torch with PyTorch (optional: Debian's python3-torch): our reference's figures.
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    "$BENCH" compute --model mlp --steps 5 --warmup 1 --profile-steps 0 --torch \
        --json "$TMP/torch.json" >"$TMP/torch.log" 2>&1 ||
        fail "bench compute --torch failed: $(tail -5 "$TMP/torch.log")"
    { grep -Eq '"torch_samples_per_sec": [0-9.e+]+,' "$TMP/torch.json" &&
        grep -Eq '"torch_version": "[0-9]' "$TMP/torch.json"; } ||
        fail "compute --torch: $(cat "$TMP/torch.json")"
else
    echo "skipped compute --torch: PyTorch not installed (apt-get install python3-torch)"
fi

# checkpoint: one round of 60 steps, without and with a checkpoint every 20.
"$BENCH" checkpoint --reps 1 --max-steps 60 --every 20 --out "$TMP/ck" >"$TMP/ck.log" 2>&1 ||
    fail "bench checkpoint failed: $(tail -5 "$TMP/ck.log")"
header "$TMP/ck/checkpoint.csv" \
    "round,without_samples_per_sec,with_samples_per_sec,ratio,without_cpu_s,with_cpu_s,cpu_ratio,checkpoints,checkpoint_mb"
rows "$TMP/ck/checkpoint.csv" 2 # the round and the median
grep -Eq '^1,[0-9]+,[0-9]+,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,3,[0-9.]+$' "$TMP/ck/checkpoint.csv" ||
    fail "checkpoint.csv: $(cat "$TMP/ck/checkpoint.csv")"

# The logs of every job the bench started, for sanitizer reports.
cp "$TMP"/train/runs/*.log "$TMP"/comm/*.log "$TMP"/ck/runs/*.log "$TMP/" 2>/dev/null
check_logs
echo ok
