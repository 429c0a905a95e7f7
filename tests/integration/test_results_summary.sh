#!/usr/bin/env bash
# tests/integration/test_results_summary.sh - shardps-bench summary on a copy
# of docs/results: the table has a row for each topic, each row links to a
# page that exists; a results directory that is not one, an --out that is not
# a .md file and a page whose columns moved each give one line and their exit
# status.
. "$(dirname "$0")/lib.sh"

BENCH=$SPS_BUILD/bench/shardps-bench
cp -r "$(dirname "$0")/../../docs/results" "$TMP/results"

"$BENCH" summary --results "$TMP/results" --out "$TMP/results/summary.md" \
    >"$TMP/run.log" 2>&1 || fail "summary failed: $(tail -3 "$TMP/run.log")"
page=$TMP/results/summary.md
for topic in "PS vs ring" "compute vs PyTorch" "replicas" "--secure" "time to accuracy"; do
    grep -qF -- "| $topic | " "$page" || fail "no row for '$topic'"
done
links=0
while read -r link; do
    [ -f "$TMP/results/$link" ] || fail "a row links to $link, which is not in docs/results"
    links=$((links + 1))
done < <(grep '^| ' "$page" | grep -o '](\([^)]*\))' | sed 's/^](//; s/)$//')
[ "$links" -ge 5 ] || fail "only $links links in the table"

# Bad usage: one line on stderr, exit 2.
bad() {
    local want=$1
    shift
    "$BENCH" summary "$@" >"$TMP/bad.out" 2>"$TMP/bad.err"
    local rc=$?
    [ "$rc" = "$want" ] || fail "summary $*: exit $rc, expected $want"
    [ "$(wc -l <"$TMP/bad.err")" = 1 ] || fail "summary $*: not one line: $(cat "$TMP/bad.err")"
}
bad 2 --results "$TMP/no-such-dir"
grep -q "is not a directory" "$TMP/bad.err" || fail "bad --results: $(cat "$TMP/bad.err")"
bad 2 --results "$TMP/results" --out "$TMP/summary.txt"

# A page whose column was renamed is an error naming the page, not a row left out.
sed -i 's/dense\/PS bytes (measured)/dense over PS bytes/' "$TMP/results/train_ctr.md"
bad 1 --results "$TMP/results" --out "$TMP/again.md"
grep -q "train_ctr.md" "$TMP/bad.err" || fail "renamed column: $(cat "$TMP/bad.err")"
echo "ok: $links linked rows"
