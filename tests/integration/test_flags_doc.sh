#!/usr/bin/env bash
# tests/integration/test_flags_doc.sh - the README's flag tables say what
# --help says.
#
# For shardps-launch, -scheduler, -server, -worker and -status: every flag in the
# README's table ("### shardps-NAME") is in the program's --help and the other
# way round; where the README gives a METAVAR ("`--lr X`") it is the one
# --help prints; where it gives a default that is one word ("0.05", "auto";
# not "the bound one"), --help prints the same "[default: ...]". For
# shardps-bench, every flag on a README line that runs "shardps-bench SUB" is
# in "shardps-bench SUB --help". Fails with one line per disagreement.
#
# The README's tables: | `--name METAVAR`[, `--other M`] | meaning | default |,
# where one cell may name several flags ("`--model --mode`") and the default
# cell then lists one default per flag, comma-separated.
. "$(dirname "$0")/lib.sh"

README=$(cd "$(dirname "$0")/../.." && pwd)/README.md
[ -f "$README" ] || fail "no README at $README"
BENCH=$SPS_BUILD/bench/shardps-bench
[ -x "$BENCH" ] || BENCH=$SPS_BUILD/deploy/shardps-bench

for v in $(compgen -e | grep '^SHARDPS_'); do
    unset "$v" # defaults as built, not as this shell's environment sets them
done

BAD=0
bad() {
    echo "FAIL: $*"
    BAD=$((BAD + 1))
}

# The README's table of program $1 as lines "NAME<TAB>METAVAR<TAB>DEFAULT"
# (METAVAR and DEFAULT may be empty).
readme_flags() {
    awk -v want="### $1" '
    function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
    /^#/ { on = (index($0, want) == 1 && (length($0) == length(want) ||
                                          substr($0, length(want) + 1, 1) == " ")); next }
    !on || !/^\|/ || /^\|---/ || /^\| flag \|/ { next }
    {
        line = $0
        gsub(/\\\|/, "\001", line)           # an escaped | inside a cell
        n = split(line, cell, "|")
        flags = cell[2]; def = trim(cell[4])
        gsub(/\001/, "|", flags); gsub(/\001/, "|", def); gsub(/`/, "", def)
        k = 0
        while (match(flags, /`[^`]*`/)) {
            span = substr(flags, RSTART + 1, RLENGTH - 2)
            flags = substr(flags, RSTART + RLENGTH)
            m = split(span, tok, " ")
            for (i = 1; i <= m; i++) {
                if (tok[i] ~ /^--/) { k++; name[k] = substr(tok[i], 3); meta[k] = "" }
                else if (k > 0) { meta[k] = tok[i] }
            }
        }
        nd = split(def, defs, /, /)
        for (i = 1; i <= k; i++) {
            d = (k == 1) ? def : (nd == k ? defs[i] : "")
            printf "%s\t%s\t%s\n", name[i], meta[i], trim(d)
        }
    }' "$README"
}

# --help of a program as lines "NAME<TAB>METAVAR<TAB>DEFAULT". The left column
# is "--name METAVAR" padded to 24 characters and a space: a metavar follows
# the name after one space, the help after two or more (after one only when
# "--name" alone fills the column: then a metavar is told by its capitals).
help_flags() {
    "$@" --help | awk '
    /^  --/ {
        line = substr($0, 3)
        name = line; sub(/ .*/, "", name)
        rest = substr(line, length(name) + 1)
        meta = ""
        if (rest ~ /^ [^ ]/) {
            tok = substr(rest, 2); sub(/ .*/, "", tok)
            if (length(name) < 24 || tok ~ /^[A-Z0-9|:_]+$/) { meta = tok }
        }
        def = ""
        if (match(line, /\[default: [^]]*\]/)) { def = substr(line, RSTART + 10, RLENGTH - 11) }
        name = substr(name, 3)
        if (name != "help") { printf "%s\t%s\t%s\n", name, meta, def }
    }'
}

check() {
    local prog=$1 bin=$2 name meta def hmeta hdef
    readme_flags "$prog" >"$TMP/readme.$prog"
    help_flags "$bin" >"$TMP/help.$prog" || bad "$prog --help failed"
    [ -s "$TMP/readme.$prog" ] || bad "$prog: no flag table under '### $prog' in README.md"
    while IFS=$'\t' read -r name meta def; do
        if ! grep -q "^$name"$'\t' "$TMP/help.$prog"; then
            bad "$prog: README lists --$name, --help does not"
            continue
        fi
        IFS=$'\t' read -r _ hmeta hdef < <(grep "^$name"$'\t' "$TMP/help.$prog")
        if [ -n "$meta" ] && [ "$meta" != "$hmeta" ]; then
            bad "$prog: --$name: README says '--$name $meta', --help '--$name $hmeta'"
        fi
        if [ -n "$def" ] && [ "${def#* }" = "$def" ] && [ "$def" != "$hdef" ]; then
            bad "$prog: --$name: README's default '$def', --help's '${hdef:-none}'"
        fi
        if [ -z "$def" ] && [ -n "$hdef" ]; then
            bad "$prog: --$name: README gives no default, --help says '$hdef'"
        fi
    done <"$TMP/readme.$prog"
    while IFS=$'\t' read -r name _ _; do
        grep -q "^$name"$'\t' "$TMP/readme.$prog" ||
            bad "$prog: --help lists --$name, the README's table does not"
    done <"$TMP/help.$prog"
    echo "checked $prog: $(wc -l <"$TMP/help.$prog") flags"
}

check shardps-launch "$LAUNCH"
check shardps-scheduler "$SCHED"
check shardps-server "$SERVER"
check shardps-worker "$WORKER"
check shardps-status "$SPS_BUILD/deploy/shardps-status"

# shardps-bench: the flags the README's command lines use.
grep -o 'shardps-bench [a-z]\+[^`#]*' "$README" | while read -r _ sub args; do
    for a in $args; do
        case $a in --*) ;; *) continue ;; esac
        flag=${a%%=*}
        "$BENCH" "$sub" --help 2>/dev/null | grep -q -- "^  $flag\( \|$\)" ||
            echo "FAIL: README runs 'shardps-bench $sub $flag', which its --help does not list"
    done
done >"$TMP/bench"
cat "$TMP/bench"
BAD=$((BAD + $(grep -c '^FAIL' "$TMP/bench")))
echo "checked shardps-bench: $(grep -c 'shardps-bench [a-z]' "$README") README lines"

[ "$BAD" -eq 0 ] || fail "$BAD disagreement(s) between README.md and --help"
echo "ok: README.md's flag tables agree with --help"
