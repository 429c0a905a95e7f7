#!/usr/bin/env bash
# Bad peers cannot stop or bloat a job:
# 1. a stranger connected to the scheduler sends failure, report, done,
#    barrier, model-info, checkpoint and heartbeat messages naming every
#    registered node in turn (sps-malformed --forge), and another sends both
#    servers pulls, pushes and inits claiming every worker, without its token
#    (--claim), while a sync job runs; every one is refused, the job ends
#    normally, bitwise equal to an undisturbed run, and the refusals are
#    counted;
# 2. a 1 GiB frame to the scheduler and to a server of a running job, and to
#    an allreduce worker's ring socket, leaves their resident memory within
#    50 MB of before, and the job finishes;
# 3. a worker that sends 3,000 pulls in async mode and never reads the
#    replies leaves the server's resident memory within 2x of before, gets
#    its excess pulls refused, and the job finishes; 60 pulls it then leaves
#    unread for 1 s are all answered once it reads;
# 4. a slow worker (--straggler) in async mode gets every reply.
. "$(dirname "$0")/lib.sh"

MALFORMED=$SPS_BUILD/tests/integration/sps-malformed
P=235146
# Resident memory is measured: under ASan its quarantine of freed memory
# would grow it by tens of MB a second; without it ASan still checks every
# access (and nothing changes in other builds).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0" # the MLP 784-256-128-10

# The endpoint a server logged it listens on (it binds once it has the view).
server_ep() {
    local log=$1 ep="" i=0
    while [ -z "$ep" ] && [ $i -lt 300 ]; do
        ep=$(sed -n 's/.*listening on \(tcp:[^ ]*\).*/\1/p' "$log")
        i=$((i + 1))
        [ -n "$ep" ] || sleep 0.1
    done
    [ -n "$ep" ] || fail "no 'listening on' line in $log: $(tail -3 "$log")"
    echo "$ep"
}
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
# bigframe NAME HOST:PORT [TYPE]: announces a 1 GiB frame, sends 64 MiB of it
# and holds the connection 3 s; returns once it sent, leaving BIG_PID to wait
# for (what the peer holds for a frame in progress is freed when the
# connection closes: measure before).
bigframe() {
    local ep=$2
    start "$1" python3 "$(dirname "$0")/bigframe.py" "${ep%:*}" "${ep##*:}" $((1 << 30)) \
        $((64 << 20)) "${3:-DEALER}" 3
    BIG_PID=$LAST_PID
    wait_line "$TMP/$1.log" 'announced' # the peer took the bytes or closed
}
big_done() {
    wait_pid "$BIG_PID" 30 && [ "$WAIT_RC" -eq 0 ] || fail "bigframe.py failed: $(cat "$TMP/$1.log")"
}
wait_line() { # FILE PATTERN: waits up to 30 s for a line
    local i=0
    until grep -q "$2" "$1" 2>/dev/null; do
        i=$((i + 1)); [ $i -lt 300 ] || fail "no '$2' in $1: $(tail -3 "$1")"; sleep 0.1
    done
}

# 1
run() {
    local name=$1 claims=()
    start_scheduler "sched_$name" --servers 2 --workers 2 --mode sync --max-steps 200 \
        --summary "$TMP/$name.json"
    local sched=$SCHED_PID
    if [ "$name" = attacked ]; then
        start forge "$MALFORMED" --forge "$SCHED_EP" 2 2 20
    fi
    for r in 0 1; do
        start "s${r}_$name" "$SERVER" --scheduler "$SCHED_EP" --rank $r --bind 'tcp://127.0.0.1:*'
    done
    for r in 0 1; do
        start "w${r}_$name" "$WORKER" --scheduler "$SCHED_EP" --rank $r --device cpu \
            --threads 1 --dump-params "$TMP/$name.f32"
    done
    if [ "$name" = attacked ]; then
        for r in 0 1; do
            start "claim$r" "$MALFORMED" --claim "$(server_ep "$TMP/s${r}_$name.log")" 2 20
            claims+=("$LAST_PID")
        done
        for r in 0 1; do
            wait_pid "${claims[$r]}" 60 || fail "claim $r did not end"
            [ "$WAIT_RC" -eq 0 ] || fail "claim $r: $(cat "$TMP/claim$r.log")"
        done
    fi
    wait_pid "$sched" 120 || fail "$name: the job did not end"
    [ "$WAIT_RC" -eq 0 ] || fail "$name: the scheduler exited $WAIT_RC: $(tail -5 "$TMP/sched_$name.log")"
    expect "$TMP/$name.json" "d['status'] == 'ok'" "$name"
}
run quiet
run attacked
expect "$TMP/attacked.json" "d['scheduler_refused'] >= 28" "forged messages counted"
# 20 rounds x 2 workers x (pull, push, init) x (no token, a guessed one), per server
expect "$TMP/attacked.json" "d['servers_refused_forged'] == 480" "claims counted by the servers"
params_close "$TMP/quiet.f32" "$TMP/attacked.f32" 0 ||
    fail "the job under forged messages differs from the undisturbed one"
lines=$(wc -l <"$TMP/sched_attacked.log")
[ "$lines" -lt 150 ] || fail "forged messages wrote $lines lines to the scheduler log"
for r in 0 1; do
    slines=$(wc -l <"$TMP/s${r}_attacked.log")
    [ "$slines" -lt 50 ] || fail "claims wrote $slines lines to server $r's log"
done
check_logs
echo "ok: $(field "$TMP/attacked.json" "d['scheduler_refused']") forged messages refused by the" \
    "scheduler, $(field "$TMP/attacked.json" "d['servers_refused_forged']") claimed requests by" \
    "the servers; job bitwise unchanged; scheduler log $lines lines"

# 2: a 1 GiB frame announced (64 MiB of it actually sent) is dropped at its header.
start_scheduler sched_big --servers 1 --workers 2 --mode sync --epochs 5 \
    --summary "$TMP/big.json"
sched=$SCHED_PID
start s_big "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*'
server=$LAST_PID
for r in 0 1; do
    start "w${r}_big" "$WORKER" --scheduler "$SCHED_EP" --rank $r --device cpu --threads 1 \
        --progress 0.1
done
wait_line "$TMP/w0_big.log" 'step=[1-9]' # training, so its memory is in use
report=""
for who in sched server; do
    if [ $who = sched ]; then pid=$sched ep=${SCHED_EP#tcp://}
    else pid=$server ep=$(server_ep "$TMP/s_big.log") ep=${ep#tcp://}; fi
    before=$(rss "$pid")
    bigframe "big_$who" "$ep"
    after=$(rss "$pid")
    big_done "big_$who"
    report="$report $who RSS ${before} kB -> ${after} kB;"
    [ $((after - before)) -lt 51200 ] || fail "a 1 GiB frame grew the $who from $before kB to $after kB"
done
wait_pid "$sched" 120 || fail "big: the job did not end"
[ "$WAIT_RC" -eq 0 ] || fail "big: the scheduler exited $WAIT_RC: $(tail -5 "$TMP/sched_big.log")"
check_logs
echo "ok: a 1 GiB frame dropped at its header:$report job finished"

# 2, allreduce: the frame to worker 1's ring socket (a PULL: the sender is a PUSH).
start_scheduler sched_ring --mode allreduce --servers 0 --workers 2 --epochs 3 \
    --summary "$TMP/ring.json"
sched=$SCHED_PID
for r in 0 1; do
    start "w${r}_ring" "$WORKER" --scheduler "$SCHED_EP" --rank $r --device cpu --threads 1 \
        --bind 'tcp://127.0.0.1:*' --progress 0.1
    [ $r = 1 ] && w1=$LAST_PID
done
wait_line "$TMP/w0_ring.log" 'step=[1-9]' # training, so its memory is in use
ep=$(sed -n 's/.*W1 ring endpoint tcp:\/\/\([^ ]*\).*/\1/p' "$TMP/sched_ring.log")
[ -n "$ep" ] || fail "no ring endpoint for W1 in the scheduler log"
before=$(rss "$w1")
bigframe big_ring "$ep" PUSH
after=$(rss "$w1")
big_done big_ring
[ $((after - before)) -lt 51200 ] || fail "a 1 GiB frame grew worker 1 from $before kB to $after kB"
wait_pid "$sched" 120 || fail "ring: the job did not end"
[ "$WAIT_RC" -eq 0 ] || fail "ring: the scheduler exited $WAIT_RC: $(tail -5 "$TMP/sched_ring.log")"
check_logs
echo "ok: a 1 GiB frame to a ring socket dropped: worker RSS $before kB -> $after kB; job finished"

# 3: worker 1 is sps-malformed --no-read: it pulls and never reads.
mkdir -p "$TMP/nr"
start_scheduler sched_nr --servers 1 --workers 2 --mode async --epochs 1 \
    --summary "$TMP/nr.json"
sched=$SCHED_PID
start s_nr "$SERVER" --scheduler "$SCHED_EP" --bind 'tcp://127.0.0.1:*' \
    --metrics-bind 127.0.0.1:0
server=$LAST_PID
start w0_nr "$WORKER" --scheduler "$SCHED_EP" --rank 0 --device cpu --threads 1 --progress 0.1
wait_line "$TMP/sched_nr.log" 'registered W0'
start noread "$MALFORMED" --no-read "$SCHED_EP" "$P" 3000 "$TMP/nr"
wait_line "$TMP/noread.log" 'ready'
wait_line "$TMP/w0_nr.log" 'step=[1-9]' # training, so its memory is in use
before=$(rss "$server")
touch "$TMP/nr/go"
wait_line "$TMP/noread.log" 'sent 3000 pulls'
wait_line "$TMP/s_nr.log" 'metrics on http'
url=$(grep -o 'metrics on http://[0-9.:]*/metrics' "$TMP/s_nr.log" | head -1 | cut -d' ' -f3)
# until the server has taken every one of them (its pull count, W0's and the 3,000)
for i in $(seq 300); do
    pulls=$(curl -sf "$url" | sed -n 's/^shardps_server_messages_total{type="pull"} \([0-9]*\).*/\1/p')
    [ "${pulls:-0}" -ge 3000 ] && break
    [ "$i" -lt 300 ] || fail "the server took ${pulls:-no} pulls of the 3,000"
    sleep 0.1
done
after=$(rss "$server")
touch "$TMP/nr/end"
wait_pid "$sched" 120 || fail "no-read: the job did not end"
[ "$WAIT_RC" -eq 0 ] || fail "no-read: the scheduler exited $WAIT_RC: $(tail -5 "$TMP/sched_nr.log")"
[ "$after" -lt $((2 * before)) ] ||
    fail "3,000 unread pulls grew the server from $before kB to $after kB"
expect "$TMP/nr.json" "d['status'] == 'ok'" "no-read"
expect "$TMP/nr.json" "d['pulls_refused_unread'] > 0" "the unread pulls refused"
# then slow to read: 60 pulls left unread for 1 s, more than its share of
# buffers, all answered with data once it reads (sps-malformed checks each
# request is answered once, whole)
grep -q '^later: 60 replies, 0 refusals' "$TMP/noread.log" ||
    fail "a worker slow to read lost replies: $(tail -3 "$TMP/noread.log")"
check_logs
echo "ok: 3,000 unread async pulls: server RSS $before kB -> $after kB," \
    "$(field "$TMP/nr.json" "d['pulls_refused_unread']") pulls refused, job finished;" \
    "then $(sed -n 's/^read //p' "$TMP/noread.log") read; 60 pulls read late all answered"

# 4: a legitimate slow worker is not refused.
"$LAUNCH" --servers 1 --workers 2 --mode async --straggler 1:4 --max-steps 60 \
    --summary "$TMP/slow.json" >"$TMP/slow.log" 2>&1 || fail "straggler job: $(tail -5 "$TMP/slow.log")"
expect "$TMP/slow.json" "d['status'] == 'ok' and d['pulls_refused_unread'] == 0" "straggler"
check_logs
echo "ok: a straggler in async mode: no pull refused"
