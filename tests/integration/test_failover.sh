#!/usr/bin/env bash
# tests/integration/test_failover.sh - a lost server replaced by a spare.
#
# A sync MLP job, 2 servers + 1 spare x 2 workers, checkpointing every 50
# steps: S1 is killed with SIGKILL after checkpoint step-100; the spare takes
# its keys from the newest checkpoint, every node rolls back to it, and the
# job completes with the accuracy of an undisturbed run (within 1 point; in
# fact bitwise its parameters: the rollback replays the same steps). S1 is
# found lost by its closed connection, not only by its silence. The
# summary reports the replacement (detection and recovery times, steps lost)
# and the log has the recovery line. Then the failures that cannot be
# survived fail as before, each with a line saying why: no checkpoints, no
# spare left. A server started by hand once the job runs is a spare too.
# Nothing is left running.
. "$(dirname "$0")/lib.sh"

job() { fault_job "$@" --servers 2; }
job_bg() { fault_job_bg "$@" --servers 2; }

job full --checkpoint-every 50 --checkpoint-dir "$TMP/ck_full" ||
    fail "undisturbed run failed: $(tail -5 "$TMP/full.log")"
expect "$TMP/full.json" "d['server_replacements'] == []" "replacements in an undisturbed run"

# S1 killed after checkpoint step-100: the spare takes over.
job_bg fo --spares 1 --checkpoint-every 50 --checkpoint-dir "$TMP/ck"
kill_s1_after "$TMP/ck/step-100/manifest.json" "$TMP/fo.log"
expect "$TMP/fo.json" "len(d['server_replacements']) == 1" "one replacement"
expect "$TMP/fo.json" "d['server_replacements'][0]['rank'] == 1" "S1 replaced"
expect "$TMP/fo.json" "d['server_replacements'][0]['step'] >= 100" "rolled back to a checkpoint"
expect "$TMP/fo.json" "d['server_replacements'][0]['recover_s'] >= 0" "a recovery time"
expect "$TMP/fo.json" "d['server_replacements'][0]['detect_s'] >= 0" "a detection time"
grep -q "failover 1: lost S1 (pid $S1): its connection closed" "$TMP/fo.log" ||
    fail "S1's closed connection not seen: $(grep 'failover 1' "$TMP/fo.log")"
expect "$TMP/fo.json" "d['server_replacements'][0]['steps_lost'] >= 0" "steps lost counted"
expect "$TMP/fo.json" "d['spares_left'] == 0" "the spare was used"
expect "$TMP/fo.json" "d['status'] == 'ok'" "status ok"
ACC=$(field "$TMP/full.json" "d['test_accuracy']")
expect "$TMP/fo.json" "abs(d['test_accuracy'] - $ACC) <= 0.01" "accuracy off the undisturbed $ACC"
params_close "$TMP/full.f32" "$TMP/fo.f32" 0 || fail "parameters differ from the undisturbed run"
grep -q "failover 1: S1 replaced: detected after .* s, recovered .* s later" "$TMP/fo.log" ||
    fail "no recovery line: $(grep failover "$TMP/fo.log")"
no_leftovers "$TMP/fo.log"

# Spares but no checkpoints: the job fails, saying so.
job_bg nock --spares 1
for i in $(seq 100); do
    S1=$(pid_of "$TMP/nock.log" S1)
    [ -n "$S1" ] && grep -q "job started" "$TMP/nock.log" && break
    sleep 0.1
done
kill -9 "$S1"
wait_pid "$JOB_PID" 60 || fail "the job without checkpoints hangs"
[ "$WAIT_RC" = 1 ] || fail "the job without checkpoints did not fail: rc $WAIT_RC"
grep -q "S1 cannot be replaced: checkpoints are off" "$TMP/nock.log" ||
    fail "no line saying why: $(grep -E ' [EW] ' "$TMP/nock.log")"
expect "$TMP/nock.json" "d['status'] == 'failed' and d['lost'] == 'S1'" "failed, S1 lost"
no_leftovers "$TMP/nock.log"

# The spare killed first, then S1: no spare left, the job fails, saying so.
job_bg nospare --spares 1 --checkpoint-every 50 --checkpoint-dir "$TMP/ck_ns"
wait_file "$TMP/ck_ns/step-50/manifest.json" 60 || fail "no checkpoint step-50"
kill -9 "$(pid_of "$TMP/nospare.log" 'spare S2')"
for i in $(seq 50); do
    grep -q "lost spare S2" "$TMP/nospare.log" && break
    sleep 0.1
done
kill -9 "$(pid_of "$TMP/nospare.log" S1)"
wait_pid "$JOB_PID" 60 || fail "the job without a spare hangs"
[ "$WAIT_RC" = 1 ] || fail "the job without a spare did not fail: rc $WAIT_RC"
grep -q "S1 cannot be replaced: no spare server waits" "$TMP/nospare.log" ||
    fail "no line saying why: $(grep -E ' [EW] ' "$TMP/nospare.log")"
expect "$TMP/nospare.json" "d['status'] == 'failed' and d['lost'] == 'S1'" "failed, S1 lost"
no_leftovers "$TMP/nospare.log"

# Without the launcher: servers started by hand after the job started are
# spares; one takes S0's place, the other ends with the job.
start_scheduler sched --servers 2 --workers 1 --model mlp --batch 32 --max-steps 300 \
    --epochs 1 --optimizer sgd --checkpoint-every 50 --checkpoint-dir "$TMP/ck_hand" \
    --peer-timeout 2 --summary "$TMP/hand.json" --straggler 0:10
for r in 0 1; do
    start "s$r" "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*' --rank $r --peer-timeout 2
    eval "S${r}_PID=$LAST_PID"
done
start w0 "$WORKER" --scheduler "$SCHED_EP" --rank 0 --peer-timeout 2
W0_PID=$LAST_PID
wait_file "$TMP/ck_hand/step-50/manifest.json" 60 || fail "no checkpoint step-50 (by hand)"
for k in 0 1; do
    start "spare$k" "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*' --peer-timeout 2
    eval "SPARE${k}_PID=$LAST_PID"
    for i in $(seq 50); do
        [ "$(grep -c "registered spare" "$TMP/sched.log")" -gt $k ] && break
        sleep 0.1
    done
done
kill -9 "$S0_PID"
wait_pid "$SCHED_PID" 120 || fail "the job by hand hangs: $(tail -5 "$TMP/sched.log")"
[ "$WAIT_RC" = 0 ] || fail "the job by hand failed: $(grep -E ' [EW] ' "$TMP/sched.log" | tail -5)"
wait_pid "$W0_PID" 20 && [ "$WAIT_RC" = 0 ] || fail "W0 did not end cleanly"
expect "$TMP/hand.json" "[r['rank'] for r in d['server_replacements']] == [0]" "S0 replaced"
expect "$TMP/hand.json" "d['spares_left'] == 1" "one spare left"
for k in 0 1; do # one took S0's place, the other was not needed: both end cleanly
    eval "pid=\$SPARE${k}_PID"
    wait_pid "$pid" 20 && [ "$WAIT_RC" = 0 ] || fail "spare$k did not end cleanly: $(tail -2 "$TMP/spare$k.log")"
done
grep -q "the job ended without needing this spare" "$TMP"/spare?.log || fail "no spare ended unneeded"
no_leftovers "$TMP/sched.log"
check_logs
echo "ok: failover ($(field "$TMP/fo.json" "d['server_replacements'][0]"))"
