#!/usr/bin/env bash
# tests/integration/test_bench_net.sh - shardps-bench train --net builds a
# simulated cluster, runs the job in it and removes it.
#
# A sync and an ssp MLP job, 2 servers x 2 workers, a few steps, on
# 1gbit,0.2ms links (ssp pulls behind its pushes to other hosts' servers):
# the bench makes one namespace per role plus the hub (its set-up log shows
# each, a tbf on both ends of each link and the delay line's TUN device in
# the hub with the routes into it), every role runs in its namespace (the
# servers announce 10.99.x.y endpoints; the worker evaluates with
# --eval-every), packets went through the delay line (its busiest thread's
# share in the Links table beside the row's bound), the rows are ok, and
# afterwards none of its namespaces and none of the job's processes is left.
# Then a job on 100mbit,20ms links, stopped by SIGINT halfway: while it
# trains, a TCP connect from worker 0's namespace to the scheduler (one round
# trip) takes at least 2 x 20 ms (a lower bound: the delay is there; no
# upper bound is judged); then exit 130, and again nothing left. A job
# without DELAY (1gbit) runs with no delay line; traced (--job-flags
# --trace), its roles' files are merged into one. Bad RATE or
# DELAY values are one-line usage errors. With --placement colocated each
# server runs on its worker's address and the summary says so. Skips with the reason when the
# network cannot be made here (the bench says so and exits 0).
. "$(dirname "$0")/lib.sh"

BENCH=$SPS_BUILD/bench/shardps-bench

# Bad --net values are bad usage, before anything is made.
"$BENCH" train --net 1gbps --out "$TMP/bad" 2>"$TMP/bad.log"
[ $? = 2 ] || fail "--net 1gbps accepted"
grep -q "expected RATE\[,DELAY\]" "$TMP/bad.log" || fail "no reason for --net 1gbps: $(cat "$TMP/bad.log")"
for spec in 1gbit,20 1gbit,fast 1gbit,0ms 1gbit,2s; do
    "$BENCH" train --net $spec --out "$TMP/bad" 2>"$TMP/bad.log"
    [ $? = 2 ] || fail "--net $spec accepted"
    [ "$(wc -l <"$TMP/bad.log")" = 1 ] && grep -q "bad DELAY" "$TMP/bad.log" ||
        fail "no one-line reason for --net $spec: $(cat "$TMP/bad.log")"
done
for spec in 1gbit,mtu=100 1gbit,mtu= 1gbit,mtu=9k 1gbit,queue=100 1gbit,queue=64k \
    1gbit,0.2ms,mtu=9000,mtu=9000 1gbit,queue=65536,mtu=9000,queue=65536; do
    "$BENCH" train --net $spec --out "$TMP/bad" 2>"$TMP/bad.log"
    [ $? = 2 ] || fail "--net $spec accepted"
    [ "$(wc -l <"$TMP/bad.log")" = 1 ] &&
        grep -Eq "bad '(mtu=.*BYTES from 1280 to 65000|queue=.*BYTES from 16384 to )|'(mtu|queue)' given twice" \
            "$TMP/bad.log" ||
        fail "no one-line reason for --net $spec: $(cat "$TMP/bad.log")"
done
"$BENCH" train --join --out "$TMP/bad" 2>"$TMP/bad.log"
[ $? = 2 ] || fail "--join without --net accepted"

# The namespaces of the bench run whose stderr is $1, and whether any is left.
prefix_of() {
    grep -Eo "simulated network spsb[0-9]+" "$1" | head -1 | awk '{print $3}'
}
left_of() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$1(hub|c|s[0-9]+|w[0-9]+)$" || true
}

"$BENCH" train --net 1gbit,0.2ms --servers 2 --workers 2 --modes sync,ssp:1 --epochs 1 --max-steps 12 \
    --eval-every 5 --out "$TMP/net" >"$TMP/net.out" 2>"$TMP/net.log"
rc=$?
if grep -q "skipped:" "$TMP/net.out"; then
    [ $rc = 0 ] || fail "a skipped --net run exited $rc"
    skip "$(grep -o 'skipped: .*' "$TMP/net.out" | sed 's/^skipped: //')"
fi
[ $rc = 0 ] || fail "bench train --net exited $rc: $(tail -5 "$TMP/net.log")"
PFX=$(prefix_of "$TMP/net.log")
[ -n "$PFX" ] || fail "the bench did not name its network: $(cat "$TMP/net.log")"

# Made: the hub and one namespace per role, each link shaped at both ends.
for ns in hub c s0 s1 w0 w1; do
    grep -q "netns add $PFX$ns\$" "$TMP/net/runs/net.log" ||
        fail "no namespace $PFX$ns made: $(grep 'netns add' "$TMP/net/runs/net.log")"
done
[ "$(grep -c "qdisc add dev .* root handle 1: tbf rate 1gbit" "$TMP/net/runs/net.log")" = 10 ] ||
    fail "not 5 links x 2 ends shaped: $(grep tbf "$TMP/net/runs/net.log")"
# The delay line: its TUN device in the hub, every packet from a role routed
# into it, packets through it during the job, and the table says so.
NETLOG=$TMP/net/runs/net.log
grep -q "TUN device line in ${PFX}hub, each packet held 200 us" "$NETLOG" &&
    grep -q "link set line mtu 65000 txqueuelen 4096 up" "$NETLOG" &&
    grep -q "route add 10.99.0.0/16 dev line table 100" "$NETLOG" &&
    grep -q "rule add pref 101 lookup 100" "$NETLOG" ||
    fail "no delay line set up: $(grep -E 'line|rule' "$NETLOG")"
grep -Eq "delay line, this job: [1-9][0-9]* packets.*[1-4] threads?, the busiest [0-9.]+ % of a core" \
    "$TMP/net/runs/sync_w2.log" ||
    fail "no packets through the delay line: $(grep 'delay line' "$TMP/net/runs/sync_w2.log")"
# The Links table: the delay line's busiest thread, and the row's bound.
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
         $1 == "sync" && $col["line_busy"] > 0 && $col["bound"] ~ /^(link|CPU|delay line)$/ { ok = 1 }
         END { exit !ok }' "$TMP/net/train_links.csv" ||
    fail "no delay line share in the Links table: $(cat "$TMP/net/train_links.csv")"
results_page "$TMP/net/train.md" train
grep -q "0.2ms one way between roles (our delay line" "$TMP/net/train.md" ||
    fail "the table does not say what the delay is: $(head -3 "$TMP/net/train.md")"

# Ran, in the namespaces.
grep -q '^sync,2,plain,ok,' "$TMP/net/train.csv" || fail "the job failed: $(cat "$TMP/net/train.csv")"
# ssp pulls each pushed piece behind it to servers on other hosts
grep -q '^ssp:1,2,plain,ok,' "$TMP/net/train.csv" ||
    fail "the ssp job failed: $(cat "$TMP/net/train.csv"; tail -5 "$TMP/net/runs/ssp_1_w2.log")"
expect "$TMP/net/runs/sync_w2.json" "d['status'] == 'ok' and d['steps'] == 12" "job not finished"
grep -Eq "S1 +tcp://10\.99\.[0-9]+\.[0-9]+:" "$TMP/net/runs/sync_w2.log" ||
    fail "server 1 not on its namespace's address: $(grep -E 'S[01] +tcp' "$TMP/net/runs/sync_w2.log")"
grep -q "W0 I eval step=10 test_accuracy=" "$TMP/net/runs/sync_w2.log" ||
    fail "no --eval-every evaluation: $(grep 'W0 I' "$TMP/net/runs/sync_w2.log" | tail -3)"

# Removed: no namespace, no process of the job.
[ -z "$(left_of "$PFX")" ] || fail "namespaces left: $(left_of "$PFX")"
grep -q "simulated network $PFX removed" "$TMP/net.log" || fail "no removal line: $(tail -3 "$TMP/net.log")"
BPID=${PFX#spsb}
[ -z "$(pgrep -f "bench-$BPID-" || true)" ] || fail "processes of the job left: $(pgrep -af "bench-$BPID-")"

# Without DELAY: no delay line, the hub routes between the links directly;
# with mtu=BYTES, every link end's packets and TCP's segments are no larger;
# with queue=BYTES, every link end queues that many bytes.
# Traced: each role's file is merged into the one --trace names.
"$BENCH" train --net 1gbit,mtu=9000,queue=262144 --servers 1 --workers 1 --modes sync --epochs 1 --max-steps 5 \
    --job-flags "--trace $TMP/nd.json --trace-steps 1:4" \
    --out "$TMP/nodelay" >"$TMP/nodelay.out" 2>"$TMP/nodelay.log" ||
    fail "bench train --net 1gbit,mtu=9000,queue=262144 exited $?: $(tail -5 "$TMP/nodelay.log")"
grep -q "trace of 2 processes merged into $TMP/nd.json" "$TMP/nodelay/runs/sync_w1.log" ||
    fail "the roles' traces not merged: $(grep -i trace "$TMP/nodelay/runs/sync_w1.log")"
/usr/bin/python3 -c "import json, sys
ev = json.load(open(sys.argv[1]))['traceEvents']
assert sorted(e['args']['name'] for e in ev if e['ph'] == 'M') == ['S0', 'W0'], ev[:3]
assert {'push_msg', 'receive'} <= {e['name'] for e in ev}, ev[:3]" "$TMP/nd.json" ||
    fail "the merged trace lacks a role's events"
grep -q '^sync,1,plain,ok,' "$TMP/nodelay/train.csv" ||
    fail "the job without delay failed: $(cat "$TMP/nodelay/train.csv")"
! grep -q "TUN device" "$TMP/nodelay/runs/net.log" &&
    grep -q "1gbit per link, each direction (tc tbf), no delay, packets of at most 9000 bytes, queues of 262144 bytes" \
        "$TMP/nodelay/train.md" ||
    fail "a delay line without DELAY, or the table does not say: $(head -3 "$TMP/nodelay/train.md")"
[ "$(grep -c "link set \(eth0\|v[cws][0-9]*\) mtu 9000 gso_max_size 9000 up" \
    "$TMP/nodelay/runs/net.log")" = 6 ] ||
    fail "not 3 links x 2 ends at mtu=9000: $(grep mtu "$TMP/nodelay/runs/net.log")"
[ "$(grep -c "tbf rate 1gbit burst [0-9]* limit 262144$" "$TMP/nodelay/runs/net.log")" = 6 ] ||
    fail "not 3 links x 2 ends queueing 262144 bytes: $(grep tbf "$TMP/nodelay/runs/net.log")"
NPFX=$(prefix_of "$TMP/nodelay.log")
[ -n "$NPFX" ] && [ -z "$(left_of "$NPFX")" ] || fail "namespaces left: $NPFX $(left_of "$NPFX")"

# --placement colocated: server i runs in worker i's namespace, on its address
"$BENCH" train --net 1gbit --workers 2 --modes sync --placement colocated --epochs 1 \
    --max-steps 5 --out "$TMP/col" >"$TMP/col.out" 2>"$TMP/col.log" ||
    fail "bench train --placement colocated exited $?: $(tail -5 "$TMP/col.log")"
grep -q '^sync colocated,2,plain,ok,' "$TMP/col/train.csv" ||
    fail "the colocated job failed: $(cat "$TMP/col/train.csv")"
expect "$TMP/col/runs/sync_w2_colocated.json" "d['placement'] == 'colocated'" \
    "the summary does not record the placement"
CPFX=$(prefix_of "$TMP/col.log")
for i in 0 1; do
    addr=$(grep -Eo "S$i +tcp://[0-9.]+" "$TMP/col/runs/sync_w2_colocated.log" | head -1 |
        sed 's|.*tcp://||')
    grep -q "ip -n ${CPFX}w$i addr add $addr peer" "$TMP/col/runs/net.log" ||
        fail "S$i at $addr, not on worker $i's address"
done

# Stopped halfway with SIGINT (Ctrl-C): everything goes all the same.
start stop "$BENCH" train --net 100mbit,20ms --servers 1 --workers 2 --modes sync --epochs 1 \
    --out "$TMP/stop"
SPID=$LAST_PID
for i in $(seq 1 600); do
    grep -qs "W0 I epoch=1/1 step=" "$TMP/stop/runs/sync_w2.log" && break
    sleep 0.1
done
grep -qs "W0 I epoch=1/1 step=" "$TMP/stop/runs/sync_w2.log" ||
    fail "the job to stop did not train: $(tail -5 "$TMP/stop.log")"
# One round trip (SYN, SYN-ACK) between two roles takes at least 2 x DELAY.
SCHED=$(grep -Eo "scheduler at tcp://[0-9.]+:[0-9]+" "$TMP/stop/runs/sync_w2.log" | head -1 |
    sed 's|.*tcp://||')
[ -n "$SCHED" ] || fail "no scheduler address in the job's log"
RTT=$(ip netns exec "spsb${SPID}w0" python3 -c '
import socket, sys, time
host, port = sys.argv[1].split(":")
best = 1e9
for _ in range(3):
    t = time.monotonic()
    socket.create_connection((host, int(port)), timeout=10).close()
    best = min(best, time.monotonic() - t)
print("%.4f" % best)' "$SCHED") || fail "no TCP connect from w0 to the scheduler at $SCHED"
python3 -c "import sys; sys.exit(float(sys.argv[1]) < 0.040)" "$RTT" ||
    fail "a round trip w0 -> scheduler took $RTT s, less than 2 x 20ms: no delay"
kill -INT "$SPID"
wait_pid "$SPID" 60 || fail "the bench did not stop on SIGINT"
[ "$WAIT_RC" = 130 ] || fail "stopped bench exited $WAIT_RC, not 130: $(tail -3 "$TMP/stop.log")"
grep -q '^sync,2,plain,failed: exit 130,' "$TMP/stop/train.csv" ||
    fail "the stopped job's row does not say so: $(cat "$TMP/stop/train.csv")"
[ -z "$(left_of "spsb$SPID")" ] || fail "namespaces left after SIGINT: $(left_of "spsb$SPID")"
[ -z "$(pgrep -f "bench-$SPID-" || true)" ] ||
    fail "processes left after SIGINT: $(pgrep -af "bench-$SPID-")"
echo "made, ran in and removed $PFX: $(grep -c 'netns add' "$TMP/net/runs/net.log") namespaces;" \
    "w0 -> scheduler round trip on 20ms links: $RTT s"
check_logs
