#!/usr/bin/env bash
# tests/integration/test_replica_end.sh - a replica takes its rank over
# after the last step too (--replicas 1).
#
# A sync MLP job, 3 servers (each with a replica) x 2 workers, no
# checkpoints. Worker 0 writes its --dump-params into a named pipe, so it
# waits there after its last step and evaluation, before it says it is
# done. S1 is then stopped (SIGSTOP) and the pipe read: every worker is
# done, the scheduler asks for the servers' reports, S1 never answers and
# is declared lost once training is over. Its replica, which holds every
# update, takes the rank over and reports in its place: the job ends ok,
# exit 0, with a takeover and nothing rolled back in its summary, and both
# workers' parameters cmp-identical to an undisturbed run's. Then S1 is
# stopped the same way but the pipe read only after the takeover, which so
# comes while the job still runs: worker 1 sends its DONE again, and the
# job ends the same. The stopped server is killed once the summary is out;
# nothing is left running.
. "$(dirname "$0")/lib.sh"

# stop_s1_at_the_end NAME [flags...]: job NAME (--replicas 1) with worker
# 0's parameters written into a named pipe; once S1 has a replica in step,
# worker 0 evaluated after its last step and waits at the pipe, and worker
# 1 is done, S1 is stopped (SIGSTOP). Sets JOB_PID and S1.
stop_s1_at_the_end() {
    local name=$1
    shift
    rm -f "$TMP"/end*.f32
    mkfifo "$TMP/end0.f32"
    fault_job "$name" --servers 3 --replicas 1 --progress 0.1 \
        --dump-params "$TMP/end%d.f32" "$@" &
    JOB_PID=$!
    PIDS+=("$JOB_PID")
    wait_line "$TMP/$name.log" "S[0-9] is in step with S1" 60 || fail "S1 has no replica in step"
    wait_line "$TMP/$name.log" "W0 I epoch=1 test_accuracy=" 60 || fail "no final evaluation"
    wait_line "$TMP/$name.log" "W1 done: 300 steps" 60 || fail "worker 1 did not finish"
    S1=$(pid_of "$TMP/$name.log" S1)
    kill -STOP "$S1"
}

# ended_ok_after_takeover NAME WHAT: once job NAME's summary is out (worker
# 0's parameters read from the pipe into w0.f32), the stopped S1 is killed;
# the job exits 0, ok after a takeover with nothing rolled back (WHAT), both
# workers' parameters cmp-identical to the undisturbed run's, nothing left.
ended_ok_after_takeover() {
    local name=$1 what=$2
    wait_line "$TMP/$name.log" "C I summary: " 60 || fail "no summary: $(tail -5 "$TMP/$name.log")"
    kill -9 "$S1"
    wait_pid "$JOB_PID" 120 || fail "the job hangs: $(tail -5 "$TMP/$name.log")"
    [ "$WAIT_RC" = 0 ] || fail "exit $WAIT_RC: $(grep -E ' [EW] ' "$TMP/$name.log" | tail -5)"
    expect "$TMP/$name.json" "d['status'] == 'ok' and d['replicas']['takeovers'] == 1 and \
        d['replicas']['steps_rolled_back'] == 0" "$what"
    cmp -s "$TMP/full.f32" "$TMP/w0.f32" || fail "worker 0's parameters differ ($name)"
    cmp -s "$TMP/full.f32" "$TMP/end1.f32" || fail "worker 1's parameters differ ($name)"
    no_leftovers "$TMP/$name.log"
}

fault_job full --servers 3 || fail "undisturbed run failed: $(tail -5 "$TMP/full.log")"

# 8 s for S1's loss: worker 0, released from the pipe, says it is done
# well before, however loaded the machine
stop_s1_at_the_end end --peer-timeout 8
cat "$TMP/end0.f32" >"$TMP/w0.f32"
ended_ok_after_takeover end "ok after a takeover once training was over"
grep -Eq "lost S1 .* its replica S[0-9]+ \(pid [0-9]+\) takes the rank over" "$TMP/end.log" ||
    fail "no takeover: $(grep -E 'failover|S1' "$TMP/end.log" | tail -5)"
grep -q "every server knows S1's new primary; training is over" "$TMP/end.log" ||
    fail "the takeover was not after training: $(grep failover "$TMP/end.log")"
expect "$TMP/end.json" "len(d['server_reports']) == 3" "a report from every rank"

# The same, but the pipe is read only once the replica took over: S1 is
# lost while worker 0 still writes its outputs (the job still runs), so
# worker 1, done already, sends its DONE again, and worker 0 then its own.
stop_s1_at_the_end run
wait_line "$TMP/run.log" "every server forgot the step under way" 60 ||
    fail "no takeover while the job runs: $(grep -E 'failover|S1' "$TMP/run.log" | tail -5)"
cat "$TMP/end0.f32" >"$TMP/w0.f32"
ended_ok_after_takeover run "ok after a takeover while outputs were written"
check_logs
echo "ok"
