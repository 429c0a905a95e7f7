#!/usr/bin/env bash
# tests/integration/test_addresses.sh - a node never hands a loopback
# address to a peer on another host.
#
# Four "hosts" (network namespaces of shardps-netsim), each role started as
# a cluster manager would: `shardps-launch --node` with SHARDPS_ROLE. Each
# host has its own /etc/hosts (bind-mounted in a private mount namespace):
# on the head host, PFXc, the head's name is 127.0.1.1 as Debian's
# /etc/hosts makes it; on the others it is the head's address.
#
#   PFXc:   the scheduler and server 0, both reaching the scheduler at
#           tcp://shardps-head:9000, that is over loopback
#   PFXs1:  server 1, with SHARDPS_ADVERTISE=shardps-s1 (a name the workers'
#           hosts files know)
#   PFXw0/1: the workers
#
# Asserts: every process exits 0, so the workers reached server 0; server 0
# is announced at the head's address toward the other hosts, server 1 at
# tcp://shardps-s1, no node at a 127.x address (the summary lists the
# endpoints the view carried); the preflight ran without being asked
# (--node: roles on several hosts); the scheduler says where the nodes of
# its host are announced. Skips (77) where namespaces cannot be made (not
# root, no kernel support) or a mount namespace cannot bind /etc/hosts.
. "$(dirname "$0")/lib.sh"

netsim_up 2 2
HEAD=shardps-head
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$HEAD" >"$TMP/hosts.head"
printf '127.0.0.1 localhost\n%s %s\n%s shardps-s1\n' "${ADDR[c]}" "$HEAD" "${ADDR[s1]}" \
    >"$TMP/hosts.other"
ip netns exec "${NS[c]}" unshare -m --propagation private \
    sh -c 'mount --bind "$0" /etc/hosts && getent hosts shardps-head' "$TMP/hosts.head" \
    >"$TMP/probe.out" 2>&1 || skip "cannot bind a hosts file in a mount namespace: $(cat "$TMP/probe.out")"
grep -q '^127\.0\.1\.1 ' "$TMP/probe.out" || fail "the head's name is not 127.0.1.1 there: $(cat "$TMP/probe.out")"

JOB=(SHARDPS_SERVERS=2 SHARDPS_WORKERS=2 SHARDPS_SCHEDULER_HOST=$HEAD SHARDPS_PORT=9000
    SHARDPS_JOB_ID=addr-$$ SHARDPS_MAX_STEPS=30 SHARDPS_EPOCHS=1 SHARDPS_SEED=11
    SHARDPS_BATCH=32 SHARDPS_CONNECT_TIMEOUT=60)
# on_host NAME NS HOSTS VAR=VALUE...: NAME's task of the job in namespace NS
# with the hosts file HOSTS, as the manager starts it (env -i).
declare -A TASK
on_host() {
    local name=$1 ns=$2 hosts=$3
    shift 3
    start "$name" ip netns exec "${NS[$ns]}" unshare -m --propagation private \
        sh -c 'mount --bind "$0" /etc/hosts && shift && exec "$@"' "$hosts" -- \
        env -i PATH=/usr/bin:/bin "${JOB[@]}" "$@" "$LAUNCH" --node
    TASK[$name]=$LAST_PID
}
on_host C c "$TMP/hosts.head" SHARDPS_ROLE=scheduler SHARDPS_SUMMARY="$TMP/c.json"
on_host S0 c "$TMP/hosts.head" SHARDPS_ROLE=server SHARDPS_RANK=0
on_host S1 s1 "$TMP/hosts.other" SHARDPS_ROLE=server SHARDPS_RANK=1 SHARDPS_ADVERTISE=shardps-s1
on_host W0 w0 "$TMP/hosts.other" SHARDPS_ROLE=worker SHARDPS_RANK=0
on_host W1 w1 "$TMP/hosts.other" SHARDPS_ROLE=worker SHARDPS_RANK=1

for t in W0 W1 S0 S1 C; do
    wait_pid "${TASK[$t]}" 120 || fail "$t still running after 120 s: $(tail -5 "$TMP/$t.log")"
    [ "$WAIT_RC" -eq 0 ] || fail "$t exited with status $WAIT_RC: $(tail -5 "$TMP/$t.log")"
done
grep -q "^.*task is S0 of job addr-$$ .*scheduler at tcp://$HEAD:9000" "$TMP/S0.log" ||
    fail "S0 was not a task of the job: $(head -3 "$TMP/S0.log")"
expect "$TMP/c.json" "d['status'] == 'ok'" "the job did not end ok"
expect "$TMP/c.json" "{n['node']: n['endpoint'].rsplit(':', 1)[0] for n in d['nodes'] \
    if n['node'][0] == 'S'} == {'S0': 'tcp://${ADDR[c]}', 'S1': 'tcp://shardps-s1'}" \
    "the servers are not announced at tcp://${ADDR[c]} (S0, on the head) and tcp://shardps-s1 (S1)"
expect "$TMP/c.json" "not [n for n in d['nodes'] if '//127.' in n.get('endpoint', '')]" \
    "a node is announced at a loopback address"
expect "$TMP/c.json" "len(d['preflight']) == 4" "the preflight did not run by default under --node"
grep -q "nodes on this host are announced at ${ADDR[c]} " "$TMP/C.log" ||
    fail "the scheduler does not say where its host's nodes are announced: $(grep -m3 announced "$TMP/C.log")"
check_logs
netsim_down || fail "the simulated cluster was not removed"
echo "ok: S0 on the head host (its name 127.0.1.1 there) announced at ${ADDR[c]}, S1 at shardps-s1, preflight by default"
