#!/usr/bin/env bash
# tests/integration/test_datagen.sh - shardps-datagen ctr: a small file of
# Criteo-layout click logs is the same bytes for the same seed and differs
# for another; FILE.gz (or --gzip) is gzip holding those same bytes; every
# line has the label, 13 integer and 26 categorical fields (8 hex digits or
# empty); its one line on stdout reports a click rate near 25% and the
# planted model's AUC in [0.75, 0.85]; bad usage exits 2 with one line, an
# unwritable FILE exits 1 naming it, and neither leaves a file behind.
. "$(dirname "$0")/lib.sh"
GEN=$SPS_BUILD/deploy/shardps-datagen
[ -x "$GEN" ] || fail "no $GEN"
ROWS=20000

# gen NAME ARGS...: runs shardps-datagen ctr, its stdout in $TMP/NAME.out
gen() {
    local name=$1
    shift
    "$GEN" ctr --rows $ROWS "$@" >"$TMP/$name.out" 2>"$TMP/$name.log" ||
        fail "shardps-datagen ctr $*: $(cat "$TMP/$name.log")"
    [ "$(wc -l <"$TMP/$name.out")" = 1 ] || fail "stdout is not one line: $(cat "$TMP/$name.out")"
}

# 1. same seed, same bytes; another seed, other bytes
gen a --seed 7 --out "$TMP/a.txt"
gen b --seed 7 --out "$TMP/b.txt"
cmp -s "$TMP/a.txt" "$TMP/b.txt" || fail "the same seed gave different files"
[ "$(sed 's/ file=.*//' "$TMP/a.out")" = "$(sed 's/ file=.*//' "$TMP/b.out")" ] ||
    fail "the same seed reported differently: $(cat "$TMP/a.out" "$TMP/b.out")"
gen c --seed 8 --out "$TMP/c.txt"
cmp -s "$TMP/a.txt" "$TMP/c.txt" && fail "seeds 7 and 8 gave the same file"
[ "$(wc -l <"$TMP/a.txt")" = $ROWS ] || fail "$(wc -l <"$TMP/a.txt") lines, not $ROWS"
echo "ok - seed 7 twice: the same $(wc -c <"$TMP/a.txt") bytes; seed 8 differs"

# 2. gzip by name or by flag, the same lines inside
gen z --seed 7 --out "$TMP/a.txt.gz"
gen f --seed 7 --gzip --out "$TMP/flag.dat"
for f in "$TMP/a.txt.gz" "$TMP/flag.dat"; do
    [ "$(head -c 2 "$f" | od -An -tx1 | tr -d ' ')" = 1f8b ] || fail "$f is not gzip"
    gzip -dc <"$f" | cmp -s - "$TMP/a.txt" || fail "$f does not hold seed 7's lines"
done
ls "$TMP" | grep -q '\.tmp\.' && fail "a temporary file was left: $(ls "$TMP")"
echo "ok - .gz and --gzip: gzip of the same bytes"

# 3. the layout: label, 13 integers, 26 x (8 hex digits or empty)
bad=$(awk -F'\t' '
    NF != 40 || $1 !~ /^[01]$/ { print NR ": " NF " fields, label " $1; exit }
    { for (i = 2; i <= 14; i++) if ($i !~ /^(-?[0-9]+)?$/) { print NR ": I" i - 1 " " $i; exit }
      for (i = 15; i <= 40; i++) if ($i != "" && (length($i) != 8 || $i ~ /[^0-9a-f]/)) {
          print NR ": C" i - 14 " " $i; exit } }
    ' "$TMP/a.txt")
[ -z "$bad" ] || fail "malformed line $bad"
missing=$(awk -F'\t' '$34 == "" { n++ } END { print n + 0 }' "$TMP/a.txt")
[ "$missing" -gt $((ROWS / 5)) ] || fail "C20 is missing in only $missing rows"
minus=$(awk -F'\t' '$3 == "-1" { n++ } END { print n + 0 }' "$TMP/a.txt")
[ "$minus" -gt 0 ] || fail "I2 is never -1"
echo "ok - $ROWS lines of 40 fields; C20 missing in $missing, I2 = -1 in $minus"

# 4. the report
line=$(cat "$TMP/a.out")
echo "$line" | grep -Eq "^rows=$ROWS clicks=[0-9]+ ctr=0\.[0-9]{4} planted_auc=0\.[0-9]{4} planted_logloss=0\.[0-9]{4} file=$TMP/a.txt\$" ||
    fail "report: $line"
clicks=$(awk -F'\t' '$1 == 1 { n++ } END { print n + 0 }' "$TMP/a.txt")
echo "$line" | grep -q " clicks=$clicks " || fail "the file has $clicks clicks: $line"
python3 - "$line" <<'EOF' || fail "out of range: $line"
import sys
d = dict(kv.split('=', 1) for kv in sys.argv[1].split())
sys.exit(not (0.20 <= float(d['ctr']) <= 0.30 and 0.75 <= float(d['planted_auc']) <= 0.85
              and 0.3 < float(d['planted_logloss']) < 0.6))
EOF
echo "ok - $line"

# 5. bad usage: exit 2, one line on stderr, no file
usage() {
    local rc=0
    "$GEN" "$@" >"$TMP/u.out" 2>"$TMP/u.log" || rc=$?
    [ "$rc" = 2 ] || fail "shardps-datagen $*: exit $rc, not 2: $(cat "$TMP/u.log")"
    [ "$(wc -l <"$TMP/u.log")" = 1 ] || fail "shardps-datagen $*: not one line: $(cat "$TMP/u.log")"
    grep -q "^shardps-datagen.*: error: " "$TMP/u.log" || fail "shardps-datagen $*: $(cat "$TMP/u.log")"
    [ ! -s "$TMP/u.out" ] || fail "shardps-datagen $* printed $(cat "$TMP/u.out")"
}
usage
usage nope
usage ctr --rows 10
usage ctr --rows 0 --out "$TMP/u.txt"
usage ctr --rows many --out "$TMP/u.txt"
usage ctr --scale 2 --out "$TMP/u.txt"
usage ctr --scale 0 --out "$TMP/u.txt"
usage ctr --seed -1 --out "$TMP/u.txt"
usage ctr --bogus --out "$TMP/u.txt"
usage ctr --out "$TMP/u.txt" stray
[ ! -e "$TMP/u.txt" ] || fail "bad usage left $TMP/u.txt"
"$GEN" ctr --help >"$TMP/h.out" 2>&1 || fail "ctr --help failed"
grep -q -- "--scale F" "$TMP/h.out" || fail "ctr --help: $(cat "$TMP/h.out")"
echo "ok - bad usage: exit 2 with one line"

# 6. an unwritable FILE: exit 1, one line naming it
rc=0
"$GEN" ctr --rows 10 --out "$TMP/no/such/dir/x.txt" >/dev/null 2>"$TMP/w.log" || rc=$?
[ "$rc" = 1 ] || fail "unwritable --out: exit $rc: $(cat "$TMP/w.log")"
[ "$(wc -l <"$TMP/w.log")" = 1 ] && grep -q "no/such/dir/x.txt" "$TMP/w.log" ||
    fail "unwritable --out: $(cat "$TMP/w.log")"
echo "ok - unwritable --out: $(cat "$TMP/w.log")"
check_logs
echo "ok"
