#!/usr/bin/env bash
# tests/integration/test_replicas.sh - hot replicas (--replicas K): a lost
# server's replica takes its rank over with nothing rolled back.
#
# A sync MLP job, 3 servers (each with a replica made from a spare) x 2
# workers, no checkpoint directory at all. Replicas change no bit of an
# undisturbed run. S1 is killed with SIGKILL mid-run: its replica takes the
# rank over, the workers send the step under way again, and the parameters
# are bitwise those of the undisturbed run, with 0 steps rolled back; a
# respawned spare becomes S1's new replica (the rebuild), and the new S1
# killed in turn is taken over again, still bitwise. With two replicas the
# one that did not take over follows the new primary and takes over at the
# next loss; with S1 and one replica lost at once, the other takes over. A
# lost replica lets its primary go on alone. A scheduler killed and started again knows the
# replicas again (they register again), so a takeover still follows; one
# that lost a replica meanwhile gets another. Async: the job goes on without
# rolling back and trains. Bad --replicas values are refused at the start. Nothing is left
# running.
. "$(dirname "$0")/lib.sh"

job() { fault_job "$@" --servers 3; }
job_bg() { fault_job_bg "$@" --servers 3 --replicas 1 --progress 0.1; }
# wait_step LOG N: until worker 0 reports step N or later.
wait_step() {
    local i s
    for i in $(seq 600); do
        s=$(grep -o 'step=[0-9]*/' "$1" | tail -1 | tr -dc 0-9)
        [ -n "$s" ] && [ "$s" -ge "$2" ] && return 0
        sleep 0.1
    done
    fail "no step $2 in $1: $(tail -3 "$1")"
}
# in_step LOG R N: until N replicas of S<R> were in step (60 s at most).
in_step() {
    local i
    for i in $(seq 600); do
        [ "$(grep -Ec "S[0-9]+ is in step with S$2\b" "$1")" -ge "$3" ] && return 0
        sleep 0.1
    done
    return 1
}
# job_ok NAME: waits for the background job, which must end 0.
job_ok() {
    wait_pid "$JOB_PID" 120 || fail "$1 hangs: $(tail -5 "$TMP/$1.log")"
    [ "$WAIT_RC" = 0 ] || fail "$1 failed: $(grep -E ' [EW] ' "$TMP/$1.log" | tail -5)"
}

job full || fail "undisturbed run failed: $(tail -5 "$TMP/full.log")"
job rep --replicas 1 || fail "undisturbed run with replicas failed: $(tail -5 "$TMP/rep.log")"
cmp -s "$TMP/full.f32" "$TMP/rep.f32" || fail "replicas changed the parameters"
expect "$TMP/rep.json" "d['replicas']['per_server'] == 1 and d['replicas']['takeovers'] == 0" \
    "replicas in the summary"
[ "$(grep -c 'S[0-9] is in step with S[0-2]' "$TMP/rep.log")" = 3 ] ||
    fail "not every server had a replica in step: $(grep -i replica "$TMP/rep.log")"

# S1 killed mid-run, its replica takes over; the respawned spare becomes the
# new replica; then the new S1 is killed too.
job_bg two --respawn 2
wait_step "$TMP/two.log" 40
S1=$(pid_of "$TMP/two.log" S1)
kill -9 "$S1"
wait_line "$TMP/two.log" "the replica of S1 is rebuilt on S[0-9]+" 60 ||
    fail "no rebuilt replica: $(grep -iE 'replica|failover' "$TMP/two.log" | tail -5)"
NEW=$(sed -n 's/.*its replica S[0-9]* (pid \([0-9]*\)) takes the rank over.*/\1/p' \
    "$TMP/two.log" | head -1)
[ -n "$NEW" ] || fail "no takeover line: $(grep failover "$TMP/two.log")"
kill -9 "$NEW"
job_ok two
cmp -s "$TMP/full.f32" "$TMP/two.f32" || fail "parameters differ after two takeovers"
expect "$TMP/two.json" "d['replicas']['takeovers'] == 2 and d['replicas']['rebuilds'] >= 1" \
    "two takeovers and a rebuild"
expect "$TMP/two.json" "d['replicas']['steps_rolled_back'] == 0" "nothing rolled back"
expect "$TMP/two.json" "all(r['takeover'] and r['steps_lost'] == 0 and r['recover_s'] >= 0
    for r in d['server_replacements'])" "takeovers in the replacements"
expect "$TMP/two.json" "d['status'] == 'ok'" "status ok"
grep -q "S1's replica took over: detected after .* s, recovered .* s later" "$TMP/two.log" ||
    fail "no recovery line: $(grep failover "$TMP/two.log")"
no_leftovers "$TMP/two.log"

# A replica lost: its primary goes on without it (nothing waits for it).
job_bg norep
wait_line "$TMP/norep.log" "S[0-9] is in step with S0" 60 || fail "S0 has no replica in step"
wait_step "$TMP/norep.log" 40
kill -9 "$(sed -n 's/.*spare S[0-9]* (pid \([0-9]*\)) becomes the replica of S0.*/\1/p' \
    "$TMP/norep.log" | head -1)"
job_ok norep
grep -q "lost a replica of S0" "$TMP/norep.log" ||
    fail "the lost replica was not seen: $(grep -i replica "$TMP/norep.log" | tail -3)"
cmp -s "$TMP/full.f32" "$TMP/norep.f32" || fail "parameters differ after a lost replica"
no_leftovers "$TMP/norep.log"

# S1 and its replica killed together: no takeover; a respawned spare takes
# S1's keys from the newest checkpoint and every server rolls back, the
# others sending their replicas a snapshot again; still bitwise.
job_bg both --respawn 2 --checkpoint-every 50 --checkpoint-dir "$TMP/ck_both"
wait_line "$TMP/both.log" "S[0-9] is in step with S1" 60 || fail "S1 has no replica in step"
wait_file "$TMP/ck_both/step-50/manifest.json" 60 || fail "no checkpoint step-50"
REP=$(sed -n 's/.*spare S[0-9]* (pid \([0-9]*\)) becomes the replica of S1.*/\1/p' \
    "$TMP/both.log" | head -1)
kill -9 "$(pid_of "$TMP/both.log" S1)" "$REP"
job_ok both
grep -Eq "failover [0-9]+: lost S1 .* spare S[0-9]+ .* every node rolls back" "$TMP/both.log" ||
    fail "no rollback failover: $(grep failover "$TMP/both.log")"
cmp -s "$TMP/full.f32" "$TMP/both.f32" || fail "parameters differ after the rollback"
no_leftovers "$TMP/both.log"

# k2_job NAME: a job with two replicas per server in the background, once
# S1's two are in step and the job is at step 40.
k2_job() {
    fault_job_bg "$1" --servers 3 --replicas 2 --progress 0.1
    in_step "$TMP/$1.log" 1 2 ||
        fail "S1 has not two replicas in step: $(grep -i replica "$TMP/$1.log" | tail -5)"
    wait_step "$TMP/$1.log" 40
}

# Two replicas each (--replicas 2). S1 killed: one replica takes over and
# the other follows the new primary (a new token, its snapshot) until it is
# in step again; then the new S1 is killed and that one takes over: two
# takeovers, still bitwise, nothing rolled back.
k2_job k2
kill -9 "$(pid_of "$TMP/k2.log" S1)"
wait_line "$TMP/k2.log" "replica S[0-9]+ follows S1's new primary" 60 ||
    fail "the other replica was not told: $(grep -iE 'replica|failover' "$TMP/k2.log" | tail -5)"
OTHER=$(sed -n "s/.*replica S\([0-9]*\) follows S1's new primary.*/\1/p" "$TMP/k2.log" | head -1)
wait_line "$TMP/k2.log" "the replica of S1 is rebuilt on S$OTHER:" 60 ||
    fail "S$OTHER is not in step with the new S1: $(grep -iE 'replica' "$TMP/k2.log" | tail -5)"
kill -9 "$(sed -n 's/.*its replica S[0-9]* (pid \([0-9]*\)) takes the rank over.*/\1/p' \
    "$TMP/k2.log" | head -1)"
job_ok k2
grep -Eq "its replica S$OTHER \(pid [0-9]+\) takes the rank over" "$TMP/k2.log" ||
    fail "S$OTHER did not take over: $(grep failover "$TMP/k2.log")"
expect "$TMP/k2.json" "d['replicas']['per_server'] == 2 and d['replicas']['takeovers'] == 2 and \
    d['replicas']['steps_rolled_back'] == 0" "two takeovers with two replicas"
cmp -s "$TMP/full.f32" "$TMP/k2.f32" || fail "parameters differ after two takeovers (K = 2)"
no_leftovers "$TMP/k2.log"

# S1 and one of its two replicas killed together: the other takes over.
k2_job k2both
REP=$(sed -n 's/.*spare S[0-9]* (pid \([0-9]*\)) becomes the replica of S1.*/\1/p' \
    "$TMP/k2both.log" | head -1)
kill -9 "$(pid_of "$TMP/k2both.log" S1)" "$REP"
job_ok k2both
expect "$TMP/k2both.json" "d['replicas']['takeovers'] >= 1 and \
    d['replicas']['steps_rolled_back'] == 0" "a takeover with a replica lost too"
cmp -s "$TMP/full.f32" "$TMP/k2both.f32" || fail "parameters differ (S1 and a replica lost)"
no_leftovers "$TMP/k2both.log"

# The scheduler killed: the launcher starts it again from its state file and
# the replicas register again as the replicas they are, so S1 killed after
# that is still taken over with nothing rolled back; they go at the end.
job_bg sched --respawn 2 --checkpoint-every 50 --checkpoint-dir "$TMP/ck_sched"
wait_line "$TMP/sched.log" "S[0-9] is in step with S1" 60 || fail "S1 has no replica in step"
wait_file "$TMP/ck_sched/step-50/manifest.json" 60 || fail "no checkpoint step-50"
kill -9 "$(pgrep -x shardps-schedul -P "$(pgrep -x shardps-launch -P "$JOB_PID")")"
wait_line "$TMP/sched.log" "registered again: the replica of S1, in step" 60 ||
    fail "S1's replica did not register again: $(grep -E ' [EW] ' "$TMP/sched.log" | tail -5)"
wait_line "$TMP/sched.log" "is back: every node registered again" 60 ||
    fail "the job did not come back: $(tail -5 "$TMP/sched.log")"
kill -9 "$(pid_of "$TMP/sched.log" S1)"
job_ok sched
grep -Eq "its replica S[0-9]+ \(pid [0-9]+\) takes the rank over" "$TMP/sched.log" ||
    fail "no takeover after the scheduler restart: $(grep failover "$TMP/sched.log")"
expect "$TMP/sched.json" "d['scheduler_restarts'] == 1 and d['replicas']['takeovers'] == 1 and \
    d['replicas']['steps_rolled_back'] == 0" "a takeover after a scheduler restart"
cmp -s "$TMP/full.f32" "$TMP/sched.f32" || fail "parameters differ after the scheduler restart"
grep -q "still running .* after the job finished" "$TMP/sched.log" &&
    fail "nodes outlived the job: $(grep 'still running' "$TMP/sched.log")"
no_leftovers "$TMP/sched.log"

# The scheduler and S0's replica killed together: the restarted scheduler
# never hears of that replica and gives S0 a respawned spare; S0 drops the
# dead one (the scheduler names all of a primary's replicas), so no reply
# waits for it and the job ends, bitwise.
job_bg schedrep --respawn 2 --checkpoint-every 50 --checkpoint-dir "$TMP/ck_schedrep"
wait_line "$TMP/schedrep.log" "S[0-9] is in step with S0" 60 || fail "S0 has no replica in step"
wait_file "$TMP/ck_schedrep/step-50/manifest.json" 60 || fail "no checkpoint step-50"
kill -9 "$(pgrep -x shardps-schedul -P "$(pgrep -x shardps-launch -P "$JOB_PID")")" \
    "$(sed -n 's/.*spare S[0-9]* (pid \([0-9]*\)) becomes the replica of S0.*/\1/p' \
        "$TMP/schedrep.log" | head -1)"
wait_line "$TMP/schedrep.log" "is back: every node registered again" 60 ||
    fail "the job did not come back: $(tail -5 "$TMP/schedrep.log")"
job_ok schedrep
[ "$(grep -Ec "S[0-9]+ is in step with S0\b" "$TMP/schedrep.log")" -ge 2 ] ||
    fail "S0 got no new replica: $(grep -i replica "$TMP/schedrep.log" | tail -5)"
cmp -s "$TMP/full.f32" "$TMP/schedrep.f32" ||
    fail "parameters differ after the scheduler and a replica were lost"
no_leftovers "$TMP/schedrep.log"

# Async: S1 killed, its replica takes over, the job goes on and trains.
job_bg async --mode async
wait_step "$TMP/async.log" 100
kill -9 "$(pid_of "$TMP/async.log" S1)"
job_ok async
expect "$TMP/async.json" "d['replicas']['takeovers'] == 1 and \
    d['server_replacements'][0]['steps_lost'] == 0" "an async takeover"
expect "$TMP/async.json" "d['status'] == 'ok' and d['test_accuracy'] >= 0.75" "async trains"
no_leftovers "$TMP/async.log"

# Bad values are refused at the start, with a line saying why.
for bad in "--replicas 4" "--replicas -1" "--replicas 1 --mode ssp:1" "--replicas 1 --compress topk:0.1"; do
    # shellcheck disable=SC2086
    "$LAUNCH" --servers 2 --workers 1 --max-steps 5 $bad >"$TMP/bad.log" 2>&1
    rc=$?
    [ "$rc" = 2 ] || fail "$bad: exit $rc, not 2"
    grep -q -- "--replicas" "$TMP/bad.log" || fail "$bad: no line naming --replicas"
done
check_logs
echo "ok"
