#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks that the host crate's imports run one way between its folders (make check runs it).

Usage: scripts/check-layers.py [REPO]   (default: this checkout)

Every `crate::X` path in a .rs file under crates/oprof/src (in `use` lines, `use crate::{X, ..}`
groups and paths in code; comments and string literals are skipped) is an edge from the file's
layer to X's layer. A file's layer is its first folder or file name below src/ (`aggregate.rs`
and `aggregate/` are both `aggregate`). The order, from the top (the command line) down to the
stream (below it only `oprofile_common`, the crate shared with the module):

    layer      may use                                  what it is
    cli        view aggregate resolve input target      one module per subcommand
    view       aggregate resolve input                  the printers (report, flame, pprof, ...)
    aggregate  resolve input                            counts samples; the load pipeline
    resolve    input                                    names the words (ELF, symbols, unwinding)
    input      -                                        stream, session files, validation
    target     resolve input                            the board side (record, legacy, system);
                                                        a peer nothing but cli may use

`fixtures.rs` (test streams) is in the input layer. Test code is checked too, but may use any
layer: `src/tests/`, and the `#[cfg(test)]` modules of other files (inline or `mod x;` files),
since an end-to-end test drives the whole flow. `lib.rs` and `main.rs` declare the layers.

Prints one line per wrong-way import (FILE:LINE: LAYER -> LAYER (use ...)), then
"check-layers: N passed, M failed" (N files without a wrong-way import, M with one); exits 1 if
any failed.
"""

import os
import re
import sys

SRC = 'crates/oprof/src'
MAY_USE = {
    'cli': {'view', 'aggregate', 'resolve', 'input', 'target'},
    'view': {'aggregate', 'resolve', 'input'},
    'aggregate': {'resolve', 'input'},
    'resolve': {'input'},
    'input': set(),
    'target': {'resolve', 'input'},
}
# Modules of src/ whose layer is not their name.
LAYER_OF = {'fixtures': 'input'}
ROOTS = {'lib', 'main'}  # declare the layers: may use any
TEST = 'tests'           # src/tests/: test code

# Comments, string and char literals (kept: line breaks, so line numbers hold). Lifetimes ('a)
# are not char literals: a char literal closes after one (escaped) character.
TOKENS = re.compile(r'''//[^\n]*|/\*.*?\*/|b?r(\#*)".*?"\1|b?"(?:\\.|[^"\\])*"'''
                    r'''|b?'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^'\\\n])'|[{}]|\bcrate\s*::\s*\{?''',
                    re.S)
CFG_TEST = re.compile(r'#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])')
NAME = re.compile(r'\s*(\w+)')


def layer_of_module(name):
    if name in ROOTS:
        return 'root'
    return LAYER_OF.get(name, name)


def layer_of_file(rel):
    first = rel.split('/')[0]
    return layer_of_module(first[:-3] if first.endswith('.rs') else first)


def blank(text):
    """TEXT with comments and literals replaced by spaces (line breaks kept)."""
    def sub(m):
        s = m.group(0)
        if s.startswith(('/', '"', 'r', 'b', "'")) and not s.startswith('crate'):
            return re.sub(r'[^\n]', ' ', s)
        return s
    return TOKENS.sub(sub, text)


def group_names(code, start):
    """The first names of a `crate::{a::b, c, ..}` group that opens at CODE[start]."""
    depth, names, i, expect = 1, [], start, True
    while i < len(code) and depth:
        c = code[i]
        if c == '{':
            depth += 1
        elif c == '}':
            depth -= 1
        elif c == ',' and depth == 1:
            expect = True
        elif expect and depth == 1 and not c.isspace():
            m = NAME.match(code, i)
            if m:
                names.append(m.group(1))
                i = m.end()
            expect = False
            continue
        i += 1
    return names


def test_spans(code):
    """(start, end) offsets of the inline #[cfg(test)] modules, and the names of `mod x;` ones."""
    spans, files = [], set()
    for m in CFG_TEST.finditer(code):
        if m.group(2) == ';':
            files.add(m.group(1))
            continue
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {'{': 1, '}': -1}.get(code[i], 0)
            i += 1
        spans.append((m.start(), i))
    return spans, files


def edges(code):
    """(offset, module, text) of every crate:: path in CODE."""
    for m in re.finditer(r'\bcrate\s*::\s*(\{)?', code):
        if m.group(1):
            for name in group_names(code, m.end()):
                yield m.start(), name, 'crate::{%s..}' % name
        else:
            n = NAME.match(code, m.end())
            if n:
                path = re.match(r'crate\s*::[\w:]*', code[m.start():]).group(0)
                yield m.start(), n.group(1), path.rstrip(':')


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    src = os.path.join(repo, SRC)
    files = sorted(os.path.relpath(os.path.join(d, f), src)
                   for d, _, fs in os.walk(src) for f in fs if f.endswith('.rs'))
    if not files:
        print('%s: no .rs files' % src)
        print('check-layers: 0 passed, 1 failed')
        return 1
    codes = {rel: blank(open(os.path.join(src, rel), encoding='utf-8').read()) for rel in files}
    test_files = set()
    for rel, code in codes.items():
        _, names = test_spans(code)
        stem = rel[:-3]
        base = os.path.dirname(rel) if os.path.basename(stem) in ('mod', 'lib') else stem
        test_files |= {os.path.normpath(os.path.join(base, n + '.rs')) for n in names}
        test_files |= {os.path.normpath(os.path.join(base, n, 'mod.rs')) for n in names}
    passed = failed = 0
    for rel in files:
        code, layer = codes[rel], layer_of_file(rel)
        spans, _ = test_spans(code)
        bad = []
        for off, module, text in edges(code):
            to = layer_of_module(module)
            if to not in MAY_USE and to != TEST:
                continue  # not a layer (a name of lib.rs, or a macro)
            in_test = layer == TEST or rel in test_files or any(a <= off < b for a, b in spans)
            if to == layer or layer == 'root' or in_test:
                continue
            if to == TEST or to not in MAY_USE.get(layer, set()):
                line = code.count('\n', 0, off) + 1
                bad.append('%s/%s:%d: %s -> %s (use %s)' % (SRC, rel, line, layer, to, text))
        for b in bad:
            print(b)
        if bad:
            failed += 1
        else:
            passed += 1
    print('check-layers: %d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
