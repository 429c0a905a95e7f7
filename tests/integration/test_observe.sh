#!/usr/bin/env bash
# tests/integration/test_observe.sh - a running job's metrics, its trace and
# its plots.
#
# 1. Metrics: a 2x2 sync job (shardps-launch) serves the job's metrics on the
#    scheduler's --metrics-bind (port 0: the logged one). Two scrapes while it
#    runs: both pass `promtool check metrics` (Debian's prometheus; the check
#    is skipped, said so, without it) and the workers' steps and the servers'
#    received bytes grow between them. After the summary is written the
#    scheduler still serves (--metrics-hold) until one scrape took the final
#    values: the workers' pushed and pulled bytes sum to the summary's
#    bytes_pushed and bytes_pulled. The launcher's --plot DIR has the run's
#    CSV and PNG; --log-dir a log per role.
# 2. Trace: steps 10:20 of a 2x2 job (--trace, --trace-steps), merged by the
#    launcher, is JSON whose every event has its fields, only steps 10..19,
#    every role's spans, and every push inside its step's span; shardps-trace
#    merge gives the same events.
# 3. A 10,000-step run traced with a 64 KiB budget writes at most 64 KiB; a
#    worker given SIGUSR1 writes its file at once; --log-file has every role.
# 4. With 500 connections open to the metrics port that sent half a request
#    and then nothing, a scrape is still answered (within 5 s: the idle ones
#    are closed after their own silence, never before the scrape).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
TRACE=$SPS_BUILD/deploy/shardps-trace

scrape() {
    curl -sf "$URL" >"$1" || fail "scrape of $URL failed"
    if command -v promtool >/dev/null; then
        promtool check metrics <"$1" >"$1.lint" 2>&1 || fail "promtool: $(head -3 "$1.lint")"
    fi
}

# The scheduler's metrics URL from the launcher's log $TMP/$1.log, into URL.
metrics_url() {
    URL=""
    for i in $(seq 1 300); do
        URL=$(grep -o "C I metrics on http://[0-9.:]*/metrics" "$TMP/$1.log" | head -1 | cut -d' ' -f5)
        [ -n "$URL" ] && return
        sleep 0.1
    done
    fail "the scheduler logged no metrics endpoint: $(tail -5 "$TMP/$1.log")"
}

# the value of one sample line "NAME{LABELS} V" in a scrape (0 when absent)
value() {
    awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }' "$1"
}

command -v curl >/dev/null || skip "no curl"
command -v promtool >/dev/null || echo "promtool not installed (Debian: prometheus): metrics not linted"

# ---- bad flags: one line, exit 2, nothing started ----
for bad in "$SCHED --metrics-bind nohost" "$WORKER --metrics-bind 127.0.0.1:70000" \
    "$SERVER --trace-steps 5:2" "$WORKER --trace-kib 8" "$LAUNCH --plot /dev/null/here" \
    "$LAUNCH --trace $TMP/none/t.json"; do
    $bad >"$TMP/bad.out" 2>&1
    rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l <"$TMP/bad.out")" = 1 ] || fail "$bad: exit $rc: $(cat "$TMP/bad.out")"
done

# ---- 1. metrics ----
# a: a long job, scraped twice while it runs, then stopped
start job "$LAUNCH" --servers 2 --workers 2 --batch 16 --epochs 5 --plot none \
    --metrics-bind 127.0.0.1:0
LPID=$LAST_PID
metrics_url job
GROWING='shardps_worker_steps_total{node="W0"} shardps_worker_steps_total{node="W1"}
shardps_server_received_bytes_total{node="S1",peer="W0"}'
for i in $(seq 1 1200); do # until every counter compared below has a first report
    scrape "$TMP/s1.txt"
    first=1
    for k in $GROWING; do
        [ "$(value "$TMP/s1.txt" "$k")" != 0 ] || first=""
    done
    [ -n "$first" ] && break
    sleep 0.1
done
[ -n "$first" ] || fail "no first report of every counter compared: $(grep -h 'steps_total{\|received_bytes_total{' "$TMP/s1.txt")"
# the second scrape: after the next heartbeats (a loaded machine may delay them)
for i in $(seq 1 240); do
    sleep 0.5
    scrape "$TMP/s2.txt"
    grown=1
    for k in $GROWING; do
        a=$(value "$TMP/s1.txt" "$k")
        b=$(value "$TMP/s2.txt" "$k")
        $PY -c "import sys; sys.exit(not 0 < float(sys.argv[1]) < float(sys.argv[2]))" "$a" "$b" ||
            grown=""
    done
    [ -n "$grown" ] && break
done
[ -n "$grown" ] || fail "the counters did not grow between two scrapes: $(grep -h 'steps_total{' "$TMP/s1.txt" "$TMP/s2.txt")"
grep -q '^shardps_server_apply_seconds_p99{node="S0"}' "$TMP/s2.txt" || fail "no apply p99"
grep -q '^shardps_server_staleness_bucket{node="S0",le="0"}' "$TMP/s2.txt" || fail "no staleness"
kill "$LPID"
wait_pid "$LPID" 30 || fail "the launcher did not stop"

# b: a short job whose final values are scraped after its summary
mkdir -p "$TMP/plot" "$TMP/logs"
start end "$LAUNCH" --servers 2 --workers 2 --batch 512 --epochs 2 \
    --summary "$TMP/m.json" --metrics-bind 127.0.0.1:0 --metrics-hold 120 \
    --plot "$TMP/plot" --log-dir "$TMP/logs"
LPID=$LAST_PID
metrics_url end
wait_file "$TMP/m.json" 240 || fail "no summary: $(tail -5 "$TMP/end.log")"
scrape "$TMP/s3.txt"
wait_pid "$LPID" 60 || fail "the launcher did not end after the final scrape"
[ "$WAIT_RC" = 0 ] || fail "launcher exited $WAIT_RC: $(tail -5 "$TMP/end.log")"
for what in pushed pulled; do
    sum=$(awk -v p="shardps_worker_${what}_bytes_total{node=" 'index($1, p) == 1 { s += $2 } END { printf "%.0f", s }' "$TMP/s3.txt")
    expect "$TMP/m.json" "d['bytes_$what'] == $sum" "the workers' $what bytes ($sum) against the summary"
done
lines=$(wc -l <"$TMP/plot/progress.csv")
[ "$lines" -ge 3 ] || fail "progress.csv has $lines lines"
if command -v gnuplot >/dev/null; then
    [ -s "$TMP/plot/progress.png" ] || fail "no progress.png"
fi
[ "$(wc -l <"$TMP/plot/accuracy.csv")" = 3 ] || fail "accuracy.csv: not 2 epochs"
for r in scheduler S0 S1 W0 W1; do
    [ -s "$TMP/logs/$r.log" ] || fail "no $r.log from --log-dir"
done
grep -q "W0 I epoch=1 test_accuracy" "$TMP/logs/W0.log" || fail "W0.log lacks W0's lines"
echo "metrics: bytes agree ($(field "$TMP/m.json" "d['bytes_pushed']") pushed); $((lines - 1)) progress rows"

# ---- 2. trace of steps 10:20 ----
"$LAUNCH" --servers 2 --workers 2 --max-steps 40 --summary "$TMP/t.json.summary" \
    --plot none --trace "$TMP/t.json" --trace-steps 10:20 >"$TMP/trace.log" 2>&1 ||
    fail "traced job failed: $(tail -5 "$TMP/trace.log")"
"$TRACE" merge "$TMP/t2.json" "$TMP"/t.S0.json "$TMP"/t.S1.json "$TMP"/t.W0.json "$TMP"/t.W1.json ||
    fail "shardps-trace merge failed"
$PY - "$TMP/t.json" "$TMP/t2.json" <<'PYEOF' || fail "trace check"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
assert ev == json.load(open(sys.argv[2]))["traceEvents"], "shardps-trace merge differs"
meta = [e for e in ev if e["ph"] == "M"]
spans = [e for e in ev if e["ph"] == "X"]
assert sorted(m["args"]["name"] for m in meta) == ["S0", "S1", "W0", "W1"], meta
for e in spans:
    for k in ("name", "cat", "ph", "ts", "dur", "pid", "tid", "args"):
        assert k in e, (k, e)
    assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0, e
    assert 10 <= e["args"]["step"] < 20, e
names = {e["name"] for e in spans}
want = {"step", "forward", "backward", "push", "pull", "wait", "receive", "validate", "apply", "reply",
        "push_msg", "pull_msg", "ack", "pull_part"}
assert want <= names, want - names
# the wire events: every worker step sends pushes and gets pull parts, and
# each ack names the first key of a push message that step sent
wire = {}
for e in spans:
    if e["cat"] == "wire":
        wire.setdefault((e["pid"], e["args"]["step"], e["name"]), []).append(e["args"]["key"])
for pid, step, _ in {k[:2] + (0,) for k in wire}:
    sent = wire.get((pid, step, "push_msg"), [])
    assert sent and wire.get((pid, step, "pull_part")), (pid, step, wire)
    assert set(wire.get((pid, step, "ack"), [])) <= set(sent), (pid, step, wire)
steps = {(e["pid"], e["tid"], e["args"]["step"]): e for e in spans if e["name"] == "step"}
assert len(steps) == 20, len(steps)  # 2 workers x 10 steps
pushes = [e for e in spans if e["name"] == "push"]
for p in pushes:
    s = steps[(p["pid"], p["tid"], p["args"]["step"])]
    assert s["ts"] <= p["ts"] and p["ts"] + p["dur"] <= s["ts"] + s["dur"] + 0.002, (p, s)
print("trace: %d events, %d pushes inside their steps" % (len(ev), len(pushes)))
PYEOF

# ---- 3. a long run stays within the trace's budget ----
#    SIGUSR1 writes a worker's file while it runs. (Batch 8 at the default
#    rate ends at chance: judged by the trace, not by its accuracy.)
SHARDPS_PROGRESS=0.2 start long "$LAUNCH" --servers 1 --workers 1 --batch 8 --epochs 2 \
    --max-steps 10000 --plot none --trace "$TMP/long.json" --trace-kib 64 \
    --log-file "$TMP/long.all" --on-no-progress warn
LPID=$LAST_PID
for i in $(seq 1 300); do
    grep -Eq "step=[0-9]+/" "$TMP/long.log" && break
    sleep 0.1
done
w0=$(pgrep -P "$LPID" -f "shardps-worker")
[ -n "$w0" ] || fail "no worker under the launcher: $(tail -3 "$TMP/long.log")"
kill -USR1 "$w0"
wait_pid "$LPID" 240 || fail "the 10,000-step job did not end"
[ "$WAIT_RC" = 0 ] || fail "10,000 traced steps failed: $(tail -5 "$TMP/long.log")"
# written twice: on SIGUSR1 and at the end
[ "$(grep -c "W0 I trace: .* written to $TMP/long.W0.json" "$TMP/long.log")" = 2 ] ||
    fail "SIGUSR1 did not write W0's trace: $(grep "trace:" "$TMP/long.log")"
grep -q " W0 I " "$TMP/long.all" && grep -q " S0 I " "$TMP/long.all" ||
    fail "--log-file lacks the roles' lines"
for f in "$TMP/long.S0.json" "$TMP/long.W0.json"; do
    size=$(stat -c %s "$f")
    [ "$size" -le 65536 ] || fail "$f is $size bytes, over its 64 KiB budget"
    $PY -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['otherData']['dropped'] > 0; assert d['traceEvents'][-1]['args']['step'] >= 9990, d['traceEvents'][-1]" "$f" ||
        fail "$f: not the newest steps of a wrapped ring"
    echo "trace of 10,000 steps: $(basename "$f") $size bytes (budget 65536)"
done

# ---- 4. half-open connections do not block a scrape ----
start_scheduler idle --servers 1 --workers 1 --metrics-bind 127.0.0.1:0 --wait 300
metrics_url idle
$PY - "$URL" "$TMP/idle.ready" <<'PYEOF' &
import socket, sys, time, os
host, port = sys.argv[1].split("//")[1].split("/")[0].split(":")
conns = []
for i in range(500):
    s = socket.create_connection((host, int(port)))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # half a request, then silence
    conns.append(s)
open(sys.argv[2], "w").write("500\n")
time.sleep(120)
PYEOF
HOLDER=$!
PIDS+=("$HOLDER")
wait_file "$TMP/idle.ready" 60 || fail "could not open 500 connections to $URL"
curl -sf --max-time 5 "$URL" >"$TMP/idle.txt" ||
    fail "a scrape with 500 idle connections open was not answered"
grep -q '^shardps_' "$TMP/idle.txt" || fail "the scrape beside 500 idle connections is not metrics"
kill "$HOLDER" "$SCHED_PID"
echo "metrics: a scrape answered beside 500 half-open connections"
check_logs
