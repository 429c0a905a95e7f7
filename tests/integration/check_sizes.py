#!/usr/bin/env python3
"""The house's size limits: no source file outside tests/ over 800 lines and no
function over 80, except the tables and flag lists named in TABLES. A
function is a body that opens with "{" in column 0 and closes with "}" in
column 0 (the project's style); its length counts from the line that names it
to the closing brace.

Then it runs check_circles.py: no circle of more than 2 files.

usage: check_sizes.py [REPO] [--list]   (exit 1 naming each breach; --list
       also names the excepted functions that are over the limit)
"""
import os
import re
import sys

MAX_FILE, MAX_FUNC = 800, 80

# Functions allowed past MAX_FUNC because they are one table or one flag list,
# read as a list rather than as steps: "path:function".
TABLES = {
    # shardps-bench train's flags: one entry per flag with its help text
    'bench/train/train.c:s_flags',
}

EXTS = ('.c', '.h', '.cu')


def sources(top):
    for d, dirs, files in os.walk(top):
        rel = os.path.relpath(d, top)
        parts = rel.split(os.sep)
        if parts[0] in ('tests', '.git', '.gpu') or parts[0].startswith('build'):
            dirs[:] = []
            continue
        for f in files:
            if f.endswith(EXTS):
                yield os.path.join(d, f)


def functions(lines):
    """(name, first line, length) of each column-0 brace body."""
    start = None
    for i, line in enumerate(lines):
        if line.startswith('{') and start is None:
            # the signature: walk back to the line that names the function
            j = i - 1
            while j > 0 and not re.match(r'^[A-Za-z_]', lines[j]):
                j -= 1
            m = re.search(r'([A-Za-z_][A-Za-z0-9_]*)\s*\(', ''.join(lines[j:i]))
            start = (m.group(1) if m else '?', j)
        elif line.startswith('}') and start is not None:
            name, j = start
            yield name, j + 1, i - j + 1
            start = None


def main(argv):
    top = next((a for a in argv[1:] if not a.startswith('-')), '.')
    listing = '--list' in argv
    bad = 0
    over = set()
    for path in sorted(sources(top)):
        with open(path, encoding='utf-8', errors='replace') as fh:
            lines = fh.readlines()
        rel = os.path.relpath(path, top)
        if len(lines) > MAX_FILE:
            print(f'{rel}: {len(lines)} lines (at most {MAX_FILE})')
            bad += 1
        for name, first, n in functions(lines):
            named = f'{rel}:{name}' in TABLES
            if n > MAX_FUNC:
                over.add(f'{rel}:{name}')
            if n > MAX_FUNC and (listing or not named):
                note = ' (named exception)' if named else ''
                print(f'{rel}:{first}: {name}() is {n} lines '
                      f'(at most {MAX_FUNC}){note}')
                bad += not named
    # an exception that no longer applies goes, so the list stays true
    for stale in sorted(TABLES - over):
        print(f'{stale}: named as an exception but not over {MAX_FUNC} lines; '
              'remove it from check_sizes.py')
        bad += 1
    # and no circle of more than 2 files (check_circles.py, beside this one)
    sys.dont_write_bytecode = True
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import check_circles
    bad += check_circles.check(top)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
