#!/usr/bin/env bash
# tests/integration/test_summary_exit.sh - a summary on every exit.
#
# Under the launcher, a worker killed -9 (no --min-workers), SIGINT and
# SIGTERM each end the job while it trains; the --summary file (in a
# folder that did not exist) then says "failed" naming the worker, or
# "interrupted" naming the signal, with the launcher's exit status and a
# last step past 0. A scheduler started by hand and stopped with SIGTERM
# writes its own ("interrupted", exit 143). A job that trains an epoch and
# stays at chance ends "no_progress" with exit 4; with --on-no-progress
# warn it ends ok with a warning.
. "$(dirname "$0")/lib.sh"

# run_bg NAME [flags...]: a long 2-worker job in the background; LPID is
# the launcher's pid once worker 0 has logged its progress (it trains).
run_bg() {
    local name=$1
    shift
    "$LAUNCH" --workers 2 --batch 32 --epochs 20 --log-level info \
        --summary "$TMP/$name/run/s.json" "$@" >"$TMP/$name.out" 2>"$TMP/$name.log" &
    LPID=$!
    PIDS+=("$LPID")
    wait_line "$TMP/$name.log" " W0 I epoch=1/20 step=" 60 ||
        fail "$name: the job did not train: $(tail -5 "$TMP/$name.log")"
}

# ended NAME CODE STATUS CAUSE: the launcher exited CODE and its summary
# says STATUS with a failure matching the Python regex CAUSE.
ended() {
    local name=$1 code=$2 status=$3 cause=$4 s="$TMP/$1/run/s.json"
    wait_pid "$LPID" 60 || fail "$name: the launcher hangs: $(tail -5 "$TMP/$name.log")"
    [ "$WAIT_RC" = "$code" ] || fail "$name: exit $WAIT_RC, not $code: $(cat "$TMP/$name.out")"
    [ -s "$s" ] || fail "$name: no summary: $(tail -5 "$TMP/$name.log")"
    expect "$s" "d['status'] == '$status' and d['exit_code'] == $code" "$name: status"
    expect "$s" "__import__('re').search(r'$cause', d['failure'])" "$name: cause"
    expect "$s" "d['last_step'] > 0" "$name: last step"
}

run_bg kill9
W1=$(pid_of "$TMP/kill9.log" W1)
[ -n "$W1" ] || fail "no pid for W1"
kill -9 "$W1"
ended kill9 1 failed "W1.*(SIGKILL|lost|closed)"

run_bg int
kill -INT "$LPID"
ended int 130 interrupted "interrupted by SIGINT"

run_bg term
kill -TERM "$LPID"
ended term 143 interrupted "interrupted by SIGTERM"

# A scheduler by hand, stopped while it waits for its nodes.
start_scheduler sched --servers 1 --workers 1 --summary "$TMP/sched/run/s.json"
kill -TERM "$SCHED_PID"
wait_pid "$SCHED_PID" 30 || fail "the scheduler hangs after SIGTERM"
[ "$WAIT_RC" = 143 ] || fail "the scheduler exited $WAIT_RC after SIGTERM, not 143"
expect "$TMP/sched/run/s.json" "d['status'] == 'interrupted' and d['exit_code'] == 143" \
    "the scheduler's own summary"

# An epoch at a learning rate too small to move anything: at chance.
CHANCE=(--workers 1 --epochs 1 --batch 512 --lr 1e-9 --optimizer sgd --momentum 0 --seed 1)
"$LAUNCH" "${CHANCE[@]}" --summary "$TMP/chance/s.json" >"$TMP/chance.out" 2>"$TMP/chance.log"
RC=$?
[ "$RC" = 4 ] || fail "a job at chance: exit $RC, not 4: $(cat "$TMP/chance.out")"
expect "$TMP/chance/s.json" "d['status'] == 'no_progress' and d['exit_code'] == 4" "at chance"
expect "$TMP/chance/s.json" "'at chance' in d['failure'] or 'uniform guess' in d['failure']" \
    "at chance: cause"
grep -q "^job no_progress in " "$TMP/chance.out" || fail "result line: $(cat "$TMP/chance.out")"
"$LAUNCH" "${CHANCE[@]}" --on-no-progress warn --summary "$TMP/warn/s.json" \
    >"$TMP/warn.out" 2>"$TMP/warn.log"
RC=$?
[ "$RC" = 0 ] || fail "--on-no-progress warn: exit $RC, not 0: $(cat "$TMP/warn.out")"
expect "$TMP/warn/s.json" "d['status'] == 'ok' and d['failure'] is None" "warn: status"
grep -q " C W no progress: .*(--on-no-progress warn: the job ends ok)" "$TMP/warn.log" ||
    fail "--on-no-progress warn logged no warning"
echo "ok: summaries after kill -9, SIGINT, SIGTERM and a scheduler's SIGTERM; no_progress exit 4"
