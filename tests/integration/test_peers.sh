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
