#!/usr/bin/env bash
# tests/integration/test_preflight.sh - --preflight: before step 0 every worker
# probes every server; the scheduler logs the table and refuses to start on an
# unreachable pair, naming it.
#
# Five network namespaces as hosts (the simulated cluster, netsim_up):
# scheduler, 2 servers, 2 workers. First with every pair reachable: the job ends ok and the summary's
# preflight has 4 reached pairs with a round trip and a rate. Then the same
# hosts with one rule in W1's namespace, a blackhole route to S0's address:
# the job fails before step 0 (no worker trained a step), the scheduler names
# "W1 cannot reach S0 at tcp://<S0's address>" in its failure and its table
# line, and the summary says W1 -> S0 was not reached while W1 -> S1 and
# W0 -> S0 were. Skips (77) where namespaces cannot be made.
. "$(dirname "$0")/lib.sh"

JOB=(--servers 2 --workers 2 --max-steps 30 --batch 32 --preflight)
netsim_up 2 2

# run NAME: the job across the namespaces; the scheduler's exit status in RC.
run() {
    local name=$1 role
    rm -f "$TMP/c.ep"
    in_ns c "$SCHED" --bind "tcp://${ADDR[c]}:*" --endpoint-file "$TMP/c.ep" "${JOB[@]}" \
        --summary "$TMP/$name.json"
    wait_file "$TMP/c.ep" 15 || fail "$name: no scheduler endpoint: $(cat "$TMP/c.log")"
    local ep
    ep=$(cat "$TMP/c.ep")
    in_ns s0 "$SERVER" --scheduler "$ep" --bind "tcp://${ADDR[s0]}:*" --rank 0
    in_ns s1 "$SERVER" --scheduler "$ep" --bind "tcp://${ADDR[s1]}:*" --rank 1
    in_ns w0 "$WORKER" --scheduler "$ep" --rank 0 --progress 0.05
    in_ns w1 "$WORKER" --scheduler "$ep" --rank 1
    wait_pid "${PID[c]}" 120 || fail "$name: scheduler still running: $(tail -5 "$TMP/c.log")"
    RC=$WAIT_RC
    for role in s0 s1 w0 w1; do
        wait_pid "${PID[$role]}" 60 || fail "$name: $role still running: $(tail -5 "$TMP/$role.log")"
    done
    cp "$TMP/c.log" "$TMP/$name.c.txt"
    cat "$TMP/w0.log" "$TMP/w1.log" >"$TMP/$name.w.txt"
}

run ok
[ "$RC" -eq 0 ] || fail "reachable: the job failed: $(tail -5 "$TMP/ok.c.txt")"
expect "$TMP/ok.json" "d['status'] == 'ok' and len(d['preflight']) == 4 and \
    all(p['reached'] and p['rtt_ms'] > 0 and p['mbytes_per_s'] > 0 for p in d['preflight'])" \
    "reachable: the preflight does not list 4 reached pairs"
echo "ok - every pair reachable: job ok; $(grep -m1 ' W1 -> S0 ' "$TMP/ok.c.txt" | cut -d' ' -f2-)"

# One rule: W1's host drops everything to S0's address.
ip -n "${NS[w1]}" route add blackhole "${ADDR[s0]}/32" ||
    skip "cannot add a blackhole route in a namespace"
run blocked
S0_AT="tcp://${ADDR[s0]}:"
[ "$RC" -eq 1 ] || fail "blocked: scheduler exit $RC, expected 1: $(tail -5 "$TMP/blocked.c.txt")"
expect "$TMP/blocked.json" "d['status'] == 'failed' and \
    d['failure'].startswith('preflight: W1 cannot reach S0 at $S0_AT')" \
    "blocked: the failure does not name W1 -> S0"
expect "$TMP/blocked.json" "[(p['worker'], p['server']) for p in d['preflight'] \
    if not p['reached']] == [(1, 0)]" "blocked: other pairs than W1 -> S0 unreached"
grep -Eq " W1 -> S0 tcp://${ADDR[s0]//./\\.}:[0-9]+ +UNREACHABLE" "$TMP/blocked.c.txt" ||
    fail "blocked: no table line naming W1 -> S0: $(grep -A5 'preflight:' "$TMP/blocked.c.txt")"
! grep -q "step=" "$TMP/blocked.w.txt" || fail "blocked: a worker trained: $(grep -m2 step= "$TMP/blocked.w.txt")"
echo "ok - blackhole W1 -> S0: $(field "$TMP/blocked.json" "d['failure']")"

check_logs
netsim_down || fail "the simulated cluster was not removed"
echo "ok: preflight table on 4 pairs; a blocked pair named before step 0"
