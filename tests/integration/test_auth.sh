#!/usr/bin/env bash
# tests/integration/test_auth.sh - registration that strangers cannot pass,
# without --secure. A stranger (sps-intruder) knows the job's build and id
# but not its secret:
# 1. registering before the real nodes, it takes neither server rank 0, nor
#    a spare's place, nor a worker's slot; each refusal names neither the
#    build nor the job id; a real worker without the secret, or without the
#    job id, is refused too (one line saying what to give); then the real
#    nodes register and the job finishes.
# 2. a member (it holds the secret) sending the scheduler a MSG_REPORT, which
#    only servers send, is refused; the job is not aborted.
#    A member that picks its own routing id, gets a nonce, and answers it
#    under the same id on a new connection is refused: the nonce is bound to
#    the connection's socket, not to the id; the new connection's own nonce
#    registers it.
# 3. one forged RING_DATA to a worker's ring endpoint is dropped (W1 logs
#    it) and the allreduce job finishes.
# 4. the launcher makes the job's secret owner-only in its private directory
#    and gives the roles its path, never its value.
. "$(dirname "$0")/lib.sh"
INTRUDER=$SPS_BUILD/tests/integration/sps-intruder
KEYGEN=$SPS_BUILD/deploy/shardps-keygen
JOB=job-auth

"$KEYGEN" --secret "$TMP/job.secret" || fail "shardps-keygen --secret failed"
[ "$(stat -c %a "$TMP/job.secret")" = 600 ] || fail "the secret file is not 0600"
"$KEYGEN" --secret "$TMP/job.secret" 2>"$TMP/again.out" && fail "keygen replaced a secret"
AUTH=(--job-id "$JOB" --secret-file "$TMP/job.secret")

# ---- 1. strangers before the real nodes ----
start_scheduler sched --servers 1 --workers 2 --max-steps 30 --summary "$TMP/a.json" "${AUTH[@]}"
sched=$SCHED_PID
for role in server0 spare worker; do
    "$INTRUDER" --register "$SCHED_EP" "$JOB" $role >"$TMP/intr_$role.out" 2>&1
    rc=$?
    [ $rc = 0 ] || fail "a stranger registering as $role: exit $rc: $(cat "$TMP/intr_$role.out")"
done
cat "$TMP/intr_server0.out"
"$WORKER" --scheduler "$SCHED_EP" --job-id "$JOB" --connect-timeout 10 >"$TMP/nosecret.out" 2>&1
[ $? = 1 ] && grep -q "asks for this job's secret: give the job's --secret-file" "$TMP/nosecret.out" ||
    fail "a worker without the secret: $(cat "$TMP/nosecret.out")"
"$WORKER" --scheduler "$SCHED_EP" --secret-file "$TMP/job.secret" --connect-timeout 10 \
    >"$TMP/noid.out" 2>&1
[ $? = 1 ] && grep -q "names no job, this scheduler runs job '$JOB': start it with --job-id" \
    "$TMP/noid.out" || fail "a worker without --job-id joined a named job: $(cat "$TMP/noid.out")"
start s0 "$SERVER" --scheduler "$SCHED_EP" --rank 0 --bind 'tcp://127.0.0.1:*' "${AUTH[@]}"
for r in 0 1; do
    start "w$r" "$WORKER" --scheduler "$SCHED_EP" --rank $r --threads 1 "${AUTH[@]}"
done
wait_pid "$sched" 120 || fail "the job did not end: $(tail -5 "$TMP/sched.log")"
[ "$WAIT_RC" = 0 ] || fail "the job failed: $(grep -E ' [EW] ' "$TMP/sched.log" | tail -5)"
expect "$TMP/a.json" "d['registrations_refused'] >= 4" "refused registrations"
echo "ok - strangers refused: $(field "$TMP/a.json" "d['registrations_refused']") registrations; the job finished"

# ---- 2. a member sends another role's message ----
start_scheduler sched2 --servers 1 --workers 2 "${AUTH[@]}"
"$INTRUDER" --report "$SCHED_EP" "$JOB" "$TMP/job.secret" >"$TMP/report.out" 2>&1
rc=$?
[ $rc = 0 ] || fail "a worker's MSG_REPORT: exit $rc: $(cat "$TMP/report.out") $(tail -3 "$TMP/sched2.log")"
grep -q "job aborted" "$TMP/sched2.log" && fail "a worker's report aborted the job"
cat "$TMP/report.out"
"$INTRUDER" --rebind "$SCHED_EP" "$JOB" "$TMP/job.secret" >"$TMP/rebind.out" 2>&1
rc=$?
[ $rc = 0 ] || fail "a nonce answered on another connection: exit $rc: $(cat "$TMP/rebind.out")"
grep -q "refused (registration refused: no proof of the job's secret)" "$TMP/rebind.out" ||
    fail "the replayed nonce was not refused as unproven: $(cat "$TMP/rebind.out")"
cat "$TMP/rebind.out"
kill "$SCHED_PID"

# ---- 3. a forged RING_DATA ----
start_scheduler sched3 --mode allreduce --servers 0 --workers 2 --epochs 3 \
    --summary "$TMP/ring.json" "${AUTH[@]}"
sched=$SCHED_PID
for r in 0 1; do
    start "r$r" "$WORKER" --scheduler "$SCHED_EP" --rank $r --threads 1 \
        --bind 'tcp://127.0.0.1:*' "${AUTH[@]}"
done
wait_line "$TMP/sched3.log" 'job started' 60 || fail "the ring job did not start"
ep=$(sed -n 's/.*W1 ring endpoint \(tcp:[^ ]*\).*/\1/p' "$TMP/sched3.log")
[ -n "$ep" ] || fail "no ring endpoint for W1 in the scheduler log"
"$INTRUDER" --ring "$ep" 0 || fail "could not send the forged ring data"
wait_line "$TMP/r1.log" "ring: dropped a ring-data claiming W0" 60 ||
    fail "W1 did not drop the forged ring data: $(tail -3 "$TMP/r1.log")"
wait_pid "$sched" 120 || fail "the ring job did not end"
[ "$WAIT_RC" = 0 ] || fail "a forged RING_DATA failed the job: $(grep -E ' [EW] ' "$TMP/sched3.log" | tail -3)"
echo "ok - a forged ring data dropped; the allreduce job finished"

# ---- 4. the launcher's secret ----
start launch "$LAUNCH" --servers 1 --workers 1 --epochs 3 --plot none --summary "$TMP/l.json"
LPID=$LAST_PID
wait_line "$TMP/launch.log" 'job started' 60 || fail "the launched job did not start"
secret=""
for pid in $(pgrep -P "$LPID"); do
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
    file=$(echo "$cmd" | sed -n 's/.*--secret-file \([^ ]*\).*/\1/p')
    [ -n "$file" ] || fail "no --secret-file on the command line: $cmd"
    [ "$(stat -c %a "$file")" = 600 ] || fail "$file is not owner-only"
    secret=$(grep -v '^#' "$file")
    case "$cmd" in *"$secret"*) fail "the secret itself is on a command line";; esac
done
[ -n "$secret" ] || fail "no child of the launcher"
wait_pid "$LPID" 120 || fail "the launched job did not end"
[ "$WAIT_RC" = 0 ] || fail "the launched job failed: $(tail -3 "$TMP/launch.log")"
[ -e "$file" ] && fail "the job's secret $file outlived the job"
echo "ok - the launcher's secret: owner-only, by path, removed at the end"
check_logs
