#!/usr/bin/env bash
# tests/integration/test_ctr_replica.sh - hot replicas of a job with
# embedding rows (--model ctr --replicas 1), through the launcher users run,
# on a click log shardps-datagen writes here (10,000 lines).
#
# A sync 2x2 adagrad job with --min-count 2 and --max-rows 3000 (so rows
# are filtered, pending sightings kept and the cap refuses keys) is the
# reference; its MLP is small (--hidden 8), and with it the servers' frame
# limit, so a snapshot's rows go to a replica in several messages. The same job with --replicas 1 ends with the same bits. Then S1
# is killed with SIGKILL mid-run: its replica takes the rank over, the
# workers send the step under way again (rows push included), a respawned
# spare becomes S1's new replica from a snapshot of the rows table, its
# pending sightings and counters, and the new S1 is killed in turn: the job
# ends ok with 0 steps rolled back, its --dump-params file (dense parameters
# and rows) cmp-identical to the reference's, and the same rows counters.
# Async: S1 killed, its replica takes over, the job ends ok with a finite
# test AUC. Nothing is left running.
. "$(dirname "$0")/lib.sh"
GEN=$SPS_BUILD/deploy/shardps-datagen
DATA=$TMP/clicks.tsv
"$GEN" ctr --rows 10000 --seed 3 --out "$DATA" >"$TMP/gen.out" 2>&1 ||
    fail "shardps-datagen ctr: $(cat "$TMP/gen.out")"

# ctr NAME [flags...]: the job, 2 servers x 2 workers, 200 steps (an epoch
# is 70); its parameters in $TMP/NAME.f32, summary $TMP/NAME.json, output
# $TMP/NAME.log.
ctr() {
    local name=$1
    shift
    "$LAUNCH" --servers 2 --workers 2 --model ctr --ctr-data "$DATA" --batch 64 \
        --epochs 3 --max-steps 200 --hidden 8 --optimizer adagrad --lr 0.05 \
        --min-count 2 --max-rows 3000 --peer-timeout 5 --plot none --log-level info \
        --dump-params "$TMP/$name.f32" --summary "$TMP/$name.json" "$@" \
        >"$TMP/$name.log" 2>&1
}
# ctr_bg NAME RANK [flags...]: ctr with replicas in the background, worker
# RANK slowed (a straggler only sleeps: the parameters are the same) so
# kills land mid-run; sets JOB_PID.
ctr_bg() {
    local name=$1 rank=$2
    shift 2
    ctr "$name" "$@" --replicas 1 --progress 0.1 --straggler "$rank:10" &
    JOB_PID=$!
    PIDS+=("$JOB_PID")
}
# wait_step LOG N: until worker 0 reports step N or later.
wait_step() {
    local i s
    for i in $(seq 600); do
        s=$(grep -o 'step=[0-9]*/' "$1" | tail -1 | tr -dc 0-9)
        [ -n "$s" ] && [ "$s" -ge "$2" ] && return 0
        sleep 0.1
    done
    fail "no step $2 in $1: $(tail -3 "$1")"
}
# job_ok NAME: waits for the background job, which must end 0.
job_ok() {
    wait_pid "$JOB_PID" 120 || fail "$1 hangs: $(tail -5 "$TMP/$1.log")"
    [ "$WAIT_RC" = 0 ] || fail "$1 failed: $(grep -E ' [EW] ' "$TMP/$1.log" | tail -5)"
}
# same_rows NAME: NAME's rows table counters are the reference's.
same_rows() {
    local e="[d['rows'][k] for k in ('total', 'per_server', 'created', 'updates_filtered', \
        'updates_refused')]"
    [ "$(field "$TMP/$1.json" "$e")" = "$(field "$TMP/ref.json" "$e")" ] ||
        fail "$1: rows $(field "$TMP/$1.json" "$e") against $(field "$TMP/ref.json" "$e")"
}

ctr ref || fail "the reference job failed: $(tail -5 "$TMP/ref.log")"
expect "$TMP/ref.json" "d['rows']['updates_filtered'] > 0 and d['rows']['updates_refused'] > 0" \
    "the reference filters and refuses keys"
ctr rep --replicas 1 || fail "the job with replicas failed: $(tail -5 "$TMP/rep.log")"
cmp -s "$TMP/ref.f32" "$TMP/rep.f32" || fail "replicas changed the parameters"
[ "$(grep -c 'S[0-9] is in step with S[01]' "$TMP/rep.log")" = 2 ] ||
    fail "not every server had a replica in step: $(grep -i replica "$TMP/rep.log")"
same_rows rep
echo "ok - sync with replicas: the reference's bits"

# S1 killed mid-run, its replica takes over; the respawned spare becomes the
# new replica from a snapshot; then the new S1 is killed too.
ctr_bg two 1 --respawn 2
wait_line "$TMP/two.log" "S[0-9] is in step with S1" 60 || fail "S1 has no replica in step"
wait_step "$TMP/two.log" 40
kill -9 "$(pid_of "$TMP/two.log" S1)"
wait_line "$TMP/two.log" "the replica of S1 is rebuilt on S[0-9]+" 60 ||
    fail "no rebuilt replica: $(grep -iE 'replica|failover' "$TMP/two.log" | tail -5)"
NEW=$(sed -n 's/.*its replica S[0-9]* (pid \([0-9]*\)) takes the rank over.*/\1/p' \
    "$TMP/two.log" | head -1)
[ -n "$NEW" ] || fail "no takeover line: $(grep failover "$TMP/two.log")"
kill -9 "$NEW"
job_ok two
expect "$TMP/two.json" "d['status'] == 'ok' and d['replicas']['takeovers'] == 2 and \
    d['replicas']['steps_rolled_back'] == 0" "two takeovers, nothing rolled back"
cmp -s "$TMP/ref.f32" "$TMP/two.f32" || fail "parameters differ after two takeovers"
same_rows two
no_leftovers "$TMP/two.log"
echo "ok - sync: two takeovers, 0 steps rolled back, the reference's bits"

# Async: S1 killed, its replica takes over, the job goes on (worker 0, whose
# steps are waited for, is the slow one: async does not hold it back).
ctr_bg async 0 --mode async
wait_line "$TMP/async.log" "S[0-9] is in step with S1" 60 || fail "S1 has no replica in step"
wait_step "$TMP/async.log" 40
kill -9 "$(pid_of "$TMP/async.log" S1)"
job_ok async
expect "$TMP/async.json" "d['status'] == 'ok' and d['replicas']['takeovers'] == 1 and \
    0 < d['test_auc'] <= 1" "an async takeover"
no_leftovers "$TMP/async.log"
echo "ok - async: a takeover, the job ends ok"
