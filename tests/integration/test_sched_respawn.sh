#!/usr/bin/env bash
# tests/integration/test_sched_respawn.sh - under the launcher with
# --respawn, a scheduler killed mid-run is started again and the job ends as
# if nothing happened.
#
# A sync MLP job, 2 servers x 2 workers, --respawn 1 and a checkpoint every
# 50 steps: once step-100 is checkpointed the scheduler is killed with
# SIGKILL. The launcher starts it again at the same port with --resume on
# the checkpoint directory (its state file is there); the nodes, which the
# launcher gave a --scheduler-grace, register with it again. Asserts: the
# launcher exits 0; the parameters are bitwise those of the same job run
# without a kill; the summary is the restarted scheduler's (one restart,
# every step). A second kill, past the budget, ends the job naming it. A
# state damaged before the kill ends the job at once, naming the checkpoint
# to resume from.
. "$(dirname "$0")/lib.sh"

JOB=(--servers 2 --workers 2 --epochs 1 --max-steps 600 --seed 11 --batch 32
    --peer-timeout 3 --checkpoint-every 50 --respawn 1 --timeout 240)

# The reference: no kill.
"$LAUNCH" "${JOB[@]}" --checkpoint-dir "$TMP/ck_ref" --summary "$TMP/ref.json" \
    --dump-params "$TMP/ref.f32" >"$TMP/ref.out" 2>"$TMP/ref.log" ||
    fail "reference job: $(grep -E ' [EW] ' "$TMP/ref.log" | tail -5)"

CK=$TMP/ck
start cut "$LAUNCH" "${JOB[@]}" --checkpoint-dir "$CK" --summary "$TMP/cut.json" \
    --dump-params "$TMP/cut.f32"
JOB_PID=$LAST_PID
wait_file "$CK/step-100/manifest.json" 120 || fail "no checkpoint step-100: $(tail -5 "$TMP/cut.log")"
[ -s "$CK/scheduler.state" ] || fail "no scheduler state in $CK: $(ls "$CK")"
sched=$(pgrep -P "$JOB_PID" -x shardps-schedul)
[ -n "$sched" ] || fail "no scheduler under the launcher (pid $JOB_PID)"
kill -9 "$sched"
wait_pid "$JOB_PID" 200 || fail "the job hangs after the scheduler was killed: $(tail -5 "$TMP/cut.log")"
[ "$WAIT_RC" = 0 ] ||
    fail "the launcher exited $WAIT_RC: $(grep -E ' [EW] ' "$TMP/cut.log" | tail -5)"
grep -q "scheduler (pid $sched) killed by signal 9 (SIGKILL); starting it again" "$TMP/cut.log" ||
    fail "no restart line: $(grep -E ' [EW] ' "$TMP/cut.log" | tail -5)"
grep -q "is back: every node registered again" "$TMP/cut.log" ||
    fail "the job did not come back: $(tail -5 "$TMP/cut.log")"
cmp -s "$TMP/ref.f32" "$TMP/cut.f32" ||
    fail "the parameters differ from the run without a scheduler restart"
expect "$TMP/cut.json" "d['status'] == 'ok' and d['scheduler_restarts'] == 1" "one restart"
expect "$TMP/cut.json" "d['steps'] == 600 and d['worker_steps'] == [600, 600]" "every step"
grep -q "^job ok" "$TMP/cut.log" || fail "no 'job ok' line: $(tail -2 "$TMP/cut.log")"

# The budget: with --respawn 1 a second kill of the scheduler ends the job.
# This job starts with --resume-or-start DIR (a fresh start: DIR is empty),
# which its restart takes the place of with --resume DIR.
CK2=$TMP/ck2
start twice "$LAUNCH" "${JOB[@]}" --resume-or-start "$CK2" --summary "$TMP/twice.json"
JOB_PID=$LAST_PID
wait_file "$CK2/step-50/manifest.json" 120 || fail "twice: no checkpoint step-50: $(tail -5 "$TMP/twice.log")"
kill -9 "$(pgrep -P "$JOB_PID" -x shardps-schedul)"
wait_line "$TMP/twice.log" "is back: every node registered again" 60 ||
    fail "twice: the job did not come back: $(tail -5 "$TMP/twice.log")"
sched=$(pgrep -P "$JOB_PID" -x shardps-schedul)
[ -n "$sched" ] || fail "twice: no restarted scheduler: $(tail -5 "$TMP/twice.log")"
kill -9 "$sched"
wait_pid "$JOB_PID" 60 || fail "twice: the job hangs after the second kill"
[ "$WAIT_RC" = 1 ] || fail "twice: the launcher exited $WAIT_RC after the budget was spent"
grep -q "job failed: C (pid $sched) killed by signal 9" "$TMP/twice.log" ||
    fail "twice: no failure naming the scheduler: $(tail -3 "$TMP/twice.log")"
# A damaged state at respawn: the restarted scheduler cannot take the job
# back. It ends the job at once, without waiting out the nodes' long grace,
# and its cause names the newest usable checkpoint and the --resume that
# continues from it; that resume runs. The scheduler is stopped before its
# state is damaged, lest it write the state again.
CK3=$TMP/ck3
start damaged "$LAUNCH" "${JOB[@]}" --scheduler-grace 600 --checkpoint-dir "$CK3" \
    --summary "$TMP/damaged.json"
JOB_PID=$LAST_PID
wait_file "$CK3/step-100/manifest.json" 120 ||
    fail "damaged: no checkpoint step-100: $(tail -5 "$TMP/damaged.log")"
sched=$(pgrep -P "$JOB_PID" -x shardps-schedul)
kill -STOP "$sched"
printf 'XXXXXXXX' | dd of="$CK3/scheduler.state" bs=1 seek=40 conv=notrunc 2>/dev/null
kill -9 "$sched"
wait_pid "$JOB_PID" 120 || fail "damaged: the job waits on after its state was found corrupt"
[ "$WAIT_RC" = 1 ] || fail "damaged: the launcher exited $WAIT_RC"
newest=$CK3/$(cat "$CK3/latest")
expect "$TMP/damaged.json" "d['status'] == 'failed' and 'scheduler.state: it is corrupt' in \
    d['failure'] and 'checkpoint is $newest: start the job again with --resume $CK3' in \
    d['failure']" "damaged: the summary's cause"
grep -q "^job failed: .*checkpoint is $newest: start the job again with --resume $CK3\$" \
    "$TMP/damaged.log" || fail "damaged: the result line: $(grep '^job' "$TMP/damaged.log")"
"$LAUNCH" "${JOB[@]}" --max-steps 200 --resume "$CK3" >"$TMP/again.log" 2>&1 ||
    fail "damaged: the resume it names failed: $(grep ' E ' "$TMP/again.log")"
grep -q "resuming from $newest at step" "$TMP/again.log" ||
    fail "damaged: the resume did not start from $newest: $(grep resum "$TMP/again.log")"

check_logs
echo "ok: a killed scheduler restarted with parameters bitwise equal; the budget; a damaged state named"
