#!/usr/bin/env python3
"""Writes a copy of a model of models/ with its whole graph in
`on "/gpu:0" { ... }`, for the GPU tests.

usage: gpu_model.py SRC OUT STEPS [SESSION [UPDATE]]
  STEPS    the train block's step count (and its eval period)
  SESSION  the arguments of `session = session(...)`, or "" for none
  UPDATE   replaces the model's `update = ...` (sync or async)"""
import re
import sys

src, out, steps = sys.argv[1], sys.argv[2], sys.argv[3]
session = sys.argv[4] if len(sys.argv) > 4 else ""
update = sys.argv[5] if len(sys.argv) > 5 else ""
text = open(src).read()
start = text.index("  graph {\n") + len("  graph {\n")
end = text.index("\n  }\n", start)
body = "\n".join("  " + l if l else l for l in text[start:end].split("\n"))
text = text[:start] + '    on "/gpu:0" {\n' + body + "\n    }" + text[end:]
text = re.sub(r"steps\s*=\s*\d+", "steps = " + steps, text)
text = re.sub(r"every = \d+", "every = " + steps, text)
if update:
    text = re.sub(r"update = (sync\([^)]*\)|async)", "update = " + update, text)
if session:
    text = text.replace("  train {\n", "  train {\n    session = session(%s)\n" % session, 1)
open(out, "w").write(text)
