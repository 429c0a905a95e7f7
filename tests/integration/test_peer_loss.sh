#!/usr/bin/env bash
# tests/integration/test_peer_loss.sh - no process waits forever on a dead peer.
#
# Four runs of a long job (2 servers, 2 workers, many epochs), each killed with
# SIGKILL once worker 0 logs training progress:
#   worker   - W1 dies: the scheduler, both servers and W0 exit non-zero within
#              10 s; the scheduler's summary says failed, lost W1, and it logs
#              "lost peer W1", the others "job aborted ... lost peer W1".
#   server   - S0 dies: likewise, naming S0.
#   sched    - the scheduler dies: servers and workers exit non-zero within
#              10 s, each naming the lost scheduler and its endpoint.
#   launcher - W1 of a shardps-launch job dies: the launcher exits non-zero
#              within 10 s, names W1, and leaves no process of its session.
# "Non-zero" means a clean failure (1..127), not a crash or a sanitizer abort.
# The 10 s bound is the liveness requirement: the default peer timeout is 5 s.
. "$(dirname "$0")/lib.sh"

LIMIT=10
JOB=(--epochs 50 --batch 32 --seed 3)
export SHARDPS_PROGRESS=0.2 # worker 0 reports progress early (also via the launcher)

now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

# Starts scheduler, 2 servers and 2 workers for run $1; fills PID[$1.X].
declare -A PID
start_job() {
    local run=$1 i
    start_scheduler "$run.C" --servers 2 --workers 2 "${JOB[@]}" --summary "$TMP/$run.json"
    PID[$run.C]=$SCHED_PID
    EP[$run]=$SCHED_EP
    for i in 0 1; do
        start "$run.S$i" "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*' --rank $i
        PID[$run.S$i]=$LAST_PID
    done
    for i in 0 1; do
        start "$run.W$i" "$WORKER" --scheduler "$SCHED_EP" --rank $i
        PID[$run.W$i]=$LAST_PID
    done
    wait_line "$TMP/$run.W0.log" "step=[0-9]+/" 90 ||
        fail "$run: no training progress: $(tail -3 "$TMP/$run.W0.log" "$TMP/$run.C.log")"
}
declare -A EP

# Waits until every pid in "$@" has exited, at most $LIMIT s after $T0 (ms);
# fails naming those still running; sets RC[pid].
declare -A RC
wait_all() {
    local run=$1 p left
    shift
    while :; do
        left=0
        for p in "$@"; do
            kill -0 "${PID[$run.$p]}" 2>/dev/null && left=1
        done
        [ $left -eq 0 ] && break
        if [ $(($(now_ms) - T0)) -gt $((LIMIT * 1000)) ]; then
            local alive=""
            for p in "$@"; do
                kill -0 "${PID[$run.$p]}" 2>/dev/null && alive="$alive $p"
            done
            fail "$run: still running ${LIMIT} s after the kill:$alive"
        fi
        sleep 0.1
    done
    for p in "$@"; do
        wait "${PID[$run.$p]}"
        RC[$run.$p]=$?
    done
}

# Asserts that role $2 of run $1 failed cleanly and logged a line matching $3.
check_failed() {
    local run=$1 role=$2 re=$3 rc=${RC[$1.$2]}
    [ "$rc" -ge 1 ] && [ "$rc" -le 127 ] ||
        fail "$run: $role exited with status $rc, expected a clean failure: $(tail -3 "$TMP/$run.$role.log")"
    grep -Eq "$re" "$TMP/$run.$role.log" ||
        fail "$run: $role's log has no line matching '$re': $(tail -3 "$TMP/$run.$role.log")"
}

# Run $1: role $2 dies; the scheduler and every other role ($4...) must stop
# cleanly, naming it. $3 says who stopped, for the log line.
peer_dies() {
    local run=$1 victim=$2 who=$3 r
    shift 3
    start_job "$run"
    kill -9 "${PID[$run.$victim]}"
    T0=$(now_ms)
    wait_all "$run" C "$@"
    check_failed "$run" C "lost peer $victim"
    expect "$TMP/$run.json" "d['status'] == 'failed' and d['lost'] == '$victim'" \
        "$run: the scheduler's summary does not name $victim as lost"
    for r in "$@"; do
        check_failed "$run" "$r" "job aborted.*lost peer $victim"
    done
    echo "$run: $who stopped in $(($(now_ms) - T0)) ms, naming $victim"
}

# --- a worker dies, a server dies ---------------------------------------------
peer_dies worker W1 "scheduler, servers and W0" S0 S1 W0
peer_dies server S0 "scheduler, S1 and workers" S1 W0 W1

# --- the scheduler dies -----------------------------------------------------
start_job sched
kill -9 "${PID[sched.C]}"
T0=$(now_ms)
wait_all sched S0 S1 W0 W1
for r in S0 S1 W0 W1; do
    check_failed sched $r "lost the scheduler at ${EP[sched]//./\\.}"
done
echo "sched: servers and workers stopped in $(($(now_ms) - T0)) ms, naming the scheduler"

# --- a worker of a launcher job dies ----------------------------------------
# setsid: the launcher leads a session of its own, so every process it starts
# (each in its own process group) is found with pgrep -s, and nothing else is.
start launch.L setsid "$LAUNCH" --servers 2 --workers 2 "${JOB[@]}"
LPID=$LAST_PID
PID[launch.L]=$LPID
for i in $(seq 1 100); do # setsid has exec'd the launcher as the session's leader
    [ "$(ps -o sid= -p "$LPID" | tr -d ' ')" = "$LPID" ] && break
    sleep 0.1
done
[ "$(ps -o sid= -p "$LPID" | tr -d ' ')" = "$LPID" ] ||
    fail "launch: the launcher (pid $LPID) does not lead its own session"
wait_line "$TMP/launch.L.log" "W0 I epoch=1/[0-9]+ step=" 90 ||
    fail "launch: no training progress: $(tail -5 "$TMP/launch.L.log")"
kids=$(pgrep -s "$LPID" | grep -vx "$LPID" | tr '\n' ' ')
[ "$(echo $kids | wc -w)" -eq 5 ] || fail "launch: expected 5 processes under the launcher, found: $kids"
W1=$(pgrep -s "$LPID" -f "shardps-worker .*--rank 1( |$)")
[ -n "$W1" ] && [ "$(echo $W1 | wc -w)" -eq 1 ] || fail "launch: cannot find W1 among $kids"
kill -9 "$W1"
T0=$(now_ms)
wait_all launch L
[ "${RC[launch.L]}" -ge 1 ] && [ "${RC[launch.L]}" -le 127 ] ||
    fail "launch: the launcher exited with status ${RC[launch.L]}: $(tail -3 "$TMP/launch.L.log")"
grep -q "W1" <(grep -E " L [EW] " "$TMP/launch.L.log") ||
    fail "launch: the launcher's messages do not name W1: $(grep -E ' L ' "$TMP/launch.L.log" | tail -3)"
left=$(pgrep -s "$LPID")
[ -z "$left" ] || fail "launch: processes left after the launcher exited: $(ps -o pid,args -p "$(echo $left | tr ' ' ,)")"
for k in $kids; do
    kill -0 "$k" 2>/dev/null && fail "launch: process $k outlived the launcher"
done
echo "launch: launcher exited ${RC[launch.L]} in $(($(now_ms) - T0)) ms, nothing left"
check_logs
echo "ok"
