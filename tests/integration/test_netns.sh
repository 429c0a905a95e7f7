#!/usr/bin/env bash
# tests/integration/test_netns.sh - one job across five "hosts": each role in
# its own network namespace with its own address, like a small cluster.
#
# Layout (the simulated cluster, bench/netsim, unshaped: names carry
# shardps-netsim's pid, so runs can go in parallel; the root namespace is
# never touched):
#
#   PFXhub:  routes between the veth links vc, vs0, vs1, vw0, vw1
#   PFXc:    eth0 ADDR[c]   scheduler --bind tcp://ADDR[c]:*
#   PFXs0:   eth0 ADDR[s0]  server --bind tcp://0.0.0.0:* (advertised as the
#                           address the scheduler sees)
#   PFXs1:   eth0 ADDR[s1]  server --bind tcp://ADDR[s1]:*
#   PFXw0/1: eth0           workers
#
# Asserts: every process exits 0; the scheduler registered both servers at
# their namespace addresses (not 127.x, not 0.0.0.0) and put those in the shard
# map; the final parameters are bitwise equal to a loopback launcher run of the
# same job; everything created is removed again. Skips (77) when namespaces
# or veth pairs cannot be created (not root, no kernel support).
. "$(dirname "$0")/lib.sh"

JOB=(--max-steps 30 --epochs 1 --seed 11 --batch 32)
netsim_up 2 2

# The reference: the same job on loopback through the launcher.
"$LAUNCH" --servers 2 --workers 2 "${JOB[@]}" --dump-params "$TMP/loopback.f32" \
    --log-level warn >"$TMP/loopback.log" 2>&1 ||
    fail "loopback run failed: $(tail -5 "$TMP/loopback.log")"

in_ns c "$SCHED" --bind "tcp://${ADDR[c]}:*" --endpoint-file "$TMP/c.ep" \
    --servers 2 --workers 2 "${JOB[@]}" --summary "$TMP/c.json"
wait_file "$TMP/c.ep" 15 || fail "scheduler did not write its endpoint: $(cat "$TMP/c.log")"
EP=$(cat "$TMP/c.ep")
case $EP in
tcp://${ADDR[c]}:[0-9]*) ;;
*) fail "scheduler endpoint '$EP' is not on ${ADDR[c]}" ;;
esac
in_ns s0 "$SERVER" --scheduler "$EP" --bind 'tcp://0.0.0.0:*'
in_ns s1 "$SERVER" --scheduler "$EP" --bind "tcp://${ADDR[s1]}:*"
in_ns w0 "$WORKER" --scheduler "$EP" --rank 0 --dump-params "$TMP/netns.f32"
in_ns w1 "$WORKER" --scheduler "$EP" --rank 1

for role in w0 w1 s0 s1 c; do
    wait_pid "${PID[$role]}" 120 || fail "$role still running after 120 s: $(tail -5 "$TMP/$role.log")"
    [ "$WAIT_RC" -eq 0 ] || fail "$role exited with status $WAIT_RC: $(tail -5 "$TMP/$role.log")"
done

# The servers registered at their own addresses (ranks in either order), and
# the view carries those: the summary lists the endpoints the view was cut with.
expect "$TMP/c.json" "sorted(n['endpoint'].rsplit(':', 1)[0] for n in d['nodes'] \
    if n['node'][0] == 'S') == sorted(['tcp://${ADDR[s0]}', 'tcp://${ADDR[s1]}'])" \
    "the servers were not advertised at ${ADDR[s0]} and ${ADDR[s1]}"

params_close "$TMP/netns.f32" "$TMP/loopback.f32" 0 ||
    fail "the namespace run's parameters differ from the loopback run's"

check_logs

# Tear down now; netsim_down checks nothing of ours is left.
netsim_down || fail "the simulated cluster was not removed"
echo "ok: 5 namespaces ($PFX*), parameters bitwise equal to loopback"
