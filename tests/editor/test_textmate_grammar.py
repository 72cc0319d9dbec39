"""The VS Code TextMate grammar, run by a TextMate engine (textmate-grammar-python).

Each case is a bit of dtf text with one span marked «like this» and the scope the
marked token must carry. Unless a case says parts=True, the span must be exactly one
token (so `1e-4` is one number, not `1e`, `-`, `4`); with parts=True every token
overlapping the span must carry the scope. `absent` lists scope prefixes no token
of the span may carry.
"""

import re

import pytest

from editor_paths import GRAMMAR, SAMPLES, load_json, open_regions_after, tokenize, unmark


class Case:
    def __init__(self, marked, scope, parts=False, absent=()):
        self.marked, self.scope, self.parts, self.absent = marked, scope, parts, tuple(absent)

    def __repr__(self):
        return self.marked.replace("«", "[").replace("»", "]").replace("\n", "\\n").strip()


CASES = [
    # Keywords and the names they introduce.
    Case("«model» mnist {", "keyword.other.model.dtf"),
    Case("model «mnist_cnn» {", "entity.name.type.model.dtf"),
    Case("  «input» x: f32[B]", "keyword.other.input.dtf"),
    Case("  input «x»: f32[B, 784]", "entity.name.variable.input.dtf"),
    Case("  «var» W: f32[1] = zeros", "keyword.other.var.dtf"),
    Case("  var «W1»: f32[784, 500]", "entity.name.variable.var.dtf"),
    Case("  «graph» {", "keyword.other.graph.dtf"),
    Case("  «train» {", "keyword.other.train.dtf"),
    Case('  «on» "/job:ps/task:0" {', "keyword.other.on.dtf"),
    Case("«network» tower(x) {", "keyword.other.network.dtf"),
    Case("network «tower»(x, units = 10) {", "entity.name.function.network.dtf"),
    Case("network tower(«x», units = 10) {", "variable.parameter.dtf"),
    Case("network tower(x, «units» = 10) {", "variable.parameter.dtf"),
    Case("network tower(x, activation = «relu») {", "support.function.builtin.op.dtf"),
    Case("  «return» h", "keyword.control.return.dtf"),
    Case("  «placement» replicate(ps = round_robin)", "keyword.other.placement.dtf"),
    Case("  placement «replicate»", "support.constant.placement.dtf"),
    Case("  placement replicate(ps = «greedy»)", "support.constant.dtf"),
    Case("  «placement» = 3", "variable.other.assignment.dtf", absent=["keyword"]),
    Case("    h = conv2d(h, filters = 32) «as» conv1", "keyword.other.as.dtf"),
    Case("    h = conv2d(h, filters = 32) as «conv1»", "entity.name.variable.layer.dtf"),
    Case("    r = tower(x2) «shares» left", "keyword.other.shares.dtf"),
    Case("    r = tower(x2) shares «left»", "entity.name.variable.layer.dtf"),
    Case("    h = max_pool(conv2d(h, kernel = 5) as «conv1», size = 2)",
         "entity.name.variable.layer.dtf"),
    # checkpoint, summary, every, keep: keywords only in their statements.
    Case("    «checkpoint» every 600 s keep 5", "keyword.other.checkpoint.dtf"),
    Case("    checkpoint «every» 600 s keep 5", "keyword.other.every.dtf"),
    Case("    checkpoint every «600» s keep 5", "constant.numeric.integer.dtf"),
    Case("    checkpoint every 600 «s» keep 5", "support.constant.unit.dtf"),
    Case("    checkpoint every 600 s «keep» 5", "keyword.other.keep.dtf"),
    Case("    checkpoint every 10 «min» keep 5 // often", "support.constant.unit.dtf"),
    Case("    «summary» every 100 steps [loss, accuracy]", "keyword.other.summary.dtf"),
    Case("    summary «every» 100 steps [loss, accuracy]", "keyword.other.every.dtf"),
    Case("    summary every 100 «steps» [loss, accuracy]", "support.constant.unit.dtf"),
    Case("    summary every 100 steps [loss, «accuracy»]", "variable.other.dtf"),
    Case('    eval = idx("d", split = "test"), «every» = 1000', "variable.parameter.dtf",
         absent=["keyword"]),
    Case("    «checkpoint» = 5", "variable.other.assignment.dtf", absent=["keyword"]),
    Case("    x = «keep» + 1", "variable.other.dtf", absent=["keyword"]),
    Case("    x = «summary»", "variable.other.dtf", absent=["keyword"]),
    # optimizer for GROUP = ...: `for` is a keyword only there.
    Case('    «optimizer» for wide, "cross_*" = ftrl(learning_rate = 0.2)',
         "variable.other.assignment.dtf"),
    Case('    optimizer «for» wide, "cross_*" = ftrl(learning_rate = 0.2)', "keyword.other.for.dtf"),
    Case('    optimizer for «wide», "cross_*" = ftrl(learning_rate = 0.2)',
         "entity.name.variable.layer.dtf"),
    Case('    optimizer for wide, «"cross_*"» = ftrl(learning_rate = 0.2)', "string.quoted.double.dtf"),
    Case('    optimizer for wide, "cross_*" = «ftrl»(learning_rate = 0.2)',
         "support.function.builtin.optimizer.dtf"),
    Case("    optimizer = «ftrl»", "support.function.builtin.optimizer.dtf"),
    Case("    x = «for» + 1", "variable.other.dtf", absent=["keyword"]),
    # Dtypes and shapes.
    Case("  input x: «f32»[B, 784]", "storage.type.dtype.dtf"),
    Case("  input x: «f32»[B, 784]", "meta.type.tensor.dtf"),
    Case("  input x: f32[«B», 784]", "constant.language.batch.dtf"),
    Case("  input x: f32[B, «784»]", "constant.numeric.integer.dimension.dtf"),
    Case("  input x: f32«[»B, 784]", "punctuation.definition.shape.begin.dtf"),
    Case("  input x: f32[B, 784«]»", "punctuation.definition.shape.end.dtf"),
    Case("  input ids: i64[B, «seq»]", "variable.other.dimension.dtf"),
    Case("  input m: «bool»[B]", "storage.type.dtype.dtf"),
    Case("  var e: «bf16»[10, 4]", "storage.type.dtype.dtf"),
    Case("  var d: «f64»[10, 4]", "storage.type.dtype.dtf"),
    Case("    y = cast(x, to = «f16»)", "storage.type.dtype.dtf"),
    Case("    y = «B»", "variable.other.dtf", absent=["constant"]),
    # Device strings.
    Case('  on «"/job:ps/task:0"» {', "string.quoted.double.device.dtf", parts=True),
    Case('  on "/«job»:ps/task:0" {', "support.type.device.dtf"),
    Case('  on "/job:«ps»/task:0" {', "constant.other.device.dtf"),
    Case('  on "/job:ps/task:«0»" {', "constant.other.device.dtf"),
    Case('  on "/job:ps«/»task:0" {', "punctuation.separator.device.dtf"),
    Case('  on "/job«:»ps/task:0" {', "punctuation.separator.device.dtf"),
    Case('  on «"/job:worker/task:1/gpu:0"» { h = relu(x) }', "string.quoted.double.device.dtf",
         parts=True),
    Case('  on «"somewhere"» {', "string.quoted.double.device.dtf", parts=True),
    Case('    s = session(device = «"/gpu:0"»)', "string.quoted.double.device.dtf", parts=True),
    Case('    d = «"/cpu:0"»', "string.quoted.double.device.dtf", parts=True),
    Case('    d = «"/device:GPU:0"»', "string.quoted.double.device.dtf", parts=True),
    Case('    data = idx(«"/usr/share/datasets/fashion-mnist"», split = "train")',
         "string.quoted.double.dtf", parts=True, absent=["string.quoted.double.device"]),
    # Strings and comments.
    Case('    s = «"a // b"»', "string.quoted.double.dtf", parts=True, absent=["comment"]),
    Case('    s = "a«\\"»b"', "constant.character.escape.dtf"),
    Case("    h = relu(x) «// after code»", "comment.line.double-slash.dtf", parts=True),
    Case("    h = «relu»(x) // after code", "support.function.builtin.op.dtf"),
    Case('    s = "q" «// a "quoted" comment»', "comment.line.double-slash.dtf", parts=True),
    Case("    x = «/* inline */» 5", "comment.block.dtf", parts=True),
    Case("    x = /* inline */ «5»", "constant.numeric.integer.dtf"),
    Case("    /* over\n   «two lines» */\n    x = 1", "comment.block.dtf", parts=True),
    Case("    /* over\n   two lines */\n    «x» = 1", "variable.other.assignment.dtf",
         absent=["comment"]),
    Case('    s = "unterminated\n    h = «relu»(x)', "support.function.builtin.op.dtf",
         absent=["string"]),
    # Numbers.
    Case("    lr = «1e-4»", "constant.numeric.float.dtf"),
    Case("    big = «1.5E+3»", "constant.numeric.float.dtf"),
    Case("    half = «.5»", "constant.numeric.float.dtf"),
    Case("    f = «5.»", "constant.numeric.float.dtf"),
    Case("    f = «0.1»", "constant.numeric.float.dtf"),
    Case("    n = «42»", "constant.numeric.integer.dtf"),
    Case("    n = «3e5» + 1", "constant.numeric.float.dtf"),
    Case("    d = a «-» 1e-4", "keyword.operator.arithmetic.dtf"),
    Case("    d = a - «1e-4»", "constant.numeric.float.dtf"),
    Case("    r = reshape(x, [«-»1, 28])", "keyword.operator.arithmetic.dtf"),
    Case("    «x1» = y2", "variable.other.assignment.dtf", absent=["constant"]),
    # Operators.
    Case("    y = a «+» b", "keyword.operator.arithmetic.dtf"),
    Case("    y = a «*» b", "keyword.operator.arithmetic.dtf"),
    Case("    y = a «/» b", "keyword.operator.arithmetic.dtf"),
    Case("    y = a «@» W", "keyword.operator.arithmetic.matmul.dtf"),
    Case("    y = a «==» b", "keyword.operator.comparison.dtf"),
    Case("    y = a «!=» b", "keyword.operator.comparison.dtf"),
    Case("    y = a «<» b", "keyword.operator.comparison.dtf"),
    Case("    y = a «<=» b", "keyword.operator.comparison.dtf"),
    Case("    y = a «>» b", "keyword.operator.comparison.dtf"),
    Case("    y = a «>=» b", "keyword.operator.comparison.dtf"),
    Case("    y «=» a", "keyword.operator.assignment.dtf"),
    Case("    y = mean(argmax(l, 1) «==» y)", "keyword.operator.comparison.dtf"),
    Case("    y = f(«a» == b)", "variable.other.dtf", absent=["variable.parameter"]),
    # Calls: builtins by kind, other calls, user variables.
    Case("    h = «dense»(x, units = 10)", "support.function.builtin.layer.dtf"),
    Case("    h = «conv2d»(x, filters = 32)", "support.function.builtin.layer.dtf"),
    Case("    e = «embedding»(ids, 1000, 16)", "support.function.builtin.layer.dtf"),
    Case("    h = «reshape»(x, [-1, 28, 28, 1])", "support.function.builtin.op.dtf"),
    Case("    h = «max_pool»(h, size = 2)", "support.function.builtin.op.dtf"),
    Case("    h = «max»(h, axis = 1)", "support.function.builtin.op.dtf"),
    Case("    l = «sparse_softmax_cross_entropy»(logits, y)", "support.function.builtin.op.dtf"),
    Case("  var W: f32[1] = «truncated_normal»(stddev = 0.1)",
         "support.function.builtin.initializer.dtf"),
    Case("    optimizer = «adam»(learning_rate = 1e-4)", "support.function.builtin.optimizer.dtf"),
    Case("    optimizer = «momentum»(0.1, momentum = 0.9)",
         "support.function.builtin.optimizer.dtf"),
    Case("    optimizer = momentum(0.1, «momentum» = 0.9)", "variable.parameter.dtf"),
    Case("    learning_rate = «exponential_decay»(0.1, decay_steps = 1000)",
         "support.function.builtin.schedule.dtf"),
    Case("    optimizer = «adamw»(weight_decay = 0.05)", "support.function.builtin.optimizer.dtf"),
    Case("    optimizer = adamw(learning_rate = «cosine_decay»(0.001, 600))",
         "support.function.builtin.schedule.dtf"),
    Case('    data = «idx»("p", split = "train")', "support.function.builtin.data.dtf"),
    Case("    data = «synthetic»(examples = 100)", "support.function.builtin.data.dtf"),
    Case("    update = «sync»(replicas_to_aggregate = 3)", "support.function.builtin.training.dtf"),
    Case("    clip_gradients = «global_norm»(5.0)", "support.function.builtin.training.dtf"),
    Case("    loss_scale = «dynamic»(initial_scale = 1024)", "support.function.builtin.training.dtf"),
    Case("    loss_scale = «dynamic»", "support.function.builtin.training.dtf"),
    Case("  placement «replicate»(ps = round_robin)", "support.function.builtin.placement.dtf"),
    Case("    h = «tower»(x) as left", "entity.name.function.call.dtf"),
    Case("    h = «my_dense»(x)", "entity.name.function.call.dtf", absent=["support"]),
    Case("    h = «dense_2»(x)", "entity.name.function.call.dtf", absent=["support"]),
    Case("    h = dense(«x», units = 10)", "variable.other.dtf"),
    Case("    «h» = dense(h, units = 10)", "variable.other.assignment.dtf"),
    Case("    h = dense(h, units = «units»)", "variable.other.dtf"),
    Case("    h = relu(f(g(x)))\n    «y» = 1", "variable.other.assignment.dtf",
         absent=["meta.function-call"]),
    Case("    h = relu(f(g((x))))«)»", "punctuation.section.parens.end.dtf",
         absent=["meta.function-call"]),
    # Keyword arguments and settings.
    Case("  var W: f32[1] = truncated_normal(«stddev» = 0.1)", "variable.parameter.dtf"),
    Case("    h = dense(x,\n              «units» = 10)", "variable.parameter.dtf"),
    Case("  var b: f32[1] = zeros, «trainable» = false", "variable.parameter.dtf"),
    Case("  var b: f32[1] = zeros, trainable = false, «partitions» = 4", "variable.parameter.dtf"),
    Case("    «optimizer»   = adam()", "variable.other.assignment.dtf"),
    # Builtins named as values, constants.
    Case("  var b: f32[1] = «zeros»", "support.function.builtin.initializer.dtf"),
    Case("    h = dense(h, activation = «relu»)", "support.function.builtin.op.dtf"),
    Case("    h = dense(h, kernel_initializer = «glorot_uniform»)",
         "support.function.builtin.initializer.dtf"),
    Case("    h = conv2d(h, padding = «same»)", "support.constant.dtf"),
    Case("    update      = «async»", "support.constant.dtf"),
    Case("    replication = «between_graph»", "support.constant.dtf"),
    Case("    precision   = «mixed_bfloat16»", "support.constant.dtf"),
    Case("    precision   = «mixed_float16»", "support.constant.dtf"),
    Case("    precision   = «float32»", "support.constant.dtf"),
    Case("    s = sum(x, axis = «none»)", "constant.language.none.dtf"),
    Case("    b = «true»", "constant.language.boolean.true.dtf"),
    Case("    b = «false»", "constant.language.boolean.false.dtf"),
    # `train` is reserved (docs/language.md): a keyword even where it is misused.
    Case('    data = idx("p", split = «train»)', "keyword.other.train.dtf"),
    Case("    «model» = 1", "keyword.other.model.dtf", absent=["variable"]),
    # Punctuation.
    Case("model m «{»", "punctuation.section.block.begin.dtf"),
    Case("model m {\n«}»", "punctuation.section.block.end.dtf"),
    Case("    y = f(a«,» b)", "punctuation.separator.comma.dtf"),
    Case("  input x«:» f32[B]", "punctuation.separator.colon.dtf"),
    Case("    metrics = «[»loss, accuracy]", "punctuation.section.brackets.begin.dtf"),
    Case("    h = relu«(»x)", "punctuation.definition.arguments.begin.dtf"),
    Case("    h = (a + b«)» * c", "punctuation.section.parens.end.dtf"),
]


def _tokens_in(tokens, line, col, length):
    return [t for t in tokens if t[0] == line and t[1] < col + length and t[1] + len(t[2]) > col]


@pytest.mark.parametrize("case", CASES, ids=repr)
def test_scope(case):
    text, spans = unmark(case.marked)
    assert len(spans) == 1, "a case marks one span"
    line, col, marked = spans[0]
    tokens = tokenize(text)
    hit = _tokens_in(tokens, line, col, len(marked))
    shown = [(t[2], t[3][1:]) for t in hit]
    assert hit, f"no token at {marked!r}"
    if not case.parts:
        assert len(hit) == 1 and hit[0][2] == marked, f"{marked!r} is not one token: {shown}"
    for tok in hit:
        assert case.scope in tok[3], f"{tok[2]!r} has {tok[3][1:]}, expected {case.scope}"
        for prefix in case.absent:
            bad = [s for s in tok[3] if s.startswith(prefix)]
            assert not bad, f"{tok[2]!r} must not be {prefix}*: {tok[3][1:]}"


def _sample():
    return (SAMPLES / "mnist_cnn.dtf").read_text(encoding="utf-8")


def test_sample_every_token_has_a_scope():
    """Nothing but white space is left uncoloured in a whole model."""
    bare = [(l + 1, c + 1, t) for l, c, t, s in tokenize(_sample()) if len(s) == 1 and t.strip()]
    assert not bare, f"tokens with no scope (line, col, text): {bare}"


def test_sample_leaves_no_region_open():
    assert open_regions_after(_sample()) == []
    tokens = tokenize(_sample())
    # Every block brace is at the top level: no call, string or shape swallowed one.
    braces = [t for t in tokens if t[2] in ("{", "}")]
    assert len(braces) == 14
    for tok in braces:
        assert len(tok[3]) == 2 and tok[3][1].startswith("punctuation.section.block"), tok


def test_sample_builtin_calls_and_layer_names():
    tokens = tokenize(_sample())
    names = load_json(GRAMMAR)["repository"]["builtin-function-names"]["patterns"]
    builtin = re.compile("|".join(p["match"] for p in names))
    calls = [t for i, t in enumerate(tokens)
             if i + 1 < len(tokens) and tokens[i + 1][2].startswith("(")
             and re.fullmatch(r"[A-Za-z_]\w*", t[2])]
    assert len(calls) >= 25
    for tok in calls:
        want = "support.function.builtin" if builtin.fullmatch(tok[2]) else "entity.name.function"
        if tok[2] == "tower" and "meta.network.declaration.dtf" in tok[3]:
            want = "entity.name.function.network"
        assert any(s.startswith(want) for s in tok[3]), tok
    layers = [t[2] for t in tokens if "entity.name.variable.layer.dtf" in t[3]]
    assert layers == ["conv1", "conv2", "fully_connected", "tower_left", "tower_left", "pred"]
    on_lines = [i for i, l in enumerate(_sample().splitlines()) if l.lstrip().startswith("on ")]
    devices = ["".join(t[2] for t in tokens if t[0] == line and
                       "string.quoted.double.device.dtf" in t[3]) for line in on_lines]
    assert devices == ['"/job:ps/task:0"', '"/job:ps/task:1"', '"/job:worker/gpu:0"']


def _corpus():
    """The project's own dtf text: models/*.dtf and the ```dtf blocks of docs/*.md."""
    from editor_paths import ROOT

    texts = [(p.relative_to(ROOT), p.read_text(encoding="utf-8"))
             for p in sorted((ROOT / "models").glob("*.dtf"))]
    for doc in sorted((ROOT / "docs").glob("*.md")):
        body = doc.read_text(encoding="utf-8")
        for n, m in enumerate(re.finditer(r"^```dtf\n(.*?)^```", body, re.S | re.M)):
            texts.append((f"{doc.relative_to(ROOT)} block {n + 1}", m.group(1)))
    return texts


def test_project_dtf_text_is_fully_coloured():
    """Every token of every model and documented example gets a scope, and every
    file ends outside any call, string or comment."""
    corpus = _corpus()
    if not corpus:
        pytest.skip("no models/*.dtf or ```dtf blocks in docs/ yet")
    problems = []
    for where, text in corpus:
        bare = [(l + 1, c + 1, t) for l, c, t, s in tokenize(text) if len(s) == 1 and t.strip()]
        if bare:
            problems.append(f"{where}: uncoloured (line, col, text) {bare[:5]}")
        still_open = open_regions_after(text)
        if still_open:
            problems.append(f"{where}: leaves {still_open} open")
    assert not problems, "\n".join(problems)
