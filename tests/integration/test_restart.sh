#!/usr/bin/env bash
# tests/integration/test_restart.sh - the scheduler dies mid-run and a
# restarted one brings the job back, changing nothing it trains.
#
# A sync MLP job by hand, 2 servers x 2 workers, checkpoints every 50 steps,
# nodes with --scheduler-grace 60: the scheduler is killed with SIGKILL
# mid-run and `shardps-scheduler --resume DIR` started at once at the same
# endpoint: it reads DIR/scheduler.state, refuses the nodes' heartbeats as
# unknown, every node registers again and the job ends normally. Asserts: every process exits 0; the final parameters are
# bitwise those of the same job run without a kill; the summary says ok, one
# scheduler restart and the job's steps; a checkpoint taken after the restart
# is complete. The same when the scheduler comes back only after the nodes
# missed it. After a restart, a server killed with SIGKILL is replaced by a
# spare started by hand: the restarted scheduler gives the spare the
# workers' tokens of before (they are in its state), so the job still ends
# bitwise. A corrupt state file is named and not used.
. "$(dirname "$0")/lib.sh"

JOB=(--servers 2 --workers 2 --epochs 1 --max-steps 600 --seed 11 --batch 32
    --peer-timeout 3)
NODE=(--peer-timeout 3 --scheduler-grace 60)

# run NAME [scheduler flags...]: the job by hand; sets pid[] of its nodes.
declare -A pid
run() {
    local name=$1
    shift
    start_scheduler "${name}_sched" "${JOB[@]}" --summary "$TMP/$name.json" "$@"
    pid[C]=$SCHED_PID
    for i in 0 1; do
        start "${name}_s$i" "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*' \
            "${NODE[@]}"
        pid[s$i]=$LAST_PID
    done
    for i in 0 1; do
        start "${name}_w$i" "$WORKER" --scheduler "$SCHED_EP" --dump-params \
            "$TMP/$name.w$i.f32" --progress 0.2 "${NODE[@]}"
        pid[w$i]=$LAST_PID
    done
}

# wait_nodes NAME: every node exits 0.
wait_nodes() {
    for n in w0 w1 s0 s1; do
        wait_pid "${pid[$n]}" 200 || fail "$n of $1 still running: $(tail -5 "$TMP/$1_$n.log")"
        [ "$WAIT_RC" = 0 ] || fail "$n of $1 exited $WAIT_RC: $(tail -5 "$TMP/$1_$n.log")"
    done
}

# The reference: no kill.
run ref
wait_nodes ref
wait_pid "${pid[C]}" 30 && [ "$WAIT_RC" = 0 ] || fail "reference scheduler: $(tail -5 "$TMP/ref_sched.log")"

# The same job; its scheduler is killed after step ~150 and started again.
CK=$TMP/ck
run cut --checkpoint-dir "$CK" --checkpoint-every 50
ep=$SCHED_EP
for i in $(seq 1 600); do
    [ -s "$CK/latest" ] && [ "$(cat "$CK/latest")" != step-50 ] && break
    sleep 0.05
done
[ -s "$CK/scheduler.state" ] || fail "no scheduler state in $CK: $(ls "$CK")"
kill -9 "${pid[C]}"
wait "${pid[C]}" 2>/dev/null
killed_at=$(cat "$CK/latest")
# At once a new one at the same endpoint: the nodes' heartbeats reach it
# before they miss the old one (--peer-timeout 3); it refuses them as
# unknown, and they register again.
start cut_sched2 "$SCHED" --bind "$ep" "${JOB[@]}" --resume "$CK" --summary "$TMP/cut.json"
pid[C]=$LAST_PID
wait_nodes cut
wait_pid "${pid[C]}" 30 || fail "restarted scheduler still running"
[ "$WAIT_RC" = 0 ] || fail "restarted scheduler exited $WAIT_RC: $(tail -5 "$TMP/cut_sched2.log")"
grep -q "is back: every node registered again" "$TMP/cut_sched2.log" ||
    fail "no recovery line: $(tail -5 "$TMP/cut_sched2.log")"
for n in s0 s1 w0 w1; do
    grep -q "registered again with the scheduler" "$TMP/cut_$n.log" ||
        fail "$n did not register again: $(tail -3 "$TMP/cut_$n.log")"
done

for i in 0 1; do
    cmp -s "$TMP/ref.w$i.f32" "$TMP/cut.w$i.f32" ||
        fail "W$i's parameters differ from the run without a scheduler restart"
done
expect "$TMP/cut.json" "d['status'] == 'ok'" "job not finished"
expect "$TMP/cut.json" "d['scheduler_restarts'] == 1" "one scheduler restart"
expect "$TMP/cut.json" "d['steps'] == 600 and d['worker_steps'] == [600, 600]" "every step"
last=$(cat "$CK/latest")
[ "${last#step-}" -gt "${killed_at#step-}" ] ||
    fail "no checkpoint completed after the restart ($killed_at, then $last)"
[ -s "$CK/$last/manifest.json" ] || fail "$last has no manifest"

# Later: the scheduler comes back only after the nodes missed it (they go
# on; the workers may even finish and wait with their DONE, sent again).
CK2=$TMP/ck2
run late --checkpoint-dir "$CK2" --checkpoint-every 50
ep=$SCHED_EP
wait_file "$CK2/step-100/manifest.json" 60 || fail "late: no checkpoint step-100"
kill -9 "${pid[C]}"
wait "${pid[C]}" 2>/dev/null
for i in $(seq 1 300); do
    grep -q "going on and registering again" "$TMP/late_s0.log" && break
    sleep 0.05
done
grep -q "going on and registering again" "$TMP/late_s0.log" ||
    fail "late: S0 did not go on without the scheduler: $(tail -3 "$TMP/late_s0.log")"
start late_sched2 "$SCHED" --bind "$ep" "${JOB[@]}" --resume "$CK2" --summary "$TMP/late.json"
pid[C]=$LAST_PID
wait_nodes late
wait_pid "${pid[C]}" 30 && [ "$WAIT_RC" = 0 ] ||
    fail "late: restarted scheduler: $(tail -5 "$TMP/late_sched2.log")"
for i in 0 1; do
    cmp -s "$TMP/ref.w$i.f32" "$TMP/late.w$i.f32" || fail "late: W$i's parameters differ"
done
expect "$TMP/late.json" "d['status'] == 'ok' and d['scheduler_restarts'] == 1" "late restart"

# A failover after a restart: the spare needs the workers' tokens, which
# only the old scheduler drew.
CK3=$TMP/ck3
run fo --checkpoint-dir "$CK3" --checkpoint-every 50
ep=$SCHED_EP
wait_file "$CK3/step-50/manifest.json" 60 || fail "fo: no checkpoint step-50"
kill -9 "${pid[C]}"
wait "${pid[C]}" 2>/dev/null
start fo_sched2 "$SCHED" --bind "$ep" "${JOB[@]}" --resume "$CK3" --summary "$TMP/fo.json" \
    --checkpoint-every 50
pid[C]=$LAST_PID
wait_file "$TMP/fo_sched2.log" 10
for i in $(seq 1 300); do
    grep -q "is back: every node registered again" "$TMP/fo_sched2.log" && break
    sleep 0.05
done
grep -q "is back" "$TMP/fo_sched2.log" || fail "fo: the job did not come back: $(tail -3 "$TMP/fo_sched2.log")"
start fo_spare "$SERVER" --scheduler "$ep" --bind 'tcp://127.0.0.1:*' "${NODE[@]}"
pid[spare]=$LAST_PID
for i in $(seq 1 200); do
    grep -q "registered spare" "$TMP/fo_sched2.log" && break
    sleep 0.05
done
grep -q "registered spare" "$TMP/fo_sched2.log" || fail "fo: no spare: $(tail -3 "$TMP/fo_spare.log")"
kill -9 "${pid[s1]}"
pid[s1]=${pid[spare]}
wait_nodes fo
wait_pid "${pid[C]}" 30 && [ "$WAIT_RC" = 0 ] ||
    fail "fo: restarted scheduler: $(grep -E ' [EW] ' "$TMP/fo_sched2.log" | tail -5)"
S=$(sed -n 's/.*registered as S\([01]\).*/\1/p' "$TMP/fo_s1.log")
grep -q "failover 1: lost S$S (pid [0-9]*): its connection closed" "$TMP/fo_sched2.log" ||
    fail "fo: S$S's closed connection not seen: $(grep failover "$TMP/fo_sched2.log")"
grep -q "failover 1: S$S replaced" "$TMP/fo_sched2.log" ||
    fail "fo: S$S was not replaced: $(grep failover "$TMP/fo_sched2.log")"
! grep -q "token does not match" "$TMP"/fo_*.log ||
    fail "fo: requests refused as forged: $(grep -h 'token does not match' "$TMP"/fo_*.log | head -2)"
for i in 0 1; do
    cmp -s "$TMP/ref.w$i.f32" "$TMP/fo.w$i.f32" || fail "fo: W$i's parameters differ"
done
expect "$TMP/fo.json" "d['status'] == 'ok' and d['scheduler_restarts'] == 1" "fo: restart"
expect "$TMP/fo.json" "[r['rank'] for r in d['server_replacements']] == [$S]" "fo: S$S replaced"

# A corrupt state is named and not used.
printf 'X' | dd of="$CK/scheduler.state" bs=1 seek=40 conv=notrunc 2>/dev/null
start bad_sched "$SCHED" --bind 'tcp://127.0.0.1:*' --endpoint-file "$TMP/bad.ep" "${JOB[@]}" \
    --resume "$CK" --wait 3
wait_file "$TMP/bad.ep" 15 || fail "no endpoint"
wait_pid "$LAST_PID" 30
grep -q "scheduler.state: it is corrupt; its nodes cannot register again" "$TMP/bad_sched.log" ||
    fail "the corrupt state was not named: $(cat "$TMP/bad_sched.log")"
check_logs
echo "ok: scheduler killed after $killed_at, restarted, parameters bitwise equal; newest checkpoint $last"
