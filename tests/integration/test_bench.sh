#!/usr/bin/env bash
# shardps-bench produces its results: `comm` with one tiny payload and `train`
# with a tiny --max-steps sweep write a results page (OUT/comm.md, train.md:
# a header with the command, commit, date, machine and load, then the tables,
# and the plots where gnuplot is installed) and CSV files with the expected
# columns and one row per configuration (allreduce included: ring members in
# `comm`, `--mode allreduce` jobs without servers in `train`); `comm --secure`
# into the same folder leaves the plain run's allreduce.csv as it was; `compute` on a
# few steps writes its JSON with every field, and with --torch the PyTorch
# reference's figure (or one line saying how to install PyTorch, when it is
# absent), and with --out its results page; so does `compute --model ctr`
# on a click log it generates (compute_ctr.md). No timing is judged here: the
# bench measures, it does not assert (docs/benchmarks.md). `checkpoint` on one
# short round writes its row with the checkpoints it counted; `scale` with 1 and 2 workers one row each,
# from the uncompressed copy of the data set it made. `compress` on a short
# sweep writes its rows with the bytes each codec saved; `memory` its row
# of a small table. `train --model ctr`
# on a tiny click log it generates (sync, dedicated and colocated, 1 and 2
# workers) writes train_ctr.md and its CSVs: every row ok with the keys of
# a worker step from the summary, its bytes per worker link per step within
# 30 % of the theory (over 8 steps the initial values and the evaluations
# weigh), and a row per worker count in the comparison
# table; bad ctr flags are usage errors. Each on its page.
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
    "payload_bytes,payload,servers,inflight,mode,ps_rounds_per_sec,ps_goodput_gbs,zmq_rounds_per_sec,zmq_goodput_gbs,ratio,ratio_min,ratio_max,ps_cpu_ms_per_round,zmq_cpu_ms_per_round,ps_faults_per_round,zmq_faults_per_round,cpu_ratio,floor_cpu_ratio"
rows "$TMP/comm/comm.csv" 4
# Every row measured both sides: no empty cell.
grep -q ',,' "$TMP/comm/comm.csv" && fail "comm.csv has unmeasured cells: $(cat "$TMP/comm/comm.csv")"
results_page "$TMP/comm/comm.md" comm
grep -q '^| 4096 | 4K | 2 | 2 | async |' "$TMP/comm/comm.md" || fail "comm.md lacks a row: $(cat "$TMP/comm/comm.md")"
grep -q '^### Allreduce bus bandwidth' "$TMP/comm/comm.md" || fail "comm.md lacks the allreduce table"
if command -v gnuplot >/dev/null; then
    grep -q '^!\[comm_goodput\](comm_goodput.png)$' "$TMP/comm/comm.md" && [ -s "$TMP/comm/comm_goodput.png" ] ||
        fail "comm.md does not show its plot: $(grep -n png "$TMP/comm/comm.md")"
fi
header "$TMP/comm/allreduce.csv" \
    "payload_bytes,payload,workers,shardps_busbw_gbs,mpi_busbw_gbs,ratio,ratio_min,ratio_max"
rows "$TMP/comm/allreduce.csv" 1
# shardps's ring measured (the MPI column depends on OpenMPI being installed).
grep -Eq '^4096,4K,2,[0-9.]+,' "$TMP/comm/allreduce.csv" ||
    fail "allreduce.csv lacks the ring's figure: $(cat "$TMP/comm/allreduce.csv")"
# A --secure run into the same folder writes its own page and leaves the
# plain run's allreduce table as it was.
cp "$TMP/comm/allreduce.csv" "$TMP/allreduce.csv"
"$BENCH" comm --secure --sizes 4K --servers 1 --inflight 1 --reps 1 --seconds 0.05 \
    --out "$TMP/comm" >"$TMP/comm_secure.log" 2>&1 ||
    fail "bench comm --secure failed: $(tail -5 "$TMP/comm_secure.log")"
rows "$TMP/comm/comm_secure.csv" 1
cmp -s "$TMP/allreduce.csv" "$TMP/comm/allreduce.csv" ||
    fail "comm --secure rewrote allreduce.csv: $(cat "$TMP/comm/allreduce.csv")"

"$BENCH" train --workers 1,2 --modes sync,async,sync:k/n,allreduce --max-steps 8 --epochs 1 \
    --out "$TMP/train" >"$TMP/train.log" 2>&1 ||
    fail "bench train failed: $(tail -5 "$TMP/train.log")"
header "$TMP/train/train.csv" \
    "mode,workers,scenario,status,samples_per_sec,speedup,time_to_target_s,samples_to_target,final_accuracy,wall_seconds,bytes_per_step,staleness_mean,staleness_p99,staleness_max,pushes_dropped,load_1min"
rows "$TMP/train/train.csv" 6 # sync:k/n and allreduce have no 1-worker run
[ "$(grep -c ',ok,' "$TMP/train/train.csv")" -eq 6 ] || fail "a training run failed: $(cat "$TMP/train/train.csv")"
grep -q '^sync:1/2,2,plain,ok,' "$TMP/train/train.csv" || fail "sync:k/n did not become sync:1/2"
grep -q '^allreduce,2,plain,ok,' "$TMP/train/train.csv" || fail "allreduce did not run"
expect "$TMP/train/runs/allreduce_w2.json" "d['mode'] == 'allreduce' and d['servers'] == 0" \
    "the allreduce job had servers"
header "$TMP/train/train_epochs.csv" "mode,workers,scenario,eval,elapsed_s,step,test_accuracy"
rows "$TMP/train/train_epochs.csv" 6 # one evaluation per run, at its last step
results_page "$TMP/train/train.md" train
grep -q '^| sync | 1 | plain | ok |' "$TMP/train/train.md" || fail "train.md lacks a row: $(cat "$TMP/train/train.md")"

# --seeds: each mode over seeds 1 and 2, the accuracy's spread and its gap to sync.
"$BENCH" train --seeds 2 --workers 2 --modes sync,async --max-steps 8 --epochs 1 \
    --out "$TMP/seeds" >"$TMP/seeds.log" 2>&1 ||
    fail "bench train --seeds failed: $(tail -5 "$TMP/seeds.log")"
header "$TMP/seeds/train_seeds.csv" \
    "mode,workers,runs,not_ok,mean_accuracy,min_accuracy,max_accuracy,points_below_sync"
grep -Eq '^sync,2,2,0,[0-9.]+,[0-9.]+,[0-9.]+,0.00$' "$TMP/seeds/train_seeds.csv" &&
    grep -Eq '^async,2,2,0,[0-9.]+,[0-9.]+,[0-9.]+,-?[0-9.]+$' "$TMP/seeds/train_seeds.csv" ||
    fail "train_seeds.csv: $(cat "$TMP/seeds/train_seeds.csv")"
[ -s "$TMP/seeds/runs/async_w2_2.json" ] || fail "no summary of async's seed 2: $(ls "$TMP/seeds/runs")"
results_page "$TMP/seeds/train_seeds.md" train

# train --model ctr: the parameter-server rows on a click log of 3000 lines
# it generates (the ring rows are the ctr tests' and the acceptance run's).
"$BENCH" train --model ctr --ctr-rows 3000 --workers 1,2 --modes sync --placement dedicated,colocated \
    --max-steps 8 --eval-every 4 --out "$TMP/ctr" >"$TMP/ctr.log" 2>&1 ||
    fail "bench train --model ctr failed: $(tail -5 "$TMP/ctr.log")"
[ -s "$TMP/ctr/runs/ctr_clicks.txt" ] && grep -q '^rows=3000 ' "$TMP/ctr/runs/ctr_datagen.log" ||
    fail "no click log generated: $(ls "$TMP/ctr/runs")"
header "$TMP/ctr/train_ctr.csv" \
    "mode,workers,scenario,status,samples_per_sec,time_to_target_s,samples_to_target,final_auc,final_logloss,keys_per_worker_step,server_rows,sent_mb,received_mb,measured_on,theory_mb,measured_vs_theory,link_max_mb,bound_ms,step_ms,efficiency,cores_busy,job_cpu_share,compute_share,bound,load_1min"
rows "$TMP/ctr/train_ctr.csv" 4
# every row ok, with a worker step's keys, bytes near the theory and a bound
awk -F, 'NR > 1 && !($4 == "ok" && $10 > 0 && $11 > 0 && $16 > 0.9 && $16 < 1.3 &&
         $14 == "summary" && $24 ~ /^(CPU|not CPU)$/) { bad = 1 } END { exit bad }' \
    "$TMP/ctr/train_ctr.csv" || fail "train_ctr.csv: $(cat "$TMP/ctr/train_ctr.csv")"
grep -q '^sync colocated,2,plain,ok,' "$TMP/ctr/train_ctr.csv" || fail "no colocated ctr row"
expect "$TMP/ctr/runs/sync_w2.json" "d['model'] == 'ctr' and 0 < d['test_auc'] <= 1" \
    "the ctr job has no test AUC"
header "$TMP/ctr/train_ctr_vs.csv" \
    "workers,ps_mode,keys_per_worker_step,theory_ps_mb,theory_ps_server_mb,theory_ps_colocated_mb,theory_dense_mb,theory_allgather_mb,theory_dense_vs_ps,theory_allgather_vs_ps,measured_ps_mb,measured_dense_mb,measured_allgather_mb,measured_dense_vs_ps,measured_allgather_vs_ps,ps_samples_per_sec,dense_samples_per_sec,allgather_samples_per_sec,ps_vs_dense_speed,ps_vs_allgather_speed,ps_time_to_target_s,dense_time_to_target_s,allgather_time_to_target_s"
rows "$TMP/ctr/train_ctr_vs.csv" 2
grep -Eq '^2,sync,[0-9.]+(,[0-9.]+){5},[0-9.]+,1.0,[0-9.]+,' "$TMP/ctr/train_ctr_vs.csv" ||
    fail "train_ctr_vs.csv: $(cat "$TMP/ctr/train_ctr_vs.csv")"
header "$TMP/ctr/train_ctr_epochs.csv" "mode,workers,scenario,eval,elapsed_s,step,test_auc"
results_page "$TMP/ctr/train_ctr.md" train
grep -q '^| sync | 1 | plain | ok |' "$TMP/ctr/train_ctr.md" &&
    grep -q '^### Where the parameter server wins' "$TMP/ctr/train_ctr.md" ||
    fail "train_ctr.md: $(cat "$TMP/ctr/train_ctr.md")"
for bad in "--modes allreduce" "--modes mpi" "--ctr-rows 0" "--ring-steps -1" "--join"; do
    # shellcheck disable=SC2086 # one flag and its value
    "$BENCH" train --model ctr $bad --out "$TMP/ctrbad" >/dev/null 2>&1
    [ $? = 2 ] || fail "train --model ctr $bad was not a usage error"
done
"$BENCH" train --modes allreduce:dense --out "$TMP/ctrbad" >/dev/null 2>&1
[ $? = 2 ] || fail "allreduce:dense without --model ctr was not a usage error"

# compute: one worker alone, a few steps; every JSON field there (no PyTorch).
"$BENCH" compute --model mlp --steps 5 --warmup 1 --profile-steps 2 \
    --json "$TMP/compute.json" --out "$TMP/compute" >"$TMP/compute.log" 2>&1 ||
    fail "bench compute failed: $(tail -5 "$TMP/compute.log")"
results_page "$TMP/compute/compute.md" compute
grep -q '^| mlp | cpu | 0 | n/a | n/a | n/a | 1 | 64 | 5 |' "$TMP/compute/compute.md" || fail "no row on compute.md"
for key in model device threads batch steps samples_per_sec cpu_samples_per_sec \
    time_split gather copy_in forward backward copy_out update torch_samples_per_sec \
    torch_cpu_samples_per_sec cpu_ratio_vs_torch kernels copies host tf32 cuda_graph \
    torch_strong_samples_per_sec ratio_vs_torch_strong ratio_vs_torch fuse_dense conv; do
    grep -q "\"$key\": " "$TMP/compute.json" || fail "compute.json lacks $key: $(cat "$TMP/compute.json")"
done
grep -q '"model": "mlp", "device": "cpu", "threads": 1,' "$TMP/compute.json" ||
    fail "compute.json: $(cat "$TMP/compute.json")"
grep -Eq '"samples_per_sec": [0-9.e+]+,' "$TMP/compute.json" || fail "no samples/s: $(cat "$TMP/compute.json")"
grep -Eq '"forward": [0-9.e+-]+,' "$TMP/compute.json" || fail "no time split: $(cat "$TMP/compute.json")"
grep -q '^| mlp | cpu | 0 | n/a | n/a | n/a | 1 | 64 | 5 |' "$TMP/compute.log" || fail "no markdown row: $(cat "$TMP/compute.log")"
# --device cuda where no GPU answers: one line, non-zero exit.
if "$BENCH" compute --device cuda --steps 1 --profile-steps 0 >"$TMP/cuda.out" 2>"$TMP/cuda.err"; then
    echo "a GPU answered: --device cuda ran"
else
    [ "$(wc -l <"$TMP/cuda.err")" -eq 1 ] || fail "--device cuda without a GPU: $(cat "$TMP/cuda.err")"
fi
"$BENCH" compute --model resnet >/dev/null 2>&1 && fail "compute took --model resnet"
"$BENCH" compute --tf32 2 >/dev/null 2>&1 && fail "compute took --tf32 2"
# TF32 is a GPU mode: on the CPU one line says so, before any step
"$BENCH" compute --device cpu --tf32 1 --steps 1 >/dev/null 2>"$TMP/tf32.err" &&
    fail "compute --tf32 1 ran on the CPU"
grep -q "tf32 1: the cpu backend has no TF32" "$TMP/tf32.err" || fail "--tf32 1 on cpu: $(cat "$TMP/tf32.err")"
# so is cuDNN: one line, whether the build has it (then the CPU has not) or not
"$BENCH" compute --device cpu --model cnn --data "" --conv cudnn --steps 1 >/dev/null 2>"$TMP/conv.err" &&
    fail "compute --conv cudnn ran on the CPU"
{ [ "$(wc -l <"$TMP/conv.err")" -eq 1 ] && grep -q "conv cudnn.*no cuDNN" "$TMP/conv.err"; } ||
    fail "--conv cudnn on cpu: $(cat "$TMP/conv.err")"
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
# compute --model ctr: on a click log it generates (and removes), its page
# compute_ctr.md; with PyTorch, the reference's figure on the same log.
ctr_compute="compute --model ctr --ctr-rows 3000 --batch 32 --steps 5 --warmup 1"
# shellcheck disable=SC2086 # the words of ctr_compute
"$BENCH" $ctr_compute --profile-steps 2 --json "$TMP/ctr.json" --out "$TMP/computectr" \
    >"$TMP/ctr.log" 2>&1 || fail "bench compute --model ctr failed: $(tail -5 "$TMP/ctr.log")"
results_page "$TMP/computectr/compute_ctr.md" compute
grep -q '^| ctr | cpu | 0 | n/a | n/a | n/a | 1 | 32 | 5 |' "$TMP/computectr/compute_ctr.md" || fail "no row on compute_ctr.md"
{ grep -q '"model": "ctr", "device": "cpu", "threads": 1,' "$TMP/ctr.json" &&
    grep -q '"data": "click log", "samples_per_sec": [0-9]' "$TMP/ctr.json"; } ||
    fail "compute --model ctr: $(cat "$TMP/ctr.json")"
"$BENCH" compute --model ctr --data "$TMP/no-such.tsv" --steps 1 >/dev/null 2>"$TMP/ctrbad.err" &&
    fail "compute --model ctr ran without its click log"
{ [ "$(wc -l <"$TMP/ctrbad.err")" -eq 1 ] && grep -q 'no-such.tsv' "$TMP/ctrbad.err"; } ||
    fail "compute --model ctr without its click log: $(cat "$TMP/ctrbad.err")"
"$BENCH" compute --model ctr --ctr-rows 0 >/dev/null 2>&1
[ $? = 2 ] || fail "compute --ctr-rows 0 was not a usage error"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    # shellcheck disable=SC2086
    "$BENCH" $ctr_compute --profile-steps 0 --torch --json "$TMP/ctrtorch.json" \
        >"$TMP/ctrtorch.log" 2>&1 || fail "compute --model ctr --torch: $(tail -5 "$TMP/ctrtorch.log")"
    grep -Eq '"torch_samples_per_sec": [0-9.e+]+,' "$TMP/ctrtorch.json" ||
        fail "compute --model ctr --torch: $(cat "$TMP/ctrtorch.json")"
fi

# checkpoint: one round of 60 steps, without and with a checkpoint every 20.
"$BENCH" checkpoint --reps 1 --max-steps 60 --every 20 --out "$TMP/ck" >"$TMP/ck.log" 2>&1 ||
    fail "bench checkpoint failed: $(tail -5 "$TMP/ck.log")"
header "$TMP/ck/checkpoint.csv" \
    "round,without_samples_per_sec,with_samples_per_sec,ratio,without_cpu_s,with_cpu_s,cpu_ratio,checkpoints,checkpoint_mb"
rows "$TMP/ck/checkpoint.csv" 2 # the round and the median
grep -Eq '^1,[0-9]+,[0-9]+,[0-9.]+,[0-9.]+,[0-9.]+,[0-9.]+,3,[0-9.]+$' "$TMP/ck/checkpoint.csv" ||
    fail "checkpoint.csv: $(cat "$TMP/ck/checkpoint.csv")"
results_page "$TMP/ck/checkpoint.md" checkpoint

# scale: 1 and 2 workers, 2 and 4 steps each, one round.
"$BENCH" scale --workers 1,2 --servers 2 --steps 2,4 --reps 1 --out "$TMP/scale" \
    >"$TMP/scale.log" 2>&1 || fail "bench scale failed: $(tail -5 "$TMP/scale.log")"
header "$TMP/scale/scale.csv" \
    "workers,rounds,sched_cpu_ms_per_step,sched_msgs_per_step,sched_msgs_per_sec,server_cpu_ms_per_step,server_msgs_per_step,step_ms,sched_cpu_s_startup,server_cpu_s_startup"
rows "$TMP/scale/scale.csv" 2
n='-?[0-9.]+' # a difference of two short jobs: noise may make it negative
grep -Eq "^1,1,$n,$n,(-?[0-9]+)?,$n,[0-9.]+,$n,[0-9.]+,[0-9.]+\$" "$TMP/scale/scale.csv" &&
    grep -Eq "^2,1,$n,$n,(-?[0-9]+)?,$n,[0-9.]+,$n,[0-9.]+,[0-9.]+\$" "$TMP/scale/scale.csv" ||
    fail "scale.csv: $(cat "$TMP/scale/scale.csv")"
results_page "$TMP/scale/scale.md" scale
[ "$(wc -c <"$TMP/scale/data/train-images-idx3-ubyte")" = 47040016 ] ||
    fail "scale: no uncompressed training images in $TMP/scale/data"

# memory: a table of 2000 rows (sgd without momentum: no state) on a click
# log of 5000 lines it generates: its row, with the table's bytes per row
# as the table's own accounting puts them, at least the row's floats.
"$BENCH" memory --rows 2000 --lines 5000 --optimizers sgd --batch 256 --out "$TMP/mem" \
    >"$TMP/mem.log" 2>&1 || fail "bench memory failed: $(tail -5 "$TMP/mem.log")"
header "$TMP/mem/memory.csv" \
    "optimizer,rows,state_floats,row_bytes,base_mb,peak_mb,bytes_per_row,ratio,table_ratio"
rows "$TMP/mem/memory.csv" 1
grep -Eq '^sgd,2000,0,64,[0-9.]+,[0-9.]+,-?[0-9.]+,-?[0-9.]+,[1-9][0-9]*\.[0-9]+$' \
    "$TMP/mem/memory.csv" || fail "memory.csv: $(cat "$TMP/mem/memory.csv")"
results_page "$TMP/mem/memory.md" memory

# compress: 2 modes x 2 seeds x 3 codecs of 20 steps; bf16 saves exactly half
# of every push and pull (bytes are counted, so this is exact); top-k saves
# more pushes; the worst over the seeds is noted per mode and codec.
"$BENCH" compress --max-steps 20 --modes sync,async --seeds 1,2 \
    --codecs fp32,bf16,topk:0.01+bf16 \
    --out "$TMP/cmp" >"$TMP/cmp.log" 2>&1 || fail "bench compress failed: $(tail -5 "$TMP/cmp.log")"
header "$TMP/cmp/compress.csv" \
    "mode,seed,codec,status,final_accuracy,accuracy_vs_fp32_points,push_bytes,push_saved_pct,pull_reply_bytes,pull_saved_pct,total_bytes,total_saved_pct,wall_seconds"
rows "$TMP/cmp/compress.csv" 12
grep -Eq '^sync,1,bf16,ok,[0-9.]+,[-+0-9.]+,[0-9]+,50.0,[0-9]+,50.0,' "$TMP/cmp/compress.csv" ||
    fail "compress.csv: bf16 does not save half: $(cat "$TMP/cmp/compress.csv")"
grep -Eq '^async,1,topk:0.01\+bf16,ok,[0-9.]+,[-+0-9.]+,[0-9]+,9[0-9].[0-9],' "$TMP/cmp/compress.csv" ||
    fail "compress.csv: top-k does not save 90 % of pushes: $(cat "$TMP/cmp/compress.csv")"
grep -Eq '^sync,2,bf16,ok,[0-9.]+,[-+0-9.]+,[0-9]+,50.0,' "$TMP/cmp/compress.csv" ||
    fail "compress.csv: no seed 2 row against its own fp32: $(cat "$TMP/cmp/compress.csv")"
grep -Eq 'Worst over the seeds .*: sync bf16 [-+][0-9.]+, sync topk:0.01\+bf16 [-+][0-9.]+, async bf16' \
    "$TMP/cmp/compress.md" || fail "compress.md: no worst over the seeds: $(cat "$TMP/cmp/compress.md")"
results_page "$TMP/cmp/compress.md" compress

# The logs of every job the bench started, for sanitizer reports.
cp "$TMP"/train/runs/*.log "$TMP"/ctr/runs/sync*.log "$TMP"/comm/*.log "$TMP"/ck/runs/*.log "$TMP"/scale/runs/*.log \
    "$TMP"/cmp/runs/*.log "$TMP/" 2>/dev/null
check_logs
echo ok
