#!/usr/bin/env bash
# tests/integration/test_netns.sh - one job across five "hosts": each role in
# its own network namespace with its own address, like a small cluster.
#
# Layout (tests/integration/netns_lib.sh; names carry $$, the subnet
# 10.200.X.0/24 a random X, so runs can go in parallel; the root namespace is
# never touched):
#
#   sps<pid>hub:  bridge br0 <- veth vc, vs0, vs1, vw0, vw1
#   sps<pid>c:    eth0 10.200.X.10  scheduler --bind tcp://10.200.X.10:*
#   sps<pid>s0:   eth0 10.200.X.11  server --bind tcp://0.0.0.0:* (advertised
#                                   as the address the scheduler sees)
#   sps<pid>s1:   eth0 10.200.X.12  server --bind tcp://10.200.X.12:*
#   sps<pid>w0/1: eth0 10.200.X.13/14 workers
#
# Asserts: every process exits 0; the scheduler registered both servers at
# their namespace addresses (not 127.x, not 0.0.0.0) and put those in the shard
# map; the final parameters are bitwise equal to a loopback launcher run of the
# same job; everything created is removed again. Skips (77) when namespaces,
# veth pairs or bridges cannot be created (not root, no kernel support).
. "$(dirname "$0")/lib.sh"

. "$(dirname "$0")/netns_lib.sh"

JOB=(--max-steps 30 --epochs 1 --seed 11 --batch 32)
netns_hosts c s0 s1 w0 w1

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

# Tear down now and check nothing of ours is left.
netns_cleanup
left=$(netns_left)
[ -z "$left" ] || fail "namespaces left behind: $left"
echo "ok: 5 namespaces on $NET.0/24, parameters bitwise equal to loopback"
