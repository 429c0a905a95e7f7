#!/usr/bin/env bash
# --secure: CurveZMQ on every socket, only the job's keys admitted.
#
# - A node whose --secure or keys differ from the scheduler's exits 1 at once
#   naming the flags to change; a plain scheduler warns of a --secure node.
# - shardps-keygen writes owner-only files; a key file others may read is
#   refused at start by every role and the launcher: exit 2, one line naming it.
# - A secure 2x2 sync MLP job gives bitwise the parameters of a plain one;
#   so does a secure 2-worker allreduce ring.
# - Strangers (no keys; another job's keys; another job's worker keypair with
#   this job's public keys, which reaches the key check) cannot register,
#   push or pull while the job trains; a plain job answers the
#   same stranger (the control). The job then runs bitwise as the plain one,
#   and the refusals are counted (secure_refused).
# - A flood of 400 sockets (with and without keys) to the scheduler and both
#   servers, and a 1 GiB frame announced to each, leave every role alive,
#   their RSS within 50 MB of before, and the parameters bitwise the plain
#   job's.
. "$(dirname "$0")/lib.sh"

# Under AddressSanitizer freed memory waits in a quarantine (256 MB by
# default), which the flood's handshakes fill: the RSS bound below would
# measure ASan, not us. A small quarantine keeps the check meaningful there.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=4"

MALFORMED=$SPS_BUILD/tests/integration/sps-malformed
KEYGEN=$SPS_BUILD/deploy/shardps-keygen
STEPS=${SPS_SECURE_STEPS:-400} # long enough to outlast the flood

# ---- keys and their files ----------------------------------------------------
"$KEYGEN" "$TMP/keys" || fail "shardps-keygen failed"
"$KEYGEN" "$TMP/other" || fail "shardps-keygen failed"
[ "$(stat -c %a "$TMP/keys")" = 700 ] || fail "key directory mode $(stat -c %a "$TMP/keys")"
for f in job server worker; do
    for e in key pub; do
        [ "$(stat -c %a "$TMP/keys/$f.$e")" = 600 ] || fail "$f.$e is not 0600"
    done
done
out=$("$KEYGEN" "$TMP/keys" 2>&1) && fail "keygen overwrote a job's keys"
[ "$(echo "$out" | wc -l)" -eq 1 ] || fail "keygen over existing keys: $out"

# one_line_exit2 WHAT FILE CMD...: CMD exits 2 with one stderr line naming FILE.
one_line_exit2() {
    local what=$1 file=$2
    shift 2
    local err rc
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    [ "$rc" -eq 2 ] || fail "$what: exit $rc, want 2: $err"
    [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$what: not one line: $err"
    [[ $err == *"$file"* ]] || fail "$what: the error does not name $file: $err"
}
chmod 640 "$TMP/keys/worker.key"
one_line_exit2 "worker, group-readable key" worker.key "$WORKER" --secure --keys "$TMP/keys"
one_line_exit2 "launcher, group-readable key" worker.key "$LAUNCH" --secure --keys "$TMP/keys"
chmod 600 "$TMP/keys/worker.key"
chmod 604 "$TMP/keys/job.key"
one_line_exit2 "scheduler, world-readable key" job.key "$SCHED" --secure --keys "$TMP/keys"
chmod 600 "$TMP/keys/job.key"
chmod 644 "$TMP/keys/worker.pub"
one_line_exit2 "server, world-readable public key" worker.pub "$SERVER" --secure --keys "$TMP/keys"
chmod 600 "$TMP/keys/worker.pub"
one_line_exit2 "--secure without --keys" keys "$SERVER" --secure
one_line_exit2 "--keys without --secure" secure "$WORKER" --keys "$TMP/keys"

# ---- a node whose --secure differs from the scheduler's ----------------------
# It gives up at once (long before its --connect-timeout) with one line
# naming the flags to change; a plain scheduler warns of a --secure node.
# mismatch NAME WANT NODE_FLAGS...: the worker exits 1 with WANT in its line.
mismatch() {
    local name=$1 want=$2 rc
    shift 2
    timeout 60 "$WORKER" --scheduler "$SCHED_EP" --connect-timeout 50 "$@" \
        >"$TMP/$name.out" 2>&1
    rc=$?
    [ "$rc" = 1 ] && grep -Eq "E cannot reach the scheduler at $SCHED_EP: $want" "$TMP/$name.out" ||
        fail "$name: exit $rc: $(tail -2 "$TMP/$name.out")"
}
start_scheduler mm_secure --servers 1 --workers 1 --secure --keys "$TMP/keys"
mismatch mm_plain_node "the scheduler is --secure and this node is not: give it --secure --keys DIR"
mismatch mm_other_keys "the scheduler refused this node's handshake: is it --secure, with the job's keys in --keys DIR\?" \
    --secure --keys "$TMP/other"
kill "$SCHED_PID"
start_scheduler mm_plain --servers 1 --workers 1
# (the scheduler may see the mismatch first and break the handshake off)
mismatch mm_secure_node "the scheduler (is not --secure and this node is|refused this node's handshake: is it --secure)" \
    --secure --keys "$TMP/keys"
# (the node may see the mismatch first and break the handshake off)
wait_line "$TMP/mm_plain.log" \
    " C W a peer (speaks CurveZMQ|broke off its ZeroMQ handshake).*: start every role of a job with the same --secure$" 10 ||
    fail "the plain scheduler said nothing of the --secure node: $(tail -3 "$TMP/mm_plain.log")"
kill "$SCHED_PID"

# A stranger's key directory that holds this job's public keys (anyone may
# learn them) beside another job's worker keypair: its connections reach the
# key check (ZAP) and are refused there.
mkdir -m 700 "$TMP/mixed"
cp -p "$TMP/other/worker.key" "$TMP/other/worker.pub" "$TMP/keys/job.pub" \
    "$TMP/keys/server.pub" "$TMP/mixed/"
server_key=$(awk '/^public/ {print $2}' "$TMP/keys/server.pub")

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

# job NAME ATTACK [role flags...]: a 2x2 sync MLP job, roles started by hand;
# ATTACK: none, strangers or flood (while the workers train).
job() {
    local name=$1 attack=$2
    shift 2
    start_scheduler "sched_$name" --servers 2 --workers 2 --mode sync --max-steps "$STEPS" \
        --summary "$TMP/$name.json" "$@"
    local sched=$SCHED_PID ports=() pids=()
    for r in 0 1; do
        ports[r]=$(free_port)
        start "s${r}_$name" "$SERVER" --scheduler "$SCHED_EP" --rank $r \
            --bind "tcp://127.0.0.1:${ports[r]}" "$@"
        pids[r]=$LAST_PID
    done
    local s0=tcp://127.0.0.1:${ports[0]}
    for r in 0 1; do
        start "w${r}_$name" "$WORKER" --scheduler "$SCHED_EP" --rank $r --device cpu \
            --threads 1 --dump-params "$TMP/$name.f32" "$@"
        pids[2 + r]=$LAST_PID
    done
    if [ "$attack" != none ]; then
        # Servers listen only once the view is out: attack then.
        local i=0
        until grep -q 'job started' "$TMP/sched_$name.log"; do
            i=$((i + 1)); [ $i -lt 300 ] || fail "$name: the job did not start"; sleep 0.1
        done
    fi
    if [ "$attack" = strangers ]; then
        local spids=() k=0
        for keys in - "$TMP/other" "$TMP/mixed"; do
            start "stranger$k" "$MALFORMED" --stranger "$keys" "$SCHED_EP" "$s0" "$server_key" 2
            spids[k]=$LAST_PID
            k=$((k + 1))
        done
        for k in 0 1 2; do
            wait_pid "${spids[k]}" 60 && [ "$WAIT_RC" -eq 0 ] ||
                fail "$name: stranger $k: $(tail -3 "$TMP/stranger$k.log")"
        done
        cat "$TMP"/stranger?.log >>"$TMP/strangers.log"
    fi
    if [ "$attack" = flood ]; then
        local who=(sched s0 s1 w0) all=("$sched" "${pids[@]}") before=()
        for k in 0 1 2 3; do before[k]=$(rss "${all[k]}"); done
        start flood_plain "$MALFORMED" --connflood - 200 3 "$SCHED_EP" "$s0" \
            "tcp://127.0.0.1:${ports[1]}"
        local f1=$LAST_PID
        start flood_keys "$MALFORMED" --connflood "$TMP/mixed" 200 3 "$SCHED_EP" "$s0" \
            "tcp://127.0.0.1:${ports[1]}"
        local f2=$LAST_PID
        for ep in "$SCHED_EP" "$s0"; do
            ep=${ep#tcp://}
            python3 "$(dirname "$0")/bigframe.py" "${ep%:*}" "${ep##*:}" $((1 << 30)) \
                $((64 << 20)) >>"$TMP/bigframe.log" || fail "bigframe.py failed"
        done
        wait_pid "$f1" 60 && [ "$WAIT_RC" -eq 0 ] || fail "flood: $(cat "$TMP/flood_plain.log")"
        wait_pid "$f2" 60 && [ "$WAIT_RC" -eq 0 ] || fail "flood: $(cat "$TMP/flood_keys.log")"
        sleep 0.5
        for k in 0 1 2 3; do
            kill -0 "${all[k]}" 2>/dev/null || fail "flood: ${who[k]} died"
            local after
            after=$(rss "${all[k]}")
            RSS_REPORT="$RSS_REPORT ${who[k]} ${before[k]} -> $after kB;"
            [ $((after - before[k])) -lt 51200 ] ||
                fail "the flood grew ${who[k]} from ${before[k]} kB to $after kB"
        done
    fi
    wait_pid "$sched" 300 || fail "$name: the job did not end"
    [ "$WAIT_RC" -eq 0 ] || fail "$name: the scheduler exited $WAIT_RC: $(tail -5 "$TMP/sched_$name.log")"
    expect "$TMP/$name.json" "d['status'] == 'ok'" "$name"
}

# ---- bitwise: plain, secure by the launcher, secure by hand -------------------
RSS_REPORT=""
job plain none
"$LAUNCH" --servers 2 --workers 2 --mode sync --max-steps "$STEPS" --secure \
    --dump-params "$TMP/launched.f32" --summary "$TMP/launched.json" >"$TMP/launched.log" 2>&1 ||
    fail "secure launch failed: $(tail -5 "$TMP/launched.log")"
expect "$TMP/launched.json" "d['secure'] is True and d['secure_refused'] == 0" "secure launch"
params_close "$TMP/plain.f32" "$TMP/launched.f32" 0 || fail "a secure job differs from a plain one"

# The allreduce ring under --secure: bitwise the plain ring's.
for s in plain secure; do
    "$LAUNCH" --mode allreduce --servers 0 --workers 2 --max-steps 60 \
        $([ $s = secure ] && echo --secure) --dump-params "$TMP/ring_$s.f32" \
        --summary "$TMP/ring_$s.json" >"$TMP/ring_$s.log" 2>&1 ||
        fail "$s allreduce failed: $(tail -5 "$TMP/ring_$s.log")"
done
expect "$TMP/ring_secure.json" "d['secure'] is True" "secure allreduce"
params_close "$TMP/ring_plain.f32" "$TMP/ring_secure.f32" 0 ||
    fail "a secure allreduce job differs from a plain one"

# ---- strangers ---------------------------------------------------------------
job strangers strangers --secure --keys "$TMP/keys"
# No warning the user cannot act on: under --secure CurveZMQ admits only the
# job's keys (a job secret adds nothing to warn about), and closed connections
# are found by silence by design. A plain job without a secret is warned.
for log in "$TMP/sched_strangers.log" "$TMP/launched.log"; do
    ! grep -E ' W (no job secret|closed connections go unseen)' "$log" ||
        fail "a warning nobody can act on in $(basename "$log")"
done
grep -q ' W no job secret' "$TMP/sched_plain.log" || fail "a plain job without a secret is not warned"
params_close "$TMP/plain.f32" "$TMP/strangers.f32" 0 ||
    fail "the job the strangers tried differs from the plain one"
# 3 strangers x 2 rounds: each refused at least once by the scheduler and by S0
expect "$TMP/strangers.json" \
    "d['secure_refused'] - sum(r['secure_refused'] for r in d['server_reports']) >= 6 and d['server_reports'][0]['secure_refused'] >= 6" \
    "the scheduler and S0 counted every stranger's connection"
refused=$(field "$TMP/strangers.json" "d['secure_refused']")
lines=$(grep -c 'rejected connection' "$TMP"/sched_strangers.log "$TMP"/s0_strangers.log |
    awk -F: '{n += $2} END {print n}')
[ "$lines" -le 4 ] || fail "$refused refused connections wrote $lines log lines"
# The control: a plain job answers the same stranger.
start_scheduler sched_control --servers 1 --workers 1 --wait 30
rc=0
"$MALFORMED" --stranger - "$SCHED_EP" tcp://127.0.0.1:1 - 1 >"$TMP/control.log" 2>&1 || rc=$?
[ "$rc" -eq 3 ] || fail "control: a plain scheduler did not answer a stranger (rc $rc): $(cat "$TMP/control.log")"
kill "$SCHED_PID" 2>/dev/null

# ---- a connection flood and oversized frames -------------------------------------
job flood flood --secure --keys "$TMP/keys"
params_close "$TMP/plain.f32" "$TMP/flood.f32" 0 || fail "the flooded job differs from the plain one"
flood_refused=$(field "$TMP/flood.json" "d['secure_refused']")
lines=$(wc -l <"$TMP/sched_flood.log")
[ "$lines" -lt 150 ] || fail "the flood wrote $lines lines to the scheduler log"
check_logs
echo "ok: key files checked; secure = plain bitwise ($STEPS steps; ring too); strangers refused" \
    "($refused connections counted, $(grep -c none "$TMP/strangers.log") strangers);" \
    "flood of 400 sockets + 1 GiB frames: $flood_refused refused, RSS$RSS_REPORT" \
    "scheduler log $lines lines"
