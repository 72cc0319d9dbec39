"""Where the editor files live, and a TextMate tokenizer over the dtf grammar."""

import json
import logging
import os
import re
import tempfile
from functools import lru_cache
from pathlib import Path

ROOT = Path(os.environ.get("DTF_SOURCE_DIR", Path(__file__).resolve().parents[2]))
VSCODE = ROOT / "editor" / "vscode"
VIM = ROOT / "editor" / "vim"
GRAMMAR = VSCODE / "syntaxes" / "dtf.tmLanguage.json"
SAMPLES = Path(__file__).resolve().parent / "samples"

MARK = re.compile("«(.*?)»", re.S)


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=None)
def _parser():
    # textmate_grammar makes a .textmate_cache folder in the working directory when it is
    # imported; keep that out of the source tree.
    cwd = os.getcwd()
    os.chdir(tempfile.gettempdir())
    try:
        from textmate_grammar.parsers.base import LanguageParser
    finally:
        os.chdir(cwd)
    logging.getLogger("textmate_grammar").setLevel(logging.ERROR)
    return LanguageParser(load_json(GRAMMAR))


def tokenize(text):
    """[(line, col, text, scopes)] for text; scopes start with source.dtf."""
    element = _parser().parse_string(text)
    if element is None:
        return []
    return [(line, col, tok, list(scopes)) for (line, col), tok, scopes in element.flatten()]


def unmark(marked):
    """Strips the «» markers; returns (text, [(line, col, marked_text)]), 0-based."""
    spans, pos = [], 0
    text_so_far = ""
    for m in MARK.finditer(marked):
        text_so_far += marked[pos:m.start()]
        line = text_so_far.count("\n")
        col = len(text_so_far) - (text_so_far.rfind("\n") + 1)
        spans.append((line, col, m.group(1)))
        text_so_far += m.group(1)
        pos = m.end()
    text_so_far += marked[pos:]
    return text_so_far, spans


def open_regions_after(text):
    """The scopes still open after text: [] when every call, string, shape and comment
    in it is closed. (A name on a line of its own after the text shows them.)"""
    tokens = [t for t in tokenize(text.rstrip("\n") + "\nend_marker\n") if t[2].strip()]
    assert tokens[-1][2] == "end_marker", tokens[-1]
    scopes = tokens[-1][3][1:]
    return scopes[:-1] if scopes and scopes[-1] == "variable.other.dtf" else scopes
