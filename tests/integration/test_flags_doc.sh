#!/usr/bin/env bash
# tests/integration/test_flags_doc.sh - the flag reference (docs/usage.md)
# says what --help says.
#
# Every environment variable a program's --help names ("(SHARDPS_X)") has its
# row in the reference's table of variables, with that flag and that program
# among its readers, and every flag variable the table says a program reads is
# in the program's --help.
#
# For shardps-launch, -scheduler, -server, -worker and -status: every flag in the
# reference's table ("### shardps-NAME") is in the program's --help and the other
# way round; where the table gives a METAVAR ("`--lr X`") it is the one
# --help prints; where it gives a default that is one word ("0.05", "auto";
# not "the bound one"), --help prints the same "[default: ...]". For
# shardps-bench, every flag on a line of README.md or docs/*.md that runs
# "shardps-bench SUB" is in "shardps-bench SUB --help". In README.md and
# docs/*.md every "protocol N" is this build's, every sample log line is as
# the logger writes it (stamp, role and rank, level), and every recipe with
# --secure --keys also gives --secret-file. Fails with one line per
# disagreement.
#
# The tables: | `--name METAVAR`[, `--other M`] | meaning | default |,
# where one cell may name several flags ("`--model --mode`") and the default
# cell then lists one default per flag, comma-separated, or one in words
# ("the role's") for all of them.
. "$(dirname "$0")/lib.sh"

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
REF=$ROOT/docs/usage.md
[ -f "$REF" ] || fail "no flag reference at $REF"
DOCS=("$ROOT/README.md" "$ROOT"/docs/*.md)
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

# The reference's table of program $1 as lines "NAME<TAB>METAVAR<TAB>DEFAULT"
# (METAVAR "-" when the table gives none; DEFAULT may be empty).
ref_flags() {
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
            # one default in words is that of every flag of the row
            d = (k == 1 || (nd == 1 && def ~ / /)) ? def : (nd == k ? defs[i] : "")
            # "-": no METAVAR (read collapses two tabs in a row)
            printf "%s\t%s\t%s\n", name[i], meta[i] == "" ? "-" : meta[i], trim(d)
        }
    }' "$REF"
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
        if (name != "help" && name != "version") { printf "%s\t%s\t%s\n", name, meta, def }
    }'
}

check() {
    local prog=$1 bin=$2 name meta def hmeta hdef
    ref_flags "$prog" >"$TMP/ref.$prog"
    help_flags "$bin" >"$TMP/help.$prog" || bad "$prog --help failed"
    [ -s "$TMP/ref.$prog" ] || bad "$prog: no flag table under '### $prog' in docs/usage.md"
    while IFS=$'\t' read -r name meta def; do
        if ! grep -q "^$name"$'\t' "$TMP/help.$prog"; then
            bad "$prog: docs/usage.md lists --$name, --help does not"
            continue
        fi
        IFS=$'\t' read -r _ hmeta hdef < <(grep "^$name"$'\t' "$TMP/help.$prog")
        if [ "$meta" != - ] && [ "$meta" != "$hmeta" ]; then
            bad "$prog: --$name: docs/usage.md says '--$name $meta', --help '--$name $hmeta'"
        fi
        if [ -n "$def" ] && [ "${def#* }" = "$def" ] && [ "$def" != "$hdef" ]; then
            bad "$prog: --$name: docs/usage.md's default '$def', --help's '${hdef:-none}'"
        fi
        if [ -z "$def" ] && [ -n "$hdef" ]; then
            bad "$prog: --$name: docs/usage.md gives no default, --help says '$hdef'"
        fi
    done <"$TMP/ref.$prog"
    while IFS=$'\t' read -r name _ _; do
        grep -q "^$name"$'\t' "$TMP/ref.$prog" ||
            bad "$prog: --help lists --$name, the table in docs/usage.md does not"
    done <"$TMP/help.$prog"
    echo "checked $prog: $(wc -l <"$TMP/help.$prog") flags"
}

# The table of variables as lines "VARIABLE<TAB>FLAG<TAB>PROGRAMS" (FLAG
# "none" for a variable no flag reads; PROGRAMS the short names before any ";").
ref_env() {
    awk '
    /^### Environment variables/ { on = 1; next }
    /^#/ { on = 0 }
    !on || !/^\| `SHARDPS_/ { next }
    {
        n = split($0, cell, "|")
        var = cell[2]; flag = cell[3]; who = cell[4]
        gsub(/[` ]/, "", var); gsub(/[` ]/, "", flag)
        sub(/;.*/, "", who); gsub(/ /, "", who)
        printf "%s\t%s\t%s\n", var, flag, who
    }' "$REF"
}
ref_env >"$TMP/env.ref"
[ -s "$TMP/env.ref" ] || bad "no table of variables under '### Environment variables' in docs/usage.md"
for pair in launch:$LAUNCH scheduler:$SCHED server:$SERVER worker:$WORKER \
    status:$SPS_BUILD/deploy/shardps-status; do
    short=${pair%%:*} bin=${pair#*:}
    "$bin" --help | sed -n 's/^  --\([a-z0-9-]*\).*(\(SHARDPS_[A-Z0-9_]*\))$/\2\t--\1/p' >"$TMP/env.$short"
    while IFS=$'\t' read -r var flag; do
        row=$(grep "^$var"$'\t' "$TMP/env.ref")
        if [ -z "$row" ]; then
            bad "shardps-$short reads $var ($flag), docs/usage.md's table of variables has no row: | \`$var\` | \`$flag\` | $short |"
        elif [ "$(cut -f2 <<<"$row")" != "$flag" ]; then
            bad "$var: shardps-$short reads it for $flag, docs/usage.md says $(cut -f2 <<<"$row")"
        elif ! tr ',' '\n' <<<"$(cut -f3 <<<"$row")" | grep -qx "$short"; then
            bad "$var: shardps-$short reads it, docs/usage.md's row does not name $short"
        fi
    done <"$TMP/env.$short"
done
while IFS=$'\t' read -r var flag who; do
    for short in $(tr ',' ' ' <<<"$who"); do
        [ -f "$TMP/env.$short" ] || continue
        grep -q "^$var"$'\t' "$TMP/env.$short" ||
            bad "$var: docs/usage.md says shardps-$short reads it, its --help does not"
    done
done <"$TMP/env.ref"
echo "checked the table of variables: $(wc -l <"$TMP/env.ref") rows"

check shardps-launch "$LAUNCH"
check shardps-scheduler "$SCHED"
check shardps-server "$SERVER"
check shardps-worker "$WORKER"
check shardps-status "$SPS_BUILD/deploy/shardps-status"

# The launcher's --help shows each flag it forwards with the default of the
# role that takes it (the first in scheduler, server, worker order);
# --servers and --workers are its own.
while IFS=$'\t' read -r name _ hdef; do
    case $name in servers | workers) continue ;; esac
    for role in scheduler server worker; do
        line=$(grep "^$name"$'\t' "$TMP/help.shardps-$role") || continue
        rdef=${line##*$'\t'}
        [ "$rdef" = "$hdef" ] ||
            bad "shardps-launch: --$name: --help's default '${hdef:-none}', shardps-$role's '${rdef:-none}'"
        break
    done
done <"$TMP/help.shardps-launch"

# shardps-bench: the flags the docs' command lines use.
grep -ho 'shardps-bench [a-z]\+[^`#]*' "${DOCS[@]}" | while read -r _ sub args; do
    for a in $args; do
        case $a in --*) ;; *) continue ;; esac
        flag=${a%%=*}
        "$BENCH" "$sub" --help 2>/dev/null | grep -q -- "^  $flag\( \|$\)" ||
            echo "FAIL: the docs run 'shardps-bench $sub $flag', which its --help does not list"
    done
done >"$TMP/bench"
cat "$TMP/bench"
BAD=$((BAD + $(grep -c '^FAIL' "$TMP/bench")))
echo "checked shardps-bench: $(cat "${DOCS[@]}" | grep -c 'shardps-bench [a-z]') lines of the docs"

# What the docs show of the programs' output and recipes:
# - a "protocol N" is this build's (as --version prints it);
# - a sample log line opens with the logger's stamp (ISO 8601 with the UTC
#   offset), a role and rank and a level E, W, I, D (or > and ! for a line a
#   program wrote itself), never with the old bare "HH:MM:SS.mmm";
# - a recipe with --secure --keys DIR also gives --secret-file.
proto=$("$WORKER" --version | grep -o 'protocol [0-9]*')
STAMP='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}[+-][0-9]{2}:[0-9]{2}'
for f in "${DOCS[@]}"; do
    rel=${f#"$ROOT"/}
    while IFS= read -r hit; do
        bad "$rel:${hit%%:*}: says '${hit#*:}', the build is $proto"
    done < <(grep -no 'protocol [0-9]\+' "$f" | grep -v ":$proto\$")
    while IFS= read -r hit; do
        bad "$rel:${hit%%:*}: a log line not as the logger writes it: ${hit#*:}"
    done < <(grep -nE "^([0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} |$STAMP)" "$f" |
        grep -vE "^[0-9]+:$STAMP [A-Z][0-9]* [EWID>!] ")
    while IFS= read -r hit; do
        bad "$rel:${hit%%:*}: --secure --keys without --secret-file"
    done < <(grep -n -- '--secure --keys' "$f" | grep -v -- '--secret-file')
done
echo "checked the docs' protocol numbers, log lines and --secure recipes ($proto)"

[ "$BAD" -eq 0 ] || fail "$BAD disagreement(s) between the docs and --help"
echo "ok: docs/usage.md's flag tables and the docs' bench lines agree with --help"
