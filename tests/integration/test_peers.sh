#!/usr/bin/env bash
# Bad peers cannot stop a job (issue 16): a stranger connected to the
# scheduler sends failure, report, done, barrier, model-info, checkpoint and
# heartbeat messages naming every registered node in turn (sps-malformed
# --forge) while a sync job runs; the job ends normally, bitwise equal to an
# undisturbed run, and the scheduler counts the refusals.
. "$(dirname "$0")/lib.sh"

MALFORMED=$SPS_BUILD/tests/integration/sps-malformed

run() {
    local name=$1
    start_scheduler "sched_$name" --servers 2 --workers 2 --mode sync --max-steps 20 \
        --summary "$TMP/$name.json"
    local sched=$SCHED_PID
    if [ "$name" = attacked ]; then
        start forge "$MALFORMED" --forge "$SCHED_EP" 2 2 20
    fi
    for r in 0 1; do
        start "s${r}_$name" "$SERVER" --scheduler "$SCHED_EP" --rank $r --bind 'tcp://127.0.0.1:*'
    done
    for r in 0 1; do
        start "w${r}_$name" "$WORKER" --scheduler "$SCHED_EP" --rank $r --device cpu \
            --threads 1 --dump-params "$TMP/$name.f32"
    done
    wait_pid "$sched" 120 || fail "$name: the job did not end"
    [ "$WAIT_RC" -eq 0 ] || fail "$name: the scheduler exited $WAIT_RC: $(tail -5 "$TMP/sched_$name.log")"
    expect "$TMP/$name.json" "d['status'] == 'ok'" "$name"
}
run quiet
run attacked
expect "$TMP/attacked.json" "d['scheduler_refused'] >= 28" "forged messages counted"
params_close "$TMP/quiet.f32" "$TMP/attacked.f32" 0 ||
    fail "the job under forged messages differs from the undisturbed one"
lines=$(wc -l <"$TMP/sched_attacked.log")
[ "$lines" -lt 150 ] || fail "forged messages wrote $lines lines to the scheduler log"
check_logs
echo "ok: $(field "$TMP/attacked.json" "d['scheduler_refused']") forged messages refused;" \
    "job bitwise unchanged; scheduler log $lines lines"

# A 1 GiB frame announced to the scheduler of a running job
# (64 MiB of it actually sent) is dropped at its header: their resident
# memory stays within 50 MB of before, and the job finishes.
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
start_scheduler sched_big --servers 1 --workers 2 --mode sync --epochs 5 \
    --summary "$TMP/big.json"
sched=$SCHED_PID
start s_big "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*'

for r in 0 1; do
    start "w${r}_big" "$WORKER" --scheduler "$SCHED_EP" --rank $r --device cpu --threads 1
done
i=0
until grep -q 'job started' "$TMP/sched_big.log"; do
    i=$((i + 1)); [ $i -lt 300 ] || fail "the job did not start"; sleep 0.1
done
sleep 0.5
report=""
for who in sched; do # servers: not yet (issue 16)
    pid=$sched ep=${SCHED_EP#tcp://}
    before=$(rss "$pid")
    python3 "$(dirname "$0")/bigframe.py" "${ep%:*}" "${ep##*:}" $((1 << 30)) $((64 << 20)) ||
        fail "bigframe.py failed"
    sleep 0.5
    after=$(rss "$pid")
    report="$report $who RSS ${before} kB -> ${after} kB;"
    [ $((after - before)) -lt 51200 ] || fail "a 1 GiB frame grew the $who from $before kB to $after kB"
done
wait_pid "$sched" 120 || fail "big: the job did not end"
[ "$WAIT_RC" -eq 0 ] || fail "big: the scheduler exited $WAIT_RC: $(tail -5 "$TMP/sched_big.log")"
check_logs
echo "ok: a 1 GiB frame dropped at its header:$report job finished"
