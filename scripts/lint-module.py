#!/usr/bin/env python3
"""Static checks of the module's sources (make check's "lint: module" step).

Prints one TAP line per check and a last line "lint-module: N passed, M failed":
  1. `unsafe` appears only in the module's abstraction layers, rust/oprofilefs.rs and rust/bridge
     (rust/bridge.rs, rust/bridge/*.rs); every other module file has none (issue 14).
  2. Every `unsafe` block has a `// SAFETY:` comment right before it (on the lines above the
     statement that contains it, or on the same line), as the kernel's Rust requires.
  3. Every `unsafe fn` has a `# Safety` section in its doc comment.
  4. kernel-doc -none -Wall finds nothing to report in the C shims (rust/*_shim.c), so each shim
     function documents its parameters, return value and missing binding.
Usage: lint-module.py REPO KERNEL_SOURCE
"""
import glob
import os
import re
import subprocess
import sys

repo, ksrc = sys.argv[1], sys.argv[2]
rust = os.path.join(repo, "rust")
results = []


def check(ok, what, details=()):
    results.append(ok)
    print(("ok - " if ok else "not ok - ") + what)
    for d in details:
        print("#   " + d)


def code(line):
    """The line without its // comment (string literals here never contain //)."""
    return line.split("//", 1)[0]


module_files = sorted(
    f for f in glob.glob(os.path.join(rust, "**", "*.rs"), recursive=True)
    if os.path.relpath(f, rust).split(os.sep)[0] != "common")
allowed = lambda rel: rel == "oprofilefs.rs" or rel == "bridge.rs" or rel.startswith("bridge" + os.sep)

outside, no_safety, no_doc = [], [], []
for f in module_files:
    rel = os.path.relpath(f, rust)
    lines = open(f).read().split("\n")
    for i, line in enumerate(lines):
        c = code(line)
        if not re.search(r"\bunsafe\b", c):
            continue
        if not allowed(rel):
            outside.append(f"rust/{rel}:{i + 1}: {line.strip()}")
        if re.search(r"\bunsafe\s*\{", c):
            # Look back over the statement's earlier lines (continuations) for the comment.
            j, found = i, "// SAFETY:" in line
            while not found and j > 0:
                j -= 1
                prev = lines[j].strip()
                if prev.startswith("// SAFETY:"):
                    found = True
                elif prev.startswith("//"):
                    continue
                elif prev == "" or prev.endswith(";") or prev.endswith("}") or prev.endswith("{"):
                    break
            if not found:
                no_safety.append(f"rust/{rel}:{i + 1}: {line.strip()}")
        if re.search(r"\bunsafe\s+(extern\s+\"C\"\s+)?fn\s+\w+", c):
            j, doc = i - 1, []
            while j >= 0 and (lines[j].strip().startswith("///") or lines[j].strip().startswith("#[")):
                doc.append(lines[j])
                j -= 1
            if not any("# Safety" in d for d in doc):
                no_doc.append(f"rust/{rel}:{i + 1}: {line.strip()}")

check(not outside, "unsafe only in rust/oprofilefs.rs and rust/bridge", outside)
check(not no_safety, "every unsafe block has a // SAFETY: comment", no_safety)
check(not no_doc, "every unsafe fn documents # Safety", no_doc)

shims = sorted(glob.glob(os.path.join(rust, "*_shim.c")))
kdoc = os.path.join(ksrc, "scripts", "kernel-doc")
if not os.path.exists(kdoc):
    check(False, f"kernel-doc of the C shims: {kdoc} missing")
else:
    p = subprocess.run([kdoc, "-none", "-Wall"] + shims, capture_output=True, text=True)
    msgs = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
    check(p.returncode == 0 and not msgs and len(shims) >= 4,
          f"kernel-doc -Wall: the {len(shims)} C shims are documented", msgs)

print(f"lint-module: {sum(results)} passed, {len(results) - sum(results)} failed")
sys.exit(0 if all(results) else 1)
