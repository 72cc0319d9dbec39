"""The VS Code extension's files: grammar structure, manifest, language configuration,
snippets, and the .vsix that editor/vscode/package.py builds."""

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile

import pytest

from editor_paths import GRAMMAR, VSCODE, load_json, open_regions_after, tokenize

REPO = load_json(GRAMMAR)["repository"]


def _walk(node):
    """Every rule dict under node (patterns, captures, repository entries)."""
    if isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key in ("patterns",):
                for child in value:
                    yield from _walk(child)
            elif key in ("captures", "beginCaptures", "endCaptures"):
                for child in value.values():
                    yield from _walk(child)
            elif key == "repository":
                for child in value.values():
                    yield from _walk(child)


def test_grammar_header():
    grammar = load_json(GRAMMAR)
    assert grammar["scopeName"] == "source.dtf"
    assert grammar["fileTypes"] == ["dtf"]
    assert grammar["patterns"]


def test_grammar_includes_resolve_and_every_rule_is_used():
    grammar = load_json(GRAMMAR)
    used, todo = set(), [grammar]
    while todo:
        for rule in _walk(todo.pop()):
            inc = rule.get("include")
            if inc is None:
                continue
            assert inc.startswith("#"), f"only local includes are expected: {inc}"
            assert inc[1:] in REPO, f"include {inc} names no repository rule"
            if inc[1:] not in used:
                used.add(inc[1:])
                todo.append(REPO[inc[1:]])
    assert set(REPO) == used, f"unused rules: {sorted(set(REPO) - used)}"


def test_grammar_scope_names_end_in_dtf_and_regexes_compile():
    import onigurumacffi  # the Oniguruma binding the engine uses; VS Code uses Oniguruma too

    grammar = load_json(GRAMMAR)
    rules = [r for top in grammar["patterns"] + list(REPO.values()) for r in _walk(top)]
    count = 0
    for rule in rules:
        for key in ("name", "contentName"):
            for scope in rule.get(key, "").split():
                assert scope.endswith(".dtf"), f"scope {scope} does not end in .dtf"
        for key in ("match", "begin", "end"):
            if key in rule:
                onigurumacffi.compile(rule[key])
                count += 1
    assert count > 60


def _direct_patterns(rule, seen=()):
    """The rules a region tries inside itself, with pattern-only includes flattened."""
    out = []
    for child in rule.get("patterns", []):
        if "include" in child:
            name = child["include"][1:]
            target = REPO[name]
            if "begin" in target or "match" in target:
                out.append(name)
            elif name not in seen:
                out.extend(_direct_patterns(target, seen + (name,)))
        # inline rules are not nested regions in this grammar
    return out


def test_no_region_directly_contains_itself():
    # textmate-grammar-python 0.6.1 skips a character after a region that nests in
    # itself, so `f(g(x))` would leave f open; calls and parentheses alternate instead.
    regions = [name for name, rule in REPO.items() if "begin" in rule]
    assert {"call", "call-alt", "parens", "parens-alt"} <= set(regions)
    for name in regions:
        assert name not in _direct_patterns(REPO[name]), f"{name} nests in itself"


@pytest.mark.parametrize("name", ["call", "parens", "arguments", "expression"])
def test_alt_rules_are_copies(name):
    def normal(node):
        if isinstance(node, dict):
            return {k: (v.replace("-alt", "") if k == "include" else normal(v))
                    for k, v in node.items() if k != "comment"}
        if isinstance(node, list):
            return [normal(v) for v in node]
        return node

    assert normal(REPO[name]) == normal(REPO[name + "-alt"])


def test_package_json():
    pkg = load_json(VSCODE / "package.json")
    assert (pkg["name"], pkg["publisher"], pkg["version"]) == ("dtf", "dtf", "0.1.0")
    assert pkg["engines"] == {"vscode": "^1.75.0"}
    assert "dependencies" not in pkg and "devDependencies" not in pkg and "main" not in pkg
    (lang,) = pkg["contributes"]["languages"]
    assert lang["id"] == "dtf" and lang["extensions"] == [".dtf"]
    (grammar,) = pkg["contributes"]["grammars"]
    assert grammar["language"] == "dtf" and grammar["scopeName"] == "source.dtf"
    (snippets,) = pkg["contributes"]["snippets"]
    assert snippets["language"] == "dtf"
    for rel in (lang["configuration"], grammar["path"], snippets["path"]):
        assert (VSCODE / rel).is_file(), rel


def test_language_configuration():
    conf = load_json(VSCODE / "language-configuration.json")
    assert conf["comments"] == {"lineComment": "//", "blockComment": ["/*", "*/"]}
    assert conf["brackets"] == [["{", "}"], ["[", "]"], ["(", ")"]]
    opens = {p["open"]: p["close"] for p in conf["autoClosingPairs"]}
    assert opens['"'] == '"' and opens["{"] == "}" and opens["("] == ")" and opens["["] == "]"
    assert ['"', '"'] in conf["surroundingPairs"]

    # The regexes are JavaScript; these ones mean the same in Python.
    inc = re.compile(conf["indentationRules"]["increaseIndentPattern"])
    dec = re.compile(conf["indentationRules"]["decreaseIndentPattern"])
    for line in ["model m {", "  graph {", '  on "/job:ps/task:0" {  // ps', "    h = dense(x,",
                 "    y = concat([", "  train {"]:
        assert inc.search(line), f"should indent after {line!r}"
    for line in ["    h = dense(x)", '  on "/job:ps/task:0" { var b: f32[1] }', "  // a { b",
                 "  }", "    x = 1"]:
        assert not inc.search(line), f"should not indent after {line!r}"
    for line in ["}", "  }", "    ], axis = 1)", "  )"]:
        assert dec.search(line), line
    assert not dec.search("  h = f(x)")

    start = re.compile(conf["folding"]["markers"]["start"])
    end = re.compile(conf["folding"]["markers"]["end"])
    assert start.search("model m {") and start.search("  graph { // the graph")
    assert start.search("  // region inputs") and end.search("  // endregion")
    assert not start.search('  on "/gpu:0" { h = relu(x) }')
    assert end.search("  }") and not end.search("  h = 1")


def _expand(body):
    """A snippet body with each placeholder replaced by its default (or first choice)."""
    text = "\n".join(body) if isinstance(body, list) else body
    for _ in range(5):  # placeholders may nest
        text = re.sub(r"\$\{\d+:([^${}]*)\}", r"\1", text)
    text = re.sub(r"\$\{\d+\|([^,|]*)[^|]*\|\}", r"\1", text)
    return re.sub(r"\$\d+", "", text)


def test_snippets():
    snippets = load_json(VSCODE / "snippets" / "dtf.json")
    prefixes = {s["prefix"] for s in snippets.values()}
    assert {"model", "train", "on", "network"} <= prefixes
    for name, snippet in snippets.items():
        text = _expand(snippet["body"])
        assert "$" not in text, f"{name}: placeholder left: {text}"
        for a, b in ("{}", "()", "[]"):
            assert text.count(a) == text.count(b), f"{name}: unbalanced {a}{b}"
        assert open_regions_after(text) == [], f"{name}: leaves a region open"
        bare = [t[2] for t in tokenize(text) if len(t[3]) == 1 and t[2].strip()]
        assert not bare, f"{name}: uncoloured {bare}"


def _package(out):
    return subprocess.run([sys.executable, str(VSCODE / "package.py"), str(out)],
                          capture_output=True, text=True, timeout=60)


EXTENSION_FILES = ["package.json", "README.md", "language-configuration.json",
                   "syntaxes/dtf.tmLanguage.json", "snippets/dtf.json"]


def test_vsix(tmp_path):
    out = tmp_path / "dtf-0.1.0.vsix"
    run = _package(out)
    assert run.returncode == 0, run.stderr
    with zipfile.ZipFile(out) as zf:
        assert zf.testzip() is None
        names = set(zf.namelist())
        expected = {"[Content_Types].xml", "extension.vsixmanifest"} | {
            "extension/" + f for f in EXTENSION_FILES}
        assert names == expected
        for rel in EXTENSION_FILES:
            data = zf.read("extension/" + rel)
            assert data == (VSCODE / rel).read_bytes(), rel
            if rel.endswith(".json"):
                json.loads(data)
        pkg = json.loads(zf.read("extension/package.json"))
        assert json.loads(zf.read("extension/syntaxes/dtf.tmLanguage.json"))["scopeName"] == \
            "source.dtf"

        ns = {"v": "http://schemas.microsoft.com/developer/vsx-schema/2011"}
        manifest = ET.fromstring(zf.read("extension.vsixmanifest"))
        ident = manifest.find("v:Metadata/v:Identity", ns)
        assert (ident.get("Id"), ident.get("Publisher"), ident.get("Version")) == (
            pkg["name"], pkg["publisher"], pkg["version"])
        engine = manifest.find(
            "v:Metadata/v:Properties/v:Property[@Id='Microsoft.VisualStudio.Code.Engine']", ns)
        assert engine.get("Value") == "^1.75.0"
        assets = {a.get("Type"): a.get("Path") for a in manifest.findall("v:Assets/v:Asset", ns)}
        assert assets["Microsoft.VisualStudio.Code.Manifest"] == "extension/package.json"
        assert all(p in names for p in assets.values())
        target = manifest.find("v:Installation/v:InstallationTarget", ns)
        assert target.get("Id") == "Microsoft.VisualStudio.Code"

        types = ET.fromstring(zf.read("[Content_Types].xml"))
        defaults = {d.get("Extension") for d in types}
        assert {".json", ".md", ".vsixmanifest"} <= defaults

    again = tmp_path / "again.vsix"
    assert _package(again).returncode == 0
    assert again.read_bytes() == out.read_bytes(), "packaging is not reproducible"


def test_package_script_usage():
    run = subprocess.run([sys.executable, str(VSCODE / "package.py")],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "usage" in run.stderr
