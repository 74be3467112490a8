#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Checks that every repository path a guide names exists (make check runs it on DEVELOPERS.md
and README.md).

Usage: scripts/check-guide.py [REPO [FILE...]]   (default: this checkout, DEVELOPERS.md README.md)

A path is a span in single or double backticks without white space that contains a '/' or ends in
one of EXTENSIONS, and does not start with '/', '~', '$', '.' or '-' (host paths, variables,
section names, options) nor name an oprofilefs or session file (TARGET_PATHS). It passes when a
file or directory of the checkout (git's tracked and untracked, not ignored, files) is that path
or ends with '/' + that path, so a path relative to the folder the text is about
(`bridge/perf.rs`, `abi.sh`) passes too. Globs (`tests/guest/*.sh`) and braces
(`rust/model/{timer,perf}.rs`) must each match at least one; an upper-case word or a
<placeholder> (`tests/checks/NAME.py`, `<ver>`) stands for any name when the path as written
does not exist. A path git ignores (build/, target/, generated files) is an output, not checked.
In a span with white space (a command), each word that starts with a top-level folder of the
checkout is a path.

Prints one line per missing path (FILE:LINE: PATH), then "check-guide: N passed, M failed";
exits 1 if any failed.
"""

import fnmatch
import os
import re
import subprocess
import sys

EXTENSIONS = ('.rs', '.c', '.h', '.py', '.sh', '.rst', '.md', '.toml', '.lds', '.config', '.json',
              '.buf', '.proto', '.patch', '.lock', '.conf', '.txt', '.svg', '.proc_modules',
              '.images', '.kallsyms')
# `code` or ``code``: the longest backtick run opens and closes a span (CommonMark, RST).
SPAN = re.compile(r'(`+)([^`]+?)\1')
FENCE = re.compile(r'^ *```.*?^ *```', re.M | re.S)
PLACEHOLDER = re.compile(r'<[^<>/]*>|\b[A-Z][A-Z0-9_]*[A-Z0-9]\b')
# Paths that are not the repository's: oprofilefs files (/dev/oprofile/...) and the files of an
# oprof record session directory, which the guides name as they are seen on the target.
TARGET_PATHS = re.compile(r'^(stats|kprof|cpu[0-9N]+|[0-9N])/|^(session|stats)\.json$')


def repo_paths(repo):
    """The checkout's files (tracked and untracked, not ignored) and their directories."""
    out = subprocess.run(['git', '-C', repo, 'ls-files', '-z', '--cached', '--others',
                          '--exclude-standard'], capture_output=True, check=True).stdout
    files = {p for p in out.decode().split('\0') if p and os.path.lexists(os.path.join(repo, p))}
    dirs = set()
    for f in files:
        parts = f.split('/')[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add('/'.join(parts[:i]))
    return files | dirs


def ignored(repo, path):
    """True if git ignores PATH (build outputs, generated files)."""
    forms = {path, path.rstrip('/'), path.rstrip('/') + '/'}
    return any(subprocess.run(['git', '-C', repo, 'check-ignore', '-q', '--no-index', f],
                              capture_output=True).returncode == 0 for f in forms)


def braces(path):
    """Expands the first {a,b} of PATH, recursively."""
    m = re.search(r'\{([^{}]*)\}', path)
    if not m:
        return [path]
    return [e for alt in m.group(1).split(',')
            for e in braces(path[:m.start()] + alt + path[m.end():])]


def matches(pattern, paths):
    """True if some path is PATTERN or ends with '/' + PATTERN (glob characters allowed)."""
    pattern = pattern.rstrip('/')
    if not any(c in pattern for c in '*?['):
        return pattern in paths or any(p.endswith('/' + pattern) for p in paths)
    return any(fnmatch.fnmatchcase(p, pattern) or fnmatch.fnmatchcase(p, '*/' + pattern)
               for p in paths)


def looks_like_path(span):
    if not span or any(c.isspace() for c in span) or span[0] in '/~$.-' or '://' in span:
        return False
    if TARGET_PATHS.search(span):
        return False
    return '/' in span or span.endswith(EXTENSIONS)


def candidates(span, tops):
    """The paths a span names: itself, or in a command (a span with white space) each word that
    starts with one of the checkout's top-level folders (`bash tests/run-qemu-tests.sh`)."""
    if looks_like_path(span):
        return [span]
    words = span.split() if any(c.isspace() for c in span) else []
    words = [w.rstrip(',;:)') for w in words]
    return [w for w in words if looks_like_path(w) and w.split('/')[0] in tops and '/' in w]


def exists(span, paths):
    for p in braces(span):
        if matches(p, paths):
            continue
        template = PLACEHOLDER.sub('*', p)
        if template == p or not matches(template, paths):
            return False
    return True


def main(argv):
    repo = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = argv[2:] or ['DEVELOPERS.md', 'README.md']
    paths = repo_paths(repo)
    tops = {p for p in paths if '/' not in p and os.path.isdir(os.path.join(repo, p))}
    passed = failed = 0
    for name in files:
        try:
            with open(os.path.join(repo, name), encoding='utf-8') as f:
                text = f.read()
        except OSError as e:
            print(f'{name}: cannot read: {e.strerror}')
            failed += 1
            continue
        # Fenced code blocks are not spans: blank them, keeping the line numbers.
        text = FENCE.sub(lambda f: re.sub(r'[^\n]', ' ', f.group(0)), text)
        seen = set()
        for m in SPAN.finditer(text):
            for span in candidates(m.group(2).strip(), tops):
                if span in seen:
                    continue
                seen.add(span)
                if exists(span, paths):
                    passed += 1
                elif not ignored(repo, span):
                    line = text.count('\n', 0, m.start()) + 1
                    print(f'{name}:{line}: {span} does not exist')
                    failed += 1
    print(f'check-guide: {passed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
