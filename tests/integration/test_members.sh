#!/usr/bin/env bash
# tests/integration/test_members.sh - a worker leaves and the job goes on.
#
# shardps-launch, 2 servers x 2 workers, sync MLP for 3 epochs, --min-workers 1
# (then the click model, --model ctr, whose rows the servers hold, for 10
# epochs of a small click log, test AUC >= 0.75):
# W1 is killed with SIGKILL mid-epoch. The scheduler leaves it out at once
# (its connection closed), the servers complete steps with W0 alone, and the job
# finishes every epoch: the launcher exits 0, the summary says ok, test
# accuracy >= 0.86, one membership change and some steps with fewer workers.
# Without --min-workers the same kill fails the job (test_peer_loss.sh).
# Then W1 is started again by hand (its own command line, --rank 1): it joins
# at a step agreed with the servers, trains to the end beside W0, and the
# steps with fewer workers stop: two membership changes, and the steps of the
# new W1 plus those with one worker are fewer than the job's. Before the
# kill, a worker asking for the live rank 0 is refused with the reason.
. "$(dirname "$0")/lib.sh"

# K outside [0, workers], or below the workers of a ring, is bad usage.
"$SCHED" --workers 2 --min-workers 3 2>/dev/null
[ $? = 2 ] || fail "--min-workers 3 of 2 workers accepted"
"$SCHED" --servers 0 --mode allreduce --workers 2 --min-workers 1 2>/dev/null
[ $? = 2 ] || fail "--min-workers 1 accepted with allreduce"

# members NAME LEARNED [job flags...]: the scenario above on the job of the
# flags; LEARNED is what its summary d must hold at the end.
members() {
    local name=$1 learned=$2 w1="" ep="" ident=() w1_cmd=()
    shift 2
    start "$name" "$LAUNCH" --servers 2 --workers 2 --min-workers 1 --peer-timeout 1.5 \
        --batch 32 --seed 3 --summary "$TMP/$name.json" "$@"
    LPID=$LAST_PID

    # W1: the launcher's child shardps-worker with --rank 1.
    for i in $(seq 1 600); do
        grep -Eq "step=[0-9]+/" "$TMP/$name.log" && break
        sleep 0.1
    done
    for p in $(pgrep -P "$LPID"); do
        cmd=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)
        case "$cmd" in *shardps-worker*"--rank 1"*) w1=$p ;; esac
    done
    [ -n "$w1" ] || fail "no W1 under the launcher: $(tail -5 "$TMP/$name.log")"
    while IFS= read -r -d '' a; do w1_cmd+=("$a"); done <"/proc/$w1/cmdline"
    for i in "${!w1_cmd[@]}"; do
        case "${w1_cmd[$i]}" in
        --scheduler) ep=${w1_cmd[$((i + 1))]} ;;
        --job-id | --secret-file) ident+=("${w1_cmd[$i]}" "${w1_cmd[$((i + 1))]}") ;;
        esac
    done
    [ -n "$ep" ] || fail "no --scheduler in W1's command line: ${w1_cmd[*]}"
    # While every worker lives, a worker of the job registering is refused; the
    # job goes on.
    "$WORKER" --scheduler "$ep" --rank 0 "${ident[@]}" >"$TMP/$name.refused.log" 2>&1
    [ $? = 1 ] || fail "a worker for the live rank 0 was not refused: $(cat "$TMP/$name.refused.log")"
    grep -q "the job is running and that worker is not lost" "$TMP/$name.refused.log" ||
        fail "no reason for refusing W0 again: $(cat "$TMP/$name.refused.log")"
    kill -9 "$w1"

    # Once the job goes on with W0 alone, W1 comes back and joins (loading the
    # data set first: W0 trains alone meanwhile).
    for i in $(seq 1 300); do
        grep -q "membership: lost W1" "$TMP/$name.log" && break
        sleep 0.1
    done
    start "$name.join" "${w1_cmd[@]}"
    JPID=$LAST_PID

    wait_pid "$LPID" 280 || fail "the job did not end: $(tail -5 "$TMP/$name.log")"
    [ "$WAIT_RC" = 0 ] || fail "launcher exited $WAIT_RC: $(tail -8 "$TMP/$name.log")"
    wait_pid "$JPID" 30 || fail "the joined W1 did not end"
    [ "$WAIT_RC" = 0 ] || fail "the joined W1 exited $WAIT_RC: $(tail -5 "$TMP/$name.join.log")"
    grep -Eq "membership: lost W1 \(pid [0-9]+\) at step [0-9]+: (its connection closed|silent)" "$TMP/$name.log" ||
        fail "no membership line with the step for the loss of W1: $(grep membership "$TMP/$name.log")"
    [ "$(grep -c "membership:" "$TMP/$name.log")" = 2 ] ||
        fail "not one line per membership change: $(grep membership "$TMP/$name.log")"
    grep -Eq "membership: W1 \(pid [0-9]+\) joins at step [0-9]+" "$TMP/$name.log" ||
        fail "no membership line for W1 joining: $(grep membership "$TMP/$name.log")"
    expect "$TMP/$name.json" "d['status'] == 'ok'" "job not finished"
    expect "$TMP/$name.json" "d['membership_changes'] == 2" "two membership changes (W1 lost, W1 joined)"
    expect "$TMP/$name.json" "d['workers_joined'] == 1" "one worker joined"
    expect "$TMP/$name.json" "d['worker_steps'][0] == d['steps']" "W0 took every step"
    expect "$TMP/$name.json" "0 < d['worker_steps'][1] < d['steps']" "the joined W1 took steps"
    expect "$TMP/$name.json" "0 < d['steps_with_fewer_workers'] < d['steps'] - d['worker_steps'][1]" \
        "steps with fewer workers stop once W1 joined"
    expect "$TMP/$name.json" "$learned" "$name: not learned"
    echo "$name: $(field "$TMP/$name.json" "d.get('test_auc') or d['test_accuracy']"), steps $(field "$TMP/$name.json" "d['steps']"), with 1 worker $(field "$TMP/$name.json" "d['steps_with_fewer_workers']"), by the joined W1 $(field "$TMP/$name.json" "d['worker_steps'][1]")"
}

export SHARDPS_PROGRESS=0.2 # worker 0 reports progress early (via the launcher)
members mlp "d['test_accuracy'] >= 0.86" --epochs 3
# Rates (for the note, not asserted): W0's progress lines, before the loss,
# with W0 alone and after the join. Their samples_per_sec counts 2 workers'
# batches (2 x 32) per step; with W0 alone the job trains half of that.
python3 - "$TMP/mlp.log" <<'PY'
import re, sys
rates = {0: [], 1: [], 2: []}
phase = 0
for line in open(sys.argv[1]):
    if "membership: lost W1" in line:
        phase = 1
    elif "joins at step" in line:
        phase = 2
    m = re.search(r" W0 I epoch=.*samples_per_sec=(\d+)", line)
    if m:
        rates[phase].append(int(m.group(1)))
med = lambda v: sorted(v)[len(v) // 2] if v else float("nan")
r = [med(rates[p]) for p in range(3)]
print("steps/s (samples/s trained), medians of W0's progress lines: 2 workers %.0f (%.0f), "
      "W0 alone %.0f (%.0f), after the join %.0f (%.0f)"
      % (r[0] / 64, r[0], r[1] / 64, r[1] / 2, r[2] / 64, r[2]))
PY
# The click model: its rows on the servers are the same whoever pushes them.
"$SPS_BUILD/deploy/shardps-datagen" ctr --rows 20000 --seed 3 --out "$TMP/clicks.txt" \
    >"$TMP/gen.out" 2>&1 || fail "shardps-datagen ctr: $(cat "$TMP/gen.out")"
members ctr "d['test_auc'] >= 0.75" --model ctr --ctr-data "$TMP/clicks.txt" --epochs 10
check_logs
