#!/usr/bin/env python3
"""The source layout's rules (issue: the compiler owns every rewrite):
- every folder of compiler/, dialects/, runtime/ and schema/ has a README.md
  that names each of its files;
- no C++ source file is over 800 lines;
- no function is over 150 lines (a definition starting at column 0 and
  ending at the next column-0 '}');
- compiler/ and dialects/ include no runtime header, and runtime/ names no op
  by a string literal ("dtf.matmul") but through dtf/OpNames.h.
Exceptions are listed below, each with its reason, printed when they apply.

Usage: check_layout.py REPO_ROOT
"""
import os
import re
import sys

TREES = ["compiler", "dialects", "runtime", "schema"]
MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 150
SOURCES = (".cpp", ".h", ".cc", ".c")
# path -> reason: files allowed over MAX_FILE_LINES for now.
LONG_FILES = {}
# "path:function" -> reason: functions allowed over MAX_FUNCTION_LINES.
LONG_FUNCTIONS = {}

NOT_A_FUNCTION = re.compile(
    r"^(#|//|/\*|\*|namespace\b|class\b|struct\b|enum\b|union\b|using\b|"
    r"typedef\b|static_assert\b|extern\b|template\s*<[^>]*>\s*$|}|\s|$)")


def functions(lines):
    """(name, first line, line count) of each column-0 definition."""
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if NOT_A_FUNCTION.match(line) or "(" not in line or line.rstrip().endswith(";"):
            i += 1
            continue
        # The signature may go on; the body opens with '{' at the end of a
        # line before any ';'.
        j = i
        while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j >= len(lines) or "{" not in lines[j] or lines[j].rstrip().endswith("};"):
            i = j + 1
            continue
        k = j
        while k < len(lines) and not (lines[k].startswith("}") and k > j) and not (
                k == j and lines[j].rstrip().endswith("}")):
            k += 1
        name = re.search(r"([~\w:]+)\s*\(", line)
        out.append((name.group(1) if name else line.strip()[:40], i + 1, k - i + 1))
        i = k + 1
    return out


def main(root):
    problems, excused = [], []
    for tree in TREES:
        for folder, dirs, files in os.walk(os.path.join(root, tree)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            rel = os.path.relpath(folder, root)
            listed = [f for f in sorted(files)
                      if f not in ("README.md", "CMakeLists.txt")]
            readme = os.path.join(folder, "README.md")
            if not os.path.exists(readme):
                problems.append(f"{rel}/: no README.md")
            else:
                text = open(readme, encoding="utf-8").read()
                named = set(re.findall(r"([\w.+-]+?)\.(?:h|cpp|cc|c|td|py|sh|md|txt|inc)\b", text))
                for f in listed:
                    # `Foo.h` names Foo.cpp too (a header and its source).
                    if f not in text and f.rsplit(".", 1)[0] not in named:
                        problems.append(f"{rel}/README.md does not name {f}")
            for f in listed:
                if not f.endswith(SOURCES):
                    continue
                path = os.path.join(rel, f)
                lines = open(os.path.join(folder, f), encoding="utf-8",
                             errors="replace").read().split("\n")
                if len(lines) - 1 > MAX_FILE_LINES:
                    if path in LONG_FILES:
                        excused.append(f"{path}: {len(lines) - 1} lines ({LONG_FILES[path]})")
                    else:
                        problems.append(f"{path}: {len(lines) - 1} lines (at most {MAX_FILE_LINES})")
                for name, first, count in functions(lines):
                    if count > MAX_FUNCTION_LINES:
                        key = f"{path}:{name}"
                        if key in LONG_FUNCTIONS:
                            excused.append(f"{key}: {count} lines ({LONG_FUNCTIONS[key]})")
                        else:
                            problems.append(f"{path}:{first}: {name} is {count} lines "
                                            f"(at most {MAX_FUNCTION_LINES})")
                if tree in ("compiler", "dialects"):
                    for n, line in enumerate(lines, 1):
                        m = re.match(r'\s*#include\s+"(runtime/[^"]+)"', line)
                        if m:
                            problems.append(f"{path}:{n}: includes {m.group(1)}; the "
                                            "compiler includes only schema/ of the runtime's side")
                if tree == "runtime":
                    for n, line in enumerate(lines, 1):
                        code = line.split("//", 1)[0]
                        for lit in re.findall(r'"dtf\.[a-z_0-9]+"', code):
                            problems.append(f"{path}:{n}: the op name {lit} as a literal; "
                                            "use dtf/OpNames.h")
    for e in excused:
        print("allowed for now:", e)
    for p in problems:
        print("layout:", p)
    checks = len(problems)
    print(f"{'0 failed' if not checks else str(checks) + ' failed'}: "
          f"{len(excused)} allowed with a reason")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
