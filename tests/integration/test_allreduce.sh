#!/usr/bin/env bash
# tests/integration/test_allreduce.sh - --mode allreduce (no servers, a ring of
# workers), through the launcher users run and by hand:
# - every worker ends with bitwise the same parameters (each dumps its own,
#   --dump-params FILE.%d), for 2, 3 and 5 workers;
# - allreduce with M workers trains like sync PS with M workers on the same
#   data: bitwise for M = 1 and 2 (the sum of two floats has one order),
#   within 1e-4 relative for M = 3 (with Adam and weight decay) and M = 5
#   (235146 parameters: uneven chunks; small ring messages: many sub-chunks);
# - the summary works without servers (bytes counted, no staleness) and one
#   epoch with 2 workers reaches a sane test accuracy (>= 0.80);
# - roles started by hand with the default --bind tcp://0.0.0.0:* train
#   bitwise like the launcher (the scheduler fills in the workers' address);
# - --overlap 1 (the default; buckets summed during backward) and --overlap 0
#   (one allreduce after backward): bitwise the same for 2 workers, within
#   1e-4 of each other and of sync PS for 3; the CNN runs a few steps with
#   overlap, every worker bitwise the same, and equal to --overlap 0;
# - a killed worker stops the others within 10 s, naming it (overlap on);
# - --servers must be 0 with allreduce, and 0 only with allreduce.
. "$(dirname "$0")/lib.sh"

run() { # name, launcher flags...
    local name=$1
    shift
    "$LAUNCH" --log-level warn --threads 1 --summary "$TMP/$name.json" "$@" \
        >"$TMP/$name.log" 2>&1 || fail "$name: job failed: $(tail -5 "$TMP/$name.log")"
}
same_on_every_worker() { # name, workers
    local r
    for ((r = 1; r < $2; r++)); do
        params_close "$TMP/$1.0.f32" "$TMP/$1.$r.f32" 0 ||
            fail "$1: W$r's parameters differ from W0's"
    done
}

# --- every worker holds the same parameters; allreduce = sync PS -------------
for m in 1 2; do
    run "ar$m" --mode allreduce --workers $m --max-steps 40 --overlap 1 \
        --dump-params "$TMP/ar$m.%d.f32"
    run "sync$m" --servers 2 --workers $m --max-steps 40 --dump-params "$TMP/sync$m.f32"
    same_on_every_worker "ar$m" $m
    params_close "$TMP/ar$m.0.f32" "$TMP/sync$m.f32" 0 ||
        fail "allreduce with $m worker(s) differs from sync"
done

run ar3 --mode allreduce --workers 3 --max-steps 40 --optimizer adam --lr 0.002 \
    --weight-decay 1e-4 --overlap 1 --dump-params "$TMP/ar3.%d.f32"
run sync3 --servers 2 --workers 3 --max-steps 40 --optimizer adam --lr 0.002 \
    --weight-decay 1e-4 --dump-params "$TMP/sync3.f32"
same_on_every_worker ar3 3
params_close "$TMP/ar3.0.f32" "$TMP/sync3.f32" 1e-4 || fail "allreduce x3 (adam) differs from sync"

run ar5 --mode allreduce --workers 5 --max-steps 15 --batch 16 --ring-kib 16 \
    --dump-params "$TMP/ar5.%d.f32"
run sync5 --servers 1 --workers 5 --max-steps 15 --batch 16 --dump-params "$TMP/sync5.f32"
same_on_every_worker ar5 5
params_close "$TMP/ar5.0.f32" "$TMP/sync5.f32" 1e-4 || fail "allreduce x5 differs from sync"

# --- overlap on and off -------------------------------------------------------------
run ar2_nov --mode allreduce --workers 2 --max-steps 40 --overlap 0 \
    --dump-params "$TMP/ar2_nov.%d.f32"
same_on_every_worker ar2_nov 2
params_close "$TMP/ar2.0.f32" "$TMP/ar2_nov.0.f32" 0 || fail "overlap 1 differs from overlap 0 (x2)"
run ar3_nov --mode allreduce --workers 3 --max-steps 40 --optimizer adam --lr 0.002 \
    --weight-decay 1e-4 --overlap 0 --dump-params "$TMP/ar3_nov.%d.f32"
same_on_every_worker ar3_nov 3
params_close "$TMP/ar3.0.f32" "$TMP/ar3_nov.0.f32" 1e-4 || fail "overlap 1 differs from overlap 0 (x3)"
params_close "$TMP/ar3_nov.0.f32" "$TMP/sync3.f32" 1e-4 || fail "allreduce x3 without overlap differs from sync"
for o in 1 0; do
    run "cnn$o" --mode allreduce --model cnn --workers 2 --max-steps 5 --batch 16 --overlap $o \
        --dump-params "$TMP/cnn$o.%d.f32"
    same_on_every_worker "cnn$o" 2
done
params_close "$TMP/cnn1.0.f32" "$TMP/cnn0.0.f32" 0 || fail "cnn: overlap 1 differs from overlap 0"

# --- the summary without servers ---------------------------------------------
P=235146
[ "$(field "$TMP/ar3.json" "d['servers'], d['mode'], d['staleness']['count']")" = "0 allreduce 0" ] ||
    fail "summary: $(cat "$TMP/ar3.json")"
# each of 3 workers sends and receives 2(M-1)/M of P floats per step, 40 steps
field "$TMP/ar3.json" "d['bytes_pushed'] == d['bytes_pulled'] == 3 * 40 * 4 * $P * 4 // 3" |
    grep -qx True || fail "ring bytes: $(field "$TMP/ar3.json" "d['bytes_pushed']")"

# --- one epoch, 2 workers: a sane accuracy ---------------------------------------
run epoch --mode allreduce --workers 2 --epochs 1
acc=$(field "$TMP/epoch.json" "d['test_accuracy']")
echo "allreduce, 2 workers, 1 epoch: test accuracy $acc"
field "$TMP/epoch.json" "d['test_accuracy'] >= 0.80" | grep -qx True ||
    fail "1 epoch of allreduce reached only $acc"

# --- by hand, default --bind (0.0.0.0, wildcard port) --------------------------
start_scheduler hand --mode allreduce --servers 0 --workers 2 --max-steps 40 \
    --summary "$TMP/hand.json"
for r in 0 1; do
    start "hand.W$r" "$WORKER" --scheduler "$SCHED_EP" --rank $r --threads 1 \
        --dump-params "$TMP/hand.%d.f32"
    W[$r]=$LAST_PID
done
wait_pid "$SCHED_PID" 120 || fail "by hand: the scheduler is still running"
[ "$WAIT_RC" = 0 ] || fail "by hand: scheduler exit $WAIT_RC: $(tail -3 "$TMP/hand.log")"
for r in 0 1; do
    wait_pid "${W[$r]}" 30 && [ "$WAIT_RC" = 0 ] ||
        fail "by hand: W$r exit $WAIT_RC: $(tail -3 "$TMP/hand.W$r.log")"
done
expect "$TMP/hand.json" "[n['node'] for n in d['nodes']] == ['W0', 'W1'] and \
    all(n['endpoint'].startswith('tcp://127.0.0.1:') for n in d['nodes'])" \
    "by hand: the workers' wildcard ring endpoints were not filled in"
params_close "$TMP/hand.0.f32" "$TMP/ar2.0.f32" 0 || fail "by hand differs from the launcher"
params_close "$TMP/hand.1.f32" "$TMP/ar2.0.f32" 0 || fail "by hand: W1 differs"

# --- a killed worker stops the ring ----------------------------------------------
start_scheduler kill --mode allreduce --servers 0 --workers 3 --epochs 50 --batch 32 \
    --summary "$TMP/kill.json"
for r in 0 1 2; do
    start "kill.W$r" env SHARDPS_PROGRESS=0.2 "$WORKER" --scheduler "$SCHED_EP" --rank $r \
        --threads 1 --bind 'tcp://127.0.0.1:*'
    K[$r]=$LAST_PID
done
i=0
until grep -Eq "step=[0-9]+/" "$TMP/kill.W0.log"; do
    i=$((i + 1))
    [ $i -gt 900 ] && fail "kill: no training progress: $(tail -3 "$TMP/kill.W0.log")"
    sleep 0.1
done
kill -9 "${K[1]}"
t0=$(date +%s)
for p in "$SCHED_PID" "${K[0]}" "${K[2]}"; do
    wait_pid "$p" 10 || fail "kill: pid $p still running 10 s after W1 died"
    [ "$WAIT_RC" -ge 1 ] && [ "$WAIT_RC" -le 127 ] || fail "kill: pid $p exit status $WAIT_RC"
done
echo "killed W1: the others exited in $(($(date +%s) - t0)) s"
expect "$TMP/kill.json" "d['status'] == 'failed' and d['lost'] == 'W1'" \
    "kill: the scheduler's summary does not name W1 as lost"
for r in 0 2; do
    grep -q "W1" "$TMP/kill.W$r.log" || fail "kill: W$r did not name W1: $(tail -2 "$TMP/kill.W$r.log")"
done

# --- --servers and the mode ----------------------------------------------------------
usage() { # regex, command...
    local re=$1 rc
    shift
    timeout 30 "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    [ $rc -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -Eq -- "$re" "$TMP/err" ||
        fail "$*: exit $rc, stderr: $(cat "$TMP/err")"
}
usage "--servers 2: --mode allreduce runs without servers" "$LAUNCH" --mode allreduce --servers 2
usage "--servers 1: --mode allreduce runs without servers" "$SCHED" --mode allreduce
usage "--servers 0: .*only with --mode allreduce" "$SCHED" --servers 0 --mode sync
usage "--servers 0: .*only with --mode allreduce" "$LAUNCH" --servers 0

check_logs
echo ok
