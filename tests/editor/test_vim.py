"""The Vim files (editor/vim), run in Vim and in Neovim where they are installed:
syntax groups at marked places, indentation of a flattened file with gg=G, filetype
detection, the ftplugin's comment settings and syntax folding."""

import json
import re
import shutil
import subprocess

import pytest

from editor_paths import SAMPLES, VIM, GRAMMAR, load_json, unmark

EDITORS = {
    "vim": ["vim", "-N", "-u", "NONE", "-i", "NONE", "-es"],
    "nvim": ["nvim", "--clean", "-u", "NONE", "-i", "NONE", "-es"],
}

# Marked span -> the syntax group Vim reports at its first and last character
# ("" for plain text).
CASES = [
    ("«model» mnist_cnn {", "dtfKeyword"),
    ("model «mnist_cnn» {", "dtfModelName"),
    ("  «input» x: f32[B, 784]", "dtfKeyword"),
    ("  input «x»: f32[B, 784]", "dtfInputName"),
    ("  input x: «f32»[B, 784]", "dtfType"),
    ("  input x: f32[«B», 784]", "dtfBatch"),
    ("  input x: f32[B, «784»]", "dtfDim"),
    ("  input ids: i64[B, «seq»]", "dtfDimName"),
    ("  var «W1»: f32[784, 500] = truncated_normal(stddev = 0.1)", "dtfVarName"),
    ("  var W1: f32[784, 500] = «truncated_normal»(stddev = 0.1)", "dtfBuiltin"),
    ("  var W1: f32[784, 500] = truncated_normal(«stddev» = 0.1)", "dtfKwarg"),
    ("  var W1: f32[784, 500] = truncated_normal(stddev = «0.1»)", "dtfFloat"),
    ("  var b: f32[1] = zeros, «trainable» = false", "dtfTrailingKwarg"),
    ("  var b: f32[1] = «zeros», trainable = false", "dtfBuiltin"),
    ("  var b: f32[1] = zeros, trainable = «false»", "dtfBoolean"),
    ("  «placement» replicate(ps = round_robin)", "dtfKeyword"),
    ("  placement «replicate»(ps = round_robin)", "dtfBuiltin"),
    ("  placement replicate(ps = «round_robin»)", "dtfConstant"),
    ("  placement «replicate»", "dtfPlacementStrategy"),
    ("  placement replicate(ps = «greedy»)", "dtfConstant"),
    ("    precision = «mixed_bfloat16»", "dtfConstant"),
    ("    precision = «mixed_float16»", "dtfConstant"),
    ("    loss_scale = «dynamic»(initial_scale = 1024)", "dtfBuiltin"),
    ("    loss_scale = «dynamic»", "dtfBuiltin"),
    ("    precision = «float32»", "dtfConstant"),
    ("  «placement» = 3", ""),
    ('  «on» "/job:ps/task:0" {', "dtfKeyword"),
    ('  on «"»/job:ps/task:0" {', "dtfOnDevice"),
    ('  on "/«job»:ps/task:0" {', "dtfDeviceKey"),
    ('  on "/job:«ps»/task:0" {', "dtfDeviceValue"),
    ('  on "/job:ps«/»task:0" {', "dtfDeviceSep"),
    ('  on "«somewhere»" {', "dtfOnDevice"),
    ('    s = session(device = «"»/gpu:0")', "dtfDeviceString"),
    ('    d = «"»/device:GPU:0"', "dtfDeviceString"),
    ('    d = "/«device»:GPU:0"', "dtfDeviceKey"),
    ('    d = "/device:«GPU»:0"', "dtfDeviceValue"),
    ('    d = idx(«"/usr/share/x"», split = "train")', "dtfString"),
    ('    s = "a «//» b"', "dtfString"),
    ('    s = "a«\\"»b"', "dtfEscape"),
    ("    h = relu(x) «// after code»", "dtfLineComment"),
    ("    h = «relu»(x) // after code", "dtfBuiltin"),
    ("    x = «/* inline */» 5", "dtfBlockComment"),
    ("    x = /* inline */ «5»", "dtfNumber"),
    ("    lr = «1e-4»", "dtfFloat"),
    ("    big = «1.5E+3»", "dtfFloat"),
    ("    half = «.5»", "dtfFloat"),
    ("    n = «42»", "dtfNumber"),
    ("    «x1» = y2", ""),
    ("    y = a «@» W", "dtfOperator"),
    ("    y = a «<=» b", "dtfOperator"),
    ("    y = a «/» b", "dtfOperator"),
    ("    h = «dense»(x, units = 10) as d1", "dtfBuiltin"),
    ("    h = dense(«x», units = 10) as d1", ""),
    ("    h = dense(x, «units» = 10) as d1", "dtfKwarg"),
    ("    h = dense(x, units = 10) «as» d1", "dtfKeyword"),
    ("    h = dense(x, units = 10) as «d1»", "dtfLayerName"),
    ("    h = «my_dense»(x)", "dtfCall"),
    ("    h = «tower»(x) shares left", "dtfCall"),
    ("    h = tower(x) «shares» left", "dtfKeyword"),
    ("    h = tower(x) shares «left»", "dtfLayerName"),
    ("    h = dense(h, activation = «relu»)", "dtfBuiltin"),
    ("    h = conv2d(h, padding = «same»)", "dtfConstant"),
    ("    «return» h", "dtfStatement"),
    ("  «train» {", "dtfKeyword"),
    ('    data = idx("p", split = «train»)', "dtfKeyword"),
    ("    «checkpoint» every 600 s keep 5", "dtfPolicy"),
    ("    checkpoint «every» 600 s keep 5", "dtfEvery"),
    ("    checkpoint every «600» s keep 5", "dtfPolicyCount"),
    ("    checkpoint every 600 «s» keep 5", "dtfUnit"),
    ("    checkpoint every 600 s «keep» 5", "dtfKeep"),
    ("    checkpoint every 600 s keep «5»", "dtfNumber"),
    ("    «summary» every 100 steps [loss, accuracy]", "dtfPolicy"),
    ("    summary every 100 «steps» [loss, accuracy]", "dtfUnit"),
    ('    eval = idx("p"), «every» = 1000', "dtfTrailingKwarg"),
    ("    «checkpoint» = 5", ""),
    ("    x = «keep» + 1", ""),
    ('    optimizer «for» wide, "cross_*" = ftrl(0.2)', "dtfKeyword"),
    ("    optimizer for wide = «ftrl»(0.2)", "dtfBuiltin"),
    ("    x = «for» + 1", ""),
    ("«network» tower(x, units = 10) {", "dtfKeyword"),
    ("network «tower»(x, units = 10) {", "dtfNetworkName"),
    ("    y = cast(x, to = «f32»)", "dtfType"),
    ("    s = sum(x, axis = «none»)", "dtfNone"),
    ("    b = «true»", "dtfBoolean"),
]

VIM_SCRIPT = r"""
set nomore
let s:out = {'errors': []}
try
  let &runtimepath = {rtp} . ',' . &runtimepath
  " Neovim starts with filetype detection on; off and on again reads ftdetect/ anew.
  silent! filetype off
  let v:errmsg = ''
  filetype plugin indent on
  syntax on
  set shiftwidth=2 expandtab

  execute 'edit ' . fnameescape({cases})
  let s:out.filetype = &filetype
  let s:out.syntax = get(b:, 'current_syntax', '')
  let s:out.commentstring = &commentstring
  let s:out.comments = &comments
  let s:out.indentexpr = &indentexpr
  let s:out.names = []
  for [s:l, s:c] in json_decode(join(readfile({positions}), ''))
    call add(s:out.names, synIDattr(synID(s:l, s:c, 1), 'name'))
  endfor

  execute 'edit ' . fnameescape({model})
  setlocal foldmethod=syntax
  let s:out.foldlevels = map(range(1, line('$')), 'foldlevel(v:val)')

  execute 'edit ' . fnameescape({flat})
  normal! gg=G
  let s:out.indented = getline(1, '$')
catch
  call add(s:out.errors, v:exception . ' at ' . v:throwpoint)
endtry
if v:errmsg !=# ''
  call add(s:out.errors, v:errmsg)
endif
call writefile([json_encode(s:out)], {result})
qa!
"""


def _vimstr(path):
    return "'" + str(path).replace("'", "''") + "'"


@pytest.fixture(scope="module", params=sorted(EDITORS))
def vim_run(request, tmp_path_factory):
    name = request.param
    if shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (apt-get install vim-nox / neovim to run this)")
    tmp = tmp_path_factory.mktemp(name)
    lines, positions = [], []
    for i, (marked, _) in enumerate(CASES):
        text, [(_, col, span)] = unmark(marked)
        lines.append(text)
        positions.append([i + 1, col + 1])
        positions.append([i + 1, col + len(span)])
    (tmp / "cases.dtf").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp / "positions.json").write_text(json.dumps(positions), encoding="utf-8")
    indent = (SAMPLES / "indent.dtf").read_text(encoding="utf-8")
    flat = "\n".join(l.lstrip() for l in indent.splitlines()) + "\n"
    (tmp / "flat.dtf").write_text(flat, encoding="utf-8")
    script = VIM_SCRIPT
    for key, path in {"rtp": VIM, "cases": tmp / "cases.dtf", "positions": tmp / "positions.json",
                      "model": SAMPLES / "mnist_cnn.dtf", "flat": tmp / "flat.dtf",
                      "result": tmp / "result.json"}.items():
        script = script.replace("{" + key + "}", _vimstr(path))
    (tmp / "check.vim").write_text(script, encoding="utf-8")
    run = subprocess.run(EDITORS[name] + ["-S", str(tmp / "check.vim")], capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    result = tmp / "result.json"
    assert result.exists(), f"{name} wrote no result (rc {run.returncode}): {run.stderr}"
    out = json.loads(result.read_text(encoding="utf-8"))
    out["expected_indent"] = indent.splitlines()
    return out


def test_loads_without_errors(vim_run):
    assert vim_run["errors"] == []


def test_filetype_and_ftplugin(vim_run):
    assert vim_run["filetype"] == "dtf" and vim_run["syntax"] == "dtf"
    assert vim_run["commentstring"] == "// %s"
    assert vim_run["comments"] == "s1:/*,mb:*,ex:*/,://"
    assert vim_run["indentexpr"] == "GetDtfIndent(v:lnum)"


def test_syntax_groups(vim_run):
    names = vim_run["names"]
    assert len(names) == 2 * len(CASES)
    wrong = []
    for i, (marked, group) in enumerate(CASES):
        got = (names[2 * i], names[2 * i + 1])
        if got != (group, group):
            wrong.append(f"{marked!r}: expected {group or 'plain'}, got {got}")
    assert not wrong, "\n".join(wrong)


def test_indent(vim_run):
    assert vim_run["indented"] == vim_run["expected_indent"]


def test_syntax_folding(vim_run):
    model = (SAMPLES / "mnist_cnn.dtf").read_text(encoding="utf-8").splitlines()
    levels = vim_run["foldlevels"]
    graph_body = model.index("    h = reshape(x, [-1, 28, 28, 1])")
    assert levels[model.index("model mnist_cnn {")] == 1
    assert levels[graph_body] == 2
    assert levels[model.index("    /* two towers that share")] == 3  # the comment folds too
    assert levels[0] == 0


def test_builtins_match_the_textmate_grammar():
    """Both editors colour the same builtin names."""
    patterns = load_json(GRAMMAR)["repository"]["builtin-function-names"]["patterns"]
    textmate = set()
    for p in patterns:
        textmate |= set(re.fullmatch(r"\\b\(\?:(.*)\)\\b", p["match"]).group(1).split("|"))
    syntax = (VIM / "syntax" / "dtf.vim").read_text(encoding="utf-8")
    lists = re.findall(r'syn match dtfBuiltin\s+"[^"]*?\\<\\%\(([^)]*)\\\)\\>', syntax)
    assert len(lists) == 2
    for found in lists:
        assert set(found.split("\\|")) == textmate
