#!/usr/bin/env bash
# tests/integration/test_mpi_allreduce.sh - --allreduce-backend mpi: the
# allreduce mode's gradients summed by MPI_Allreduce, the workers being the
# ranks of one mpirun (Open MPI, TCP on loopback), the scheduler started
# by hand as for any allreduce job.
#
# Bad input first, in every build: --allreduce-backend foo is bad usage (exit
# 2, one line); in a build without MPI, so is --allreduce-backend mpi. Then,
# with MPI (else skipped: no MPI, 77):
# - mpirun -np 2 workers train 300 steps: mpirun exits 0, the summary is ok
#   with 300 steps, test accuracy >= 0.80, and both workers' parameters are
#   bitwise equal; and equal to our ring's for the same job (two gradients
#   have one sum, whatever the order);
# - mpirun -np 3: every worker the same parameters, within 1e-2 of the ring's
#   and the test accuracy within 0.005 (MPI adds three gradients in its own
#   order, not even the same from run to run, and 300 momentum steps grow the
#   rounding apart);
# - a worker with the mpi backend outside mpirun (a singleton: 1 rank for a
#   job of 2 workers) fails naming the mismatch, and the job fails;
# - shardps-bench train --net 1gbit --modes mpi (where the simulated cluster
#   can be made): the mpi row is ok and the bytes each worker's link carried
#   per step are the ring's 2(M-1)/M x the model (within 10 %), so the
#   ranks' data crossed the shaped links.
. "$(dirname "$0")/lib.sh"

# --- bad input ---------------------------------------------------------------
"$WORKER" --allreduce-backend foo >"$TMP/bad.out" 2>"$TMP/bad.log"
[ $? = 2 ] || fail "--allreduce-backend foo: not exit 2"
[ "$(wc -l <"$TMP/bad.log")" = 1 ] && grep -q "expected ring or mpi" "$TMP/bad.log" ||
    fail "--allreduce-backend foo: no one-line reason: $(cat "$TMP/bad.log")"
if [ ! -x "$SPS_BUILD/deploy/shardps-mpi" ]; then # Meson found no MPI
    "$WORKER" --allreduce-backend mpi >"$TMP/bad.out" 2>"$TMP/bad.log"
    [ $? = 2 ] || fail "--allreduce-backend mpi in a build without MPI: not exit 2"
    [ "$(wc -l <"$TMP/bad.log")" = 1 ] && grep -q "this build has no MPI" "$TMP/bad.log" ||
        fail "--allreduce-backend mpi without MPI: no one-line reason: $(cat "$TMP/bad.log")"
    skip "no MPI (this build has none: Debian libopenmpi-dev)"
fi
command -v mpirun >/dev/null || skip "no MPI (no mpirun: Debian openmpi-bin)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI's own allocations outlive MPI_Finalize in components it has
# unloaded (no module name to suppress them by): no leak check for processes
# that load MPI. Our side of them is the ring's code, leak-checked elsewhere.
NOLEAK="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
MPIRUN=(env "$NOLEAK" mpirun --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo --mca pml ob1
        --mca mpi_yield_when_idle 1 --mca rtc_hwloc_vmhole none)
JOB=(--mode allreduce --servers 0 --max-steps 300 --seed 3)

# mpi_job NAME M: the job with M workers under one mpirun; its summary is
# $TMP/NAME.json, worker r's parameters $TMP/NAME.r.f32.
mpi_job() {
    local name=$1 m=$2
    start_scheduler "$name.sched" --workers "$m" "${JOB[@]}" --summary "$TMP/$name.json"
    timeout 300 "${MPIRUN[@]}" -np "$m" "$WORKER" --scheduler "$SCHED_EP" --threads 1 \
        --allreduce-backend mpi --dump-params "$TMP/$name.%d.f32" >"$TMP/$name.log" 2>&1 ||
        fail "$name: mpirun failed ($?): $(tail -5 "$TMP/$name.log")"
    wait_pid "$SCHED_PID" 60 || fail "$name: the scheduler did not end"
    [ "$WAIT_RC" = 0 ] || fail "$name: the scheduler exited $WAIT_RC: $(tail -5 "$TMP/$name.sched.log")"
    expect "$TMP/$name.json" "d['status'] == 'ok' and d['steps'] == 300" "$name: not ok after 300 steps"
    grep -q "MPI_Allreduce over $m ranks ready" "$TMP/$name.log" ||
        fail "$name: the workers did not sum with MPI: $(grep ' W0 ' "$TMP/$name.log" | head -5)"
    local r
    for ((r = 1; r < m; r++)); do
        params_close "$TMP/$name.0.f32" "$TMP/$name.$r.f32" 0 ||
            fail "$name: W$r's parameters differ from W0's"
    done
}
# ring_job NAME M: the same job with our ring, through the launcher.
ring_job() {
    "$LAUNCH" --workers "$2" "${JOB[@]}" --threads 1 --log-level warn \
        --summary "$TMP/$1.json" --dump-params "$TMP/$1.%d.f32" >"$TMP/$1.log" 2>&1 ||
        fail "$1: the ring job failed: $(tail -5 "$TMP/$1.log")"
}

mpi_job mpi2 2
expect "$TMP/mpi2.json" "d['test_accuracy'] >= 0.80" "mpi2: below 0.80 after 300 steps"
ring_job ring2 2
params_close "$TMP/mpi2.0.f32" "$TMP/ring2.0.f32" 0 ||
    fail "2 workers: MPI_Allreduce's parameters are not bitwise the ring's"

mpi_job mpi3 3
ring_job ring3 3
params_close "$TMP/mpi3.0.f32" "$TMP/ring3.0.f32" 1e-2 ||
    fail "3 workers: MPI_Allreduce's parameters are not within 1e-2 of the ring's"
ring_acc=$(field "$TMP/ring3.json" "d['test_accuracy']")
expect "$TMP/mpi3.json" "abs(d['test_accuracy'] - $ring_acc) <= 0.005" \
    "3 workers: MPI's test accuracy is not within 0.005 of the ring's ($ring_acc)"

# --- the mpi backend outside mpirun: one rank for a job of two -----------------
start_scheduler single.sched --workers 2 "${JOB[@]}" --summary "$TMP/single.json"
for r in 0 1; do
    start "single.w$r" env "$NOLEAK" "$WORKER" --scheduler "$SCHED_EP" --threads 1 --allreduce-backend mpi
    eval "W${r}_PID=$LAST_PID"
done
for p in "$W0_PID" "$W1_PID" "$SCHED_PID"; do
    wait_pid "$p" 60 || fail "a singleton job hangs: $(tail -3 "$TMP"/single.*.log)"
    [ "$WAIT_RC" != 0 ] || fail "a singleton job's process exited 0"
done
grep -q "MPI has 1 rank, the job 2 workers" "$TMP/single.w0.log" "$TMP/single.w1.log" ||
    fail "no worker named the rank mismatch: $(tail -3 "$TMP"/single.w*.log)"
expect "$TMP/single.json" "d['status'] != 'ok'" "a job whose workers are MPI singletons ended ok"

# --- the simulated cluster: MPI's bytes cross the shaped links ----------------
BENCH=$SPS_BUILD/bench/shardps-bench
env "$NOLEAK" "$BENCH" train --net 1gbit --workers 2 --modes mpi --epochs 1 --max-steps 30 --threads 1 \
    --out "$TMP/net" >"$TMP/net.out" 2>"$TMP/net.log" ||
    fail "bench train --net --modes mpi exited $?: $(tail -5 "$TMP/net.log") $(grep -v 'still waiting' "$TMP"/net/runs/mpi_w2.log | tail -n 30)"
if grep -q "skipped:" "$TMP/net.out"; then
    echo "ok: mpirun -np 2 and 3 (the simulated cluster $(grep -o 'skipped: .*' "$TMP/net.out"))"
    check_logs
    exit 0
fi
python3 - "$TMP/net/train_links.csv" "$TMP/net/train.csv" <<'EOF' || fail "the mpi row: $(cat "$TMP/net/train_links.csv")"
import csv, sys
links = list(csv.DictReader(open(sys.argv[1])))
runs = list(csv.DictReader(open(sys.argv[2])))
assert [r['mode'] for r in runs] == ['mpi'] and runs[0]['status'] == 'ok', runs
row = links[0]
ring = float(row['theory_ring_mb'])
for k in ('link_tx_mb', 'link_rx_mb'):
    got = float(row[k])
    assert abs(got - ring) <= 0.1 * ring, f"{k} {got} MB/step, the ring's theory {ring}"
EOF
check_logs
echo "ok: mpirun -np 2 (bitwise the ring's) and 3 (within 1e-2), a singleton refused, links $(sed -n 2p "$TMP/net/train_links.csv" | cut -d, -f4,5,7)"
