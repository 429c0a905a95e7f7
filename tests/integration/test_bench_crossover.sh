#!/usr/bin/env bash
# tests/integration/test_bench_crossover.sh - shardps-bench crossover writes
# one table per link setting.
#
# Two settings, one dilated (1gbit,dilate=2) and one not (100mbit), 2
# workers, a few steps: the page has the bench's header and a table for each,
# the dilated one saying so; each table's CSV has the three designs (2
# dedicated servers, 2 colocated, the ring with none), all ok; the parameter
# server's rows carry the loopback CPU per round, the CPU bound it sets
# (the machine's cores times the dilation over that cost) and their ratio to
# the ring, the ring's none; the theory's bytes are the ring's for the
# colocated row. Bad --links and --workers values are one-line usage errors.
# Skips with the reason when the network cannot be made here.
. "$(dirname "$0")/lib.sh"

BENCH=$SPS_BUILD/bench/shardps-bench

for bad in "--links 1gbps" "--links 1gbit,dilate=0.5" "--links ;" "--workers 1"; do
    # shellcheck disable=SC2086 # the flag and its value are two words
    "$BENCH" crossover $bad --out "$TMP/bad" >/dev/null 2>"$TMP/bad.log"
    rc=$?
    [ $rc = 2 ] && [ "$(wc -l <"$TMP/bad.log")" = 1 ] ||
        fail "crossover $bad: exit $rc, expected 2 with one line: $(cat "$TMP/bad.log")"
done

"$BENCH" crossover --links '1gbit,dilate=2;100mbit' --workers 2 --max-steps 4 --reps 1 \
    --out "$TMP/x" >"$TMP/x.out" 2>"$TMP/x.log"
rc=$?
if grep -q "skipped:" "$TMP/x.out"; then
    [ $rc = 0 ] || fail "a skipped run exited $rc"
    skip "$(grep -o 'skipped: .*' "$TMP/x.out" | sed 's/^skipped: //')"
fi
[ $rc = 0 ] || fail "crossover exited $rc: $(tail -5 "$TMP/x.log")"
PAGE=$TMP/x/crossover.md
results_page "$PAGE" crossover
grep -q "^### --net 1gbit --dilate 2: 1gbit per link.*; dilated 2x" "$PAGE" &&
    grep -q "^### --net 100mbit: 100mbit per link" "$PAGE" ||
    fail "not one table per link setting: $(grep '^###' "$PAGE")"
cores=$(nproc)
for t in 1gbit_dilate2:2 100mbit:1; do
    csv=$TMP/x/crossover_${t%:*}.csv
    [ -s "$csv" ] || fail "no $csv: $(ls "$TMP/x")"
    python3 - "$csv" "$cores" "${t#*:}" <<'EOF' || fail "$csv: $(cat "$csv")"
import csv, sys
rows = {r["design"]: r for r in csv.DictReader(open(sys.argv[1]))}
cores, dilate = float(sys.argv[2]), float(sys.argv[3])
assert sorted(rows) == ["PS colocated", "PS dedicated", "ring"], rows
assert [rows[d]["servers"] for d in ("PS dedicated", "PS colocated", "ring")] == ["2", "2", "0"]
for d, r in rows.items():
    assert r["status"] == "ok" and float(r["samples_per_sec"]) > 0, r
    ps = d != "ring"
    assert (r["comm_cpu_ms"] != "") == ps and (r["ps_vs_ring"] != "") == ps, r
    if ps:
        want = cores * dilate / (float(r["comm_cpu_ms"]) / 1e3)
        assert abs(float(r["cpu_bound_rounds"]) - want) <= 0.01 * want + 1, (r, want)
        assert float(r["ps_vs_ring"]) > 0, r
assert rows["PS colocated"]["theory_mb"] == rows["ring"]["theory_mb"], rows
EOF
done
PFX=$(grep -Eo "simulated network spsb[0-9]+" "$TMP/x.log" | head -1 | awk '{print $3}')
[ -n "$PFX" ] && [ -z "$(ip netns list 2>/dev/null | grep "^$PFX")" ] ||
    fail "namespaces left: $PFX $(ip netns list | grep spsb)"
echo "two link settings, three designs each: $(grep -c '^| 2 |' "$PAGE") rows"
check_logs
