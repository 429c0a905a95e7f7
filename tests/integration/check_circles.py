#!/usr/bin/env python3
"""The house's circles: no circle of more than 2 units in the graph of which
unit uses names from which, over the C sources outside tests/.

A unit is a .c (or .cu) file with its headers: x.h, and x_impl.h and the like
(a header joins the unit whose stem its own stem starts with). A unit defines
the non-static functions and globals of its .c, and what its headers define:
types, struct/enum tags, enum constants, macros, inline functions. Unit A
leans on unit B (an arrow) when A's text (comments and strings left out, a
prototype being no use) names a function or global that B alone defines: a
call that links A to B. The types and macros A takes from B are listed with
the arrow but make none on their own (--types counts them too). A circle is a
strongly connected component; one of 3 or more units is a tangle that no file
of it can be read, tested or changed without the others, so this check fails
on it (a mutual pair is tolerated).

usage: check_circles.py [REPO] [--all] [--types]   (exit 1 naming each
       circle; --all also lists the mutual pairs)
       check_circles.py --selftest   (plants circles in a temporary tree)
"""
import collections
import os
import re
import sys
import tempfile

# Circles known and being undone; this list only shrinks. Each is the sorted
# tuple of its units' files.
KNOWN = set()

SKIP_DIRS = ('tests', 'bench-out', 'out', '_build')
SOURCE_EXTS = ('.c', '.cu')
EXTS = SOURCE_EXTS + ('.h',)

_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_TOKEN = re.compile(r'[A-Za-z_][A-Za-z0-9_]*|[{}()\[\];=,*]')
_IDENT = re.compile(r'[A-Za-z_]')
_KEYWORDS = frozenset('''auto break case char const continue default do double else enum
    extern float for goto if inline int long register restrict return short signed sizeof
    static struct switch typedef union unsigned void volatile while _Bool bool
    __attribute__ __restrict__ __inline__ __global__ __device__ __host__'''.split())


def sources(top):
    for d, dirs, files in os.walk(top):
        rel = os.path.relpath(d, top)
        first = rel.split(os.sep)[0]
        if rel != '.' and (first in SKIP_DIRS or first.startswith(('.', 'build'))):
            dirs[:] = []
            continue
        for f in files:
            if f.endswith(EXTS):
                yield os.path.relpath(os.path.join(d, f), top)


def units_of(paths):
    """{path: unit}, a unit named by its .c (or .cu) file, else its header."""
    stems = {os.path.splitext(p)[0]: p for p in paths if p.endswith(SOURCE_EXTS)}
    unit = {}
    for p in paths:
        stem = os.path.splitext(p)[0]
        if p.endswith('.h'):
            # x_impl.h, x_zmq.h: x's, when x.c exists
            cut = stem
            while cut not in stems and '_' in os.path.basename(cut):
                cut = cut.rsplit('_', 1)[0]
            stem = cut if cut in stems else stem
        unit[p] = stems.get(stem, p)
    return unit


def _statement_names(st):
    """The names a top-level statement (tokens up to its ';' or body) defines
    and declares: (defined, declared)."""
    if not st:
        return [], []
    idents = [t for t in st if _IDENT.match(t) and t not in _KEYWORDS]
    if st[0] in ('struct', 'union', 'enum') and len(idents) == 1 and st[-1] == ';':
        return [], []  # struct x; declares
    if st[0] == 'typedef':
        # typedef R (*name)(...); typedef R name(...); else the last name
        for i in range(len(st) - 2):
            if st[i] == '(' and st[i + 1] == '*' and _IDENT.match(st[i + 2]):
                return [st[i + 2]], []
        if '(' in st and st.index('(') > 0 and st[st.index('(') - 1] in idents:
            return [st[st.index('(') - 1]], []
        depth, last = 0, None
        for t in st:
            depth += (t == '[') - (t == ']')
            if depth == 0 and t in idents:
                last = t
        return ([last] if last else []), []
    if '(' in st and ('=' not in st or st.index('(') < st.index('=')):
        i = st.index('(')
        name = st[i - 1] if i > 0 and st[i - 1] in idents else None
        if not name:
            return [], []
        if st[-1] == '{':
            return [name], []  # a function's definition
        return [], [name]      # a prototype
    # variables: each name before '=', ',', ';', '['
    names = []
    depth = 0
    for i, t in enumerate(st):
        depth += (t in '({[') - (t in ')}]')
        if depth == 0 and t in idents and i + 1 < len(st) and st[i + 1] in '=,;[':
            names.append(t)
        elif depth == 0 and t in idents and i + 1 == len(st):
            names.append(t)
    return ([], names) if 'extern' in st else (names, [])


def scan(text, is_header):
    """({defined name: 'code' (a function, a global) or 'decl' (a type, a
    tag, an enum constant, a macro)}, Counter of used names) of one file."""
    text = _NOISE.sub(lambda m: '\n' * m.group(0).count('\n') or ' ', text)
    text = text.replace('\\\n', ' ')
    defined, used, code = {}, collections.Counter(), []
    for line in text.split('\n'):
        s = line.lstrip()
        if not s.startswith('#'):
            code.append(line)
            continue
        words = re.findall(r'[A-Za-z_][A-Za-z0-9_]*', s)
        if words[:1] == ['include']:
            continue
        if words[:1] == ['define'] and len(words) > 1:
            if is_header:
                defined[words[1]] = 'decl'
            words = words[2:]
        used.update(w for w in words if w not in _KEYWORDS)
    tokens = _TOKEN.findall('\n'.join(code))
    used.update(t for t in tokens if _IDENT.match(t) and t not in _KEYWORDS)
    depth, st, enum_at, transparent = 0, [], None, 0
    for t in tokens:
        if depth == 0 and t == '{' and st == ['extern']:
            transparent, st = transparent + 1, []  # extern "C" {
            continue
        if depth == 0 and t == '}' and transparent:
            transparent -= 1
            continue
        if t == '{':
            if depth == 0:
                if 'enum' in st:
                    enum_at = True
                kw = next((k for k in ('struct', 'union', 'enum') if k in st), None)
                if kw and is_header:
                    i = len(st) - 1 - st[::-1].index(kw)
                    if i + 1 < len(st) and _IDENT.match(st[i + 1]):
                        defined[st[i + 1]] = 'decl'
                if '(' in st and '=' not in st and st[-1] == ')':
                    st.append('{')
                    names, _ = _statement_names(st)
                    if names and (is_header or 'static' not in st):
                        defined.update(dict.fromkeys(names, 'code'))
                    st = ['<body>']
            depth += 1
            continue
        if t == '}':
            depth -= 1
            if depth == 0:
                enum_at = None
                if st == ['<body>']:
                    st = []
            continue
        if depth == 1 and enum_at is not None:
            if enum_at is True and _IDENT.match(t) and is_header:
                defined[t] = 'decl'
            enum_at = t == ','
            continue
        if depth > 0:
            continue
        if t == ';':
            names, declared = _statement_names(st + [';'])
            if is_header or 'static' not in st:
                kind = 'decl' if st[0] == 'typedef' else 'code'
                if is_header or kind == 'code':
                    defined.update(dict.fromkeys(names, kind))
            for n in declared:  # a declaration is no use
                used[n] -= 1
            st = []
            continue
        st.append(t)
    return defined, +used


def graph(top, types=False):
    """(arrows, ties) over the tree at top: arrows {unit: units whose code
    (functions, globals) it uses}; ties {unit: {unit: sorted names of it
    that it uses, types and macros too}}."""
    paths = sorted(sources(top))
    unit = units_of(paths)
    defines = collections.defaultdict(dict)
    uses = collections.defaultdict(collections.Counter)
    for p in paths:
        with open(os.path.join(top, p), encoding='utf-8', errors='replace') as fh:
            d, u = scan(fh.read(), p.endswith('.h'))
        defines[unit[p]].update(d)
        uses[unit[p]].update(u)
    owner = {}
    for u, names in defines.items():
        for n, kind in names.items():
            owner[n] = None if n in owner else (u, kind)
    arrows = {u: set() for u in set(unit.values())}
    ties = collections.defaultdict(lambda: collections.defaultdict(list))
    for u, names in uses.items():
        for n in sorted(names):
            v, kind = owner.get(n) or (None, None)
            if v and v != u:
                ties[u][v].append(n)
                if kind == 'code' or types:
                    arrows[u].add(v)
    return arrows, ties


def components(edges):
    """The strongly connected components (Tarjan's), each a sorted tuple."""
    index, low, stack, on, out = {}, {}, [], set(), []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(tuple(sorted(comp)))
    return sorted(out)


def describe(comp, arrows, ties):
    out = []
    for u in comp:
        for v in sorted(arrows[u] & set(comp)):
            ns = ties[u][v]
            more = f', and {len(ns) - 6} more' if len(ns) > 6 else ''
            out.append(f'{u} -> {v} ({", ".join(ns[:6])}{more})')
    return f'circle of {len(comp)}: {", ".join(comp)}: {"; ".join(out)}'


def check(top, known=KNOWN, pairs=False, types=False):
    """Prints each circle of more than 2 units (and each stale entry of
    known); returns 1 when there is one, else 0."""
    arrows, ties = graph(top, types)
    bad, seen = 0, set()
    for comp in components(arrows):
        if len(comp) == 2 and pairs:
            print(describe(comp, arrows, ties))
        if len(comp) <= 2:
            continue
        if comp in known:
            seen.add(comp)
            continue
        print(describe(comp, arrows, ties))
        bad += 1
    for stale in sorted(set(known) - seen):
        print(f'{", ".join(stale)}: named as a known circle but no longer one; '
              'remove it from check_circles.py')
        bad += 1
    return 1 if bad else 0


def _plant(top, files):
    for path, text in files.items():
        os.makedirs(os.path.join(top, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(top, path), 'w') as fh:
            fh.write(text)


def _unit(name, calls, extra=''):
    """x/name.[ch]: name_fn() calling each of calls' functions."""
    inc = ''.join(f'#include "x/{c}.h"\n' for c in calls)
    body = ''.join(f'    {c}_fn();\n' for c in calls)
    return {f'x/{name}.h': f'/* {name}.h */\nvoid {name}_fn(void);\n',
            f'x/{name}.c': f'{inc}{extra}void {name}_fn(void)\n{{\n{body}}}\n'}


def selftest():
    """Plants trees and checks the verdicts. Returns 0 or 1."""
    noise = ('/* c_fn() in a comment */\nstatic const char *s_x = "c_fn";\n'
             'static void c_fn2(void);\n')
    cases = [
        ('a planted circle of 3 fails', 1, {**_unit('a', ['b']), **_unit('b', ['c']),
                                            **_unit('c', ['a'])}),
        ('a mutual pair passes', 0, {**_unit('a', ['b']), **_unit('b', ['a'])}),
        ('types and macros alone make no arrow', 0,
         {**_unit('a', ['b']), **_unit('b', ['c']), **_unit('c', [], 'static a_t s_a;\n'),
          'x/a_impl.h': 'typedef int a_t;\n'}),
        ('a chain passes', 0, {**_unit('a', ['b']), **_unit('b', ['c']), **_unit('c', [])}),
        ('comments, strings and prototypes tie nothing', 0,
         {**_unit('a', ['b']), **_unit('b', ['c']), **_unit('c', [], noise.replace('c_', 'a_')),
          'x/c_impl.h': 'void a_fn(void);\n'}),
        ('a private header joins its unit', 1,
         {**_unit('a', ['b']), **_unit('b', ['c']), **_unit('c', []),
          'x/c_impl.h': 'typedef int c_t;\nstatic inline int c_get(void)\n{\n    a_fn();\n'
                        '    return 0;\n}\n'}),
    ]
    failed = 0
    for name, want, files in cases:
        with tempfile.TemporaryDirectory() as top:
            _plant(top, files)
            got = check(top, known=set())
        print(f'{"ok" if got == want else "FAILED"}: {name}')
        failed += got != want
    with tempfile.TemporaryDirectory() as top:  # a known circle that is gone
        _plant(top, _unit('a', []))
        stale = check(top, known={('x/a.c', 'x/b.c', 'x/c.c')})
    print(f'{"ok" if stale else "FAILED"}: a known circle that is gone fails')
    return 1 if failed or not stale else 0


def main(argv):
    if '--selftest' in argv:
        return selftest()
    top = next((a for a in argv[1:] if not a.startswith('-')), '.')
    return check(top, pairs='--all' in argv, types='--types' in argv)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
