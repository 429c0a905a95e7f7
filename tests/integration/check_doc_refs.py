#!/usr/bin/env python3
"""The docs name only what the tree has. In backticks in README.md, docs/*.md
and docs/design/*.md:

- a repository path (`dir/file.ext`, `server/rows.[ch]`, `worker/models/`)
  must exist, from the root or as the tail of a path in the tree (a table of
  kernels/ may say `cpu/table.c`), or be made from its `.in` template; a bare source file name (`members.c`) must
  name a file somewhere in the tree;
- `file.c:name` must be defined in that file (a column-0 definition, a
  #define, or a struct member of it or of its header);
- a file-static `s_name`, or a public `ps_name`, must be defined somewhere in
  the tree;
- a relative link must name a file that exists, and its #anchor a heading
  of that page.

Placeholders (`DIR/step-N/...`, `OUT/NAME.md`) and generated paths (`.gpu/`,
build directories) are not paths of the tree. The design pages are short:
each page under docs/design/ at most 400 lines, docs/design.md at most 150.

usage: check_doc_refs.py [REPO]   (exit 1 naming each bad reference)
"""
import os
import re
import sys

MAX_PAGE, MAX_MAP = 400, 150
SRC_EXTS = ('.c', '.h', '.cu')
# Extensions that make a slash-free or unrooted token a file reference.
FILE_EXTS = SRC_EXTS + ('.sh', '.py', '.proto', '.md', '.build', '.sbatch',
                        '.yaml', '.txt', '.in')
SKIP_DIRS = ('.git', '.gpu', 'bench-out', 'subprojects')


def tree_files(top):
    for d, dirs, files in os.walk(top):
        rel = os.path.relpath(d, top)
        first = rel.split(os.sep)[0]
        if first in SKIP_DIRS or first.startswith('build'):
            dirs[:] = []
            continue
        for f in files:
            yield os.path.normpath(os.path.join(rel, f))


def doc_pages(top):
    pages = ['README.md']
    for sub in ('docs', os.path.join('docs', 'design')):
        d = os.path.join(top, sub)
        if os.path.isdir(d):
            pages += sorted(os.path.join(sub, f) for f in os.listdir(d) if f.endswith('.md'))
    return [p for p in pages if os.path.isfile(os.path.join(top, p))]


def expand(token):
    """`x.[ch]` -> x.c, x.h; anything else as it is."""
    m = re.match(r'^(.*)\.\[([a-z]+)\]$', token)
    return [f'{m.group(1)}.{c}' for c in m.group(2)] if m else [token]


class Tree:
    def __init__(self, top):
        self.top = top
        self.files = set(tree_files(top))
        self.dirs = {os.path.dirname(f) for f in self.files}
        for d in list(self.dirs):
            while d:
                d = os.path.dirname(d)
                self.dirs.add(d)
        self.tops = {f.split(os.sep)[0] for f in self.files}
        self.texts = {}

    def find(self, path):
        """The tree's files that `path` names: itself or a path ending in it."""
        path = path.rstrip('/')
        if path in self.files or path in self.dirs:
            return [path]
        if path + '.in' in self.files:
            return [path + '.in']   # made at build time from its template
        tail = '/' + path
        hits = [f for f in self.files if f.endswith(tail)]
        return hits or [d for d in self.dirs if d.endswith(tail)]

    def text(self, f):
        if f not in self.texts:
            with open(os.path.join(self.top, f), encoding='utf-8', errors='replace') as fh:
                self.texts[f] = fh.read()
        return self.texts[f]

    def defines(self, f, name):
        """Whether file f (or its header) defines name."""
        n = re.escape(name)
        top_level = re.compile(r'^(?:#\s*define\s+' + n + r'\b|[A-Za-z_}].*\b' + n +
                               r'\s*(?:\(|\[|=|;|,|\)\s*\())', re.M)
        member = re.compile(r'^\s+[A-Za-z_][\w\s\*]*\b' + n + r'\s*(?:\[[^\]]*\])?\s*[;:,]', re.M)
        names = [f]
        if f.endswith('.c'):
            names.append(f[:-2] + '.h')
        for g in names:
            if g in self.files and name in self.text(g) and (top_level.search(self.text(g)) or member.search(self.text(g))):
                return True
        return False

    def defined_anywhere(self, name):
        return any(self.defines(f, name) for f in self.files if f.endswith(SRC_EXTS))


def is_path(token, tree):
    if '/' not in token or token.startswith(('/', 'http', '$', '~', '..')):
        return False
    first = token.split('/')[0]
    if first.startswith('.') and first not in tree.tops:
        return False   # generated (.gpu/)
    if re.search(r'[A-Z]{2,}', first) or re.search(r'[*<>{} ]|\bN\b|-N\b|-R\b', token):
        return False   # a placeholder (DIR/..., OUT/NAME.md, step-N)
    if first in tree.tops:
        return True
    if first.startswith('.'):
        return False
    return os.path.splitext(token.rstrip(']'))[1] in FILE_EXTS or token.endswith('.[ch]')


def check_span(span, tree):
    """The bad references in one backtick span, as strings."""
    bad = []
    if '$' in span:
        return bad   # a command line with its substitutions
    for token in re.findall(r'[\w./\[\]:-]+', span):
        token = token.rstrip('.,:;')
        m = re.match(r'^([\w./-]+\.(?:c|h|cu)):(\w+)(?:\(.*)?$', token)
        if m:
            hits = [f for p in expand(m.group(1)) for f in tree.find(p)]
            if not hits:
                bad.append(f'{m.group(1)} (no such file)')
            elif not any(tree.defines(f, m.group(2)) for f in hits):
                bad.append(f'{m.group(1)}:{m.group(2)} (not defined there)')
            continue
        if is_path(token, tree):
            for p in expand(token):
                if not tree.find(p):
                    bad.append(f'{p} (no such path)')
            continue
        if re.match(r'^[\w-]+\.(?:c|h|cu)$', token) and not tree.find(token):
            bad.append(f'{token} (no such file)')
            continue
        if re.match(r'^(?:s|ps)_[a-z0-9_]*[a-z0-9]$', token) and not tree.defined_anywhere(token):
            bad.append(f'{token} (defined nowhere)')
    return bad


def slug(heading):
    """A heading's anchor as GitHub makes it."""
    h = re.sub(r'[^\w\- ]', '', heading.strip().lower())
    return h.replace(' ', '-')


def anchors(path):
    with open(path, encoding='utf-8') as fh:
        return {slug(m.group(1)) for m in re.finditer(r'^#+ (.*)$', fh.read(), re.M)}


def check_links(page, text, top):
    """The bad relative links of a page: a missing file, or a missing anchor."""
    bad = []
    for m in re.finditer(r'\]\(([^)\s]+)\)', text):
        target = m.group(1)
        if re.match(r'^[a-z]+:', target):
            continue
        where = text.count('\n', 0, m.start()) + 1
        path, _, anchor = target.partition('#')
        full = os.path.normpath(os.path.join(top, os.path.dirname(page), path)) if path \
            else os.path.join(top, page)
        if not os.path.exists(full):
            bad.append(f'{page}:{where}: {target} (no such file)')
        elif anchor and full.endswith('.md') and anchor not in anchors(full):
            bad.append(f'{page}:{where}: {target} (no such heading)')
    return bad


def main(argv):
    top = argv[1] if len(argv) > 1 else '.'
    tree = Tree(top)
    problems = []
    for page in doc_pages(top):
        with open(os.path.join(top, page), encoding='utf-8') as fh:
            lines = fh.read().split('\n')
        n = len(lines) - (lines[-1] == '')
        if page == os.path.join('docs', 'design.md') and n > MAX_MAP:
            problems.append(f'{page}: {n} lines (at most {MAX_MAP})')
        elif os.path.dirname(page) == os.path.join('docs', 'design') and n > MAX_PAGE:
            problems.append(f'{page}: {n} lines (at most {MAX_PAGE})')
        in_fence = False
        for i, line in enumerate(lines):
            if line.lstrip().startswith('```'):
                in_fence = not in_fence
                lines[i] = ''
            elif in_fence:
                lines[i] = ''
        text = '\n'.join(lines)
        problems += check_links(page, text, top)
        for m in re.finditer(r'`([^`]+)`', text):
            where = text.count('\n', 0, m.start()) + 1
            for b in check_span(m.group(1), tree):
                problems.append(f'{page}:{where}: {b}')
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
