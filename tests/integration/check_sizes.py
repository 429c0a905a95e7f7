#!/usr/bin/env python3
"""The house's size limits: no source file outside tests/ over 800 lines and no
function over 120. A function is a body that opens with "{" in column 0 and
closes with "}" in column 0 (the project's style); its length counts from the
line that names it to the closing brace.

usage: check_sizes.py [REPO] [--list]   (exit 1 naming each breach)
"""
import os
import re
import sys

MAX_FILE, MAX_FUNC = 800, 120
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
    for path in sorted(sources(top)):
        with open(path, encoding='utf-8', errors='replace') as fh:
            lines = fh.readlines()
        rel = os.path.relpath(path, top)
        if len(lines) > MAX_FILE:
            print(f'{rel}: {len(lines)} lines (at most {MAX_FILE})')
            bad += 1
        for name, first, n in functions(lines):
            if n > MAX_FUNC or (listing and n > 80):
                print(f'{rel}:{first}: {name}() is {n} lines (at most {MAX_FUNC})')
                bad += n > MAX_FUNC
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
