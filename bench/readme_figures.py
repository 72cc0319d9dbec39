#!/usr/bin/env python3
"""README's "Measured here" figures, written from bench/results/ alone.

The block of README.md between the markers below is generated: every figure
in it is read from a results file that bench/readme.sh wrote in one run on
one machine (the run's stamp, results/readme.md, gives the date, the CPU and
its ISA, and the load). Nobody edits those figures by hand:

    bench/readme_figures.py --write    # after bench/readme.sh: rewrite the block
    bench/readme_figures.py --check    # exit 1 when README's block is not what
                                       # the results files give (ctest
                                       # docs.readme_figures)
    bench/readme_figures.py            # print the block

A results file whose table lacks a row or column this needs is an error that
names the file and what is missing (a benchmark's format changed: update
this script with it).
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
BEGIN = ("<!-- figures: written by bench/readme_figures.py from bench/results/ "
         "(bench/readme.sh); do not edit by hand -->")
END = "<!-- /figures -->"
# Before the first run README has a hand-written paragraph of figures that
# starts so; --write replaces it with the block.
FIRST = "Measured here (2 cores; `bench/results/`)"


class Missing(Exception):
    pass


def read(name):
    path = RESULTS / name
    if not path.exists():
        raise Missing(f"{path.relative_to(ROOT)} does not exist (run bench/readme.sh)")
    return path.read_text()


def tables(text):
    """Every markdown table of `text` as a list of {header: cell} rows."""
    out, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        if (lines[i].startswith("|") and i + 1 < len(lines)
                and re.match(r"^\|\s*-{3}", lines[i + 1])):
            head = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
                rows.append(dict(zip(head, cells)))
                i += 1
            out.append(rows)
        else:
            i += 1
    return out


def row(name, text, **match):
    """The first table row of `text` whose cells equal `match` (keys with
    underscores for spaces)."""
    want = {k.replace("_", " "): v for k, v in match.items()}
    for t in tables(text):
        for r in t:
            if all(r.get(k) == v for k, v in want.items()):
                return r
    raise Missing(f"bench/results/{name}: no table row with {want}")


def cell(name, r, column):
    if column not in r:
        raise Missing(f"bench/results/{name}: no column '{column}' (has {list(r)})")
    return r[column]


def num(s):
    """'5914' -> '5,914'; '1.51' stays; a cell like '2.24 MB' keeps its unit."""
    m = re.fullmatch(r"(\d+)(\.\d+)?", s)
    if not m:
        return s
    whole = f"{int(m.group(1)):,}"
    return whole + (m.group(2) or "")


def search(name, text, pattern):
    m = re.search(pattern, text)
    if not m:
        raise Missing(f"bench/results/{name}: no match for /{pattern}/")
    return m


def ratio(a, b):
    return f"{float(a) / float(b):.2f}x"


def stamp():
    text = read("readme.md")
    date = search("readme.md", text, r"Run: (.+?)\.\n").group(1)
    machine = search("readme.md", text, r"Machine: (.+?)\.\n").group(1)
    load = search("readme.md", text, r"Load average[^:]*: (.+?)\.\n").group(1)
    return date, machine, load


def one_process():
    n = "throughput.md"
    t = read(n)
    dtf = row(n, t, framework="dtf")
    torch = row(n, t, framework="PyTorch")
    tf = row(n, t, framework="TensorFlow")
    runs = search(n, t, r"(\d+) run\(s\) of each").group(1)
    bound = search(n, t, r"dtf's median is \*\*(\d+)%\*\*").group(1)
    ips = "images/s (median)"
    return (
        f"- **One process:** the seed CNN trains at {num(cell(n, dtf, ips))} images/s "
        f"({'one run' if runs == '1' else f'median of {runs} runs'}), "
        f"{cell(n, torch, 'dtf img/s ÷ this')}x PyTorch "
        f"({num(cell(n, torch, ips))}) and {cell(n, tf, 'dtf img/s ÷ this')}x TensorFlow "
        f"({num(cell(n, tf, ips))}) on the same cores, {bound}% of the machine's SGEMM "
        f"bound for the direct arithmetic (73 MFLOP an image; its Winograd convolutions "
        f"multiply less, docs/kernels.md), in {cell(n, dtf, 'peak RSS MB')} MB (PyTorch {cell(n, torch, 'peak RSS MB')} MB, "
        f"TensorFlow {cell(n, tf, 'peak RSS MB')} MB; bench/results/throughput.md).")


def mixed_precision():
    n = "mixed_precision.md"
    t = read(n)
    col = "images/s (median)"
    f32 = row(n, t, framework="dtf", precision="float32")
    bf = row(n, t, framework="dtf", precision="mixed_bfloat16")
    torch = row(n, t, framework="PyTorch", precision="mixed_bfloat16")
    keras = row(n, t, framework="TensorFlow", precision="mixed_bfloat16")
    cpu = search(n, t, r"in CPU time per step .*?: \*\*([\d.]+)x\*\*").group(1)
    bound = search(n, t, r"dtf's bf16 median is \*\*(\d+)%\*\*").group(1)
    acc = search(n, t, r"f32 plan ([\d.]+), mixed_bfloat16 plan ([\d.]+)")
    acc_steps = search(n, t, r"Test accuracy .*? after (\d+) steps").group(1)
    return (
        f"- **Mixed precision:** under `precision = mixed_bfloat16` the seed CNN trains "
        f"at {num(cell(n, bf, col))} images/s, {ratio(cell(n, bf, col), cell(n, f32, col))} "
        f"dtf's own f32 plan ({num(cell(n, f32, col))}; {cpu}x in CPU time per step), "
        f"{cell(n, torch, 'dtf bf16 img/s ÷ this')}x PyTorch's bf16 autocast "
        f"({num(cell(n, torch, col))}) and {cell(n, keras, 'dtf bf16 img/s ÷ this')}x "
        f"Keras' `mixed_bfloat16` policy ({num(cell(n, keras, col))}), {bound}% of the "
        f"machine's bf16 GEMM bound; test accuracy after {num(acc_steps)} steps {acc.group(2)} "
        f"against the f32 plan's {acc.group(1)} (bench/results/mixed_precision.md).")


def cluster():
    n = "distributed.md"
    t = read(n)
    col = "images/s (sum over workers)"
    rss = "peak RSS MB (all tasks)"

    def dtf(variant, shape):
        return row(n, t, framework=f"dtf ({variant})", cluster=shape)

    def tf(shape):
        return row(n, t, framework=search(n, t, r"\| (TensorFlow [\d.]+) \|").group(1),
                   cluster=shape)

    one, two = "1 ps + 2 workers", "2 ps + 2 workers"
    d1, d2 = dtf("default: shared memory", one), dtf("default: shared memory", two)
    u1, u2 = dtf("Unix sockets only, --same-host unix", one), dtf("Unix sockets only, --same-host unix", two)
    t1, t2 = tf(one), tf(two)
    tcp1, tcp2 = dtf("mutual TLS over TCP", one), dtf("mutual TLS over TCP", two)
    b1, b2 = dtf("shared memory, --wire bf16", one), dtf("shared memory, --wire bf16", two)
    repeat = re.search(r"^Command: `[^`]*--repeat (\d+)", t, re.M)
    runs = "one run each" if not repeat or repeat.group(1) == "1" else \
        f"the median of {repeat.group(1)} runs each"
    return (
        f"- **A local cluster** as the launcher runs it (mutual TLS; between the tasks of one "
        f"host, calls over Unix sockets and the tensors in shared memory; {runs}): 1 ps + 2 workers at {num(cell(n, d1, col))} images/s in "
        f"all, {ratio(cell(n, d1, col), cell(n, t1, col))} TensorFlow's own ps/worker "
        f"runtime ({num(cell(n, t1, col))}), in {num(cell(n, d1, rss))} MB across the three "
        f"tasks (TensorFlow: {num(cell(n, t1, rss))} MB); 2 ps + 2 workers "
        f"{num(cell(n, d2, col))} against {num(cell(n, t2, col))} "
        f"({ratio(cell(n, d2, col), cell(n, t2, col))}); with the tensors in the Unix sockets "
        f"too (`--same-host unix`) {num(cell(n, u1, col))} and {num(cell(n, u2, col))}; with TLS over TCP between the "
        f"tasks (`--same-host tcp`) {num(cell(n, tcp1, col))} and {num(cell(n, tcp2, col))} "
        f"({ratio(cell(n, tcp1, col), cell(n, t1, col))} and "
        f"{ratio(cell(n, tcp2, col), cell(n, t2, col))}); with bfloat16 pulls and pushes "
        f"(`--wire bf16`, half the bytes) {num(cell(n, b1, col))} and {num(cell(n, b2, col))} "
        f"(bench/results/distributed.md).")


def hosts():
    n = "hosts.md"
    t = read(n)
    col = "images/s (sum over workers)"
    link = search(n, t, r"\| TensorFlow [\d.]+ \| (\w+) \|").group(1)

    def r(framework):
        return row(n, t, framework=framework, links=link)

    tf = r(search(n, t, r"\| (TensorFlow [\d.]+) \|").group(1))
    f32 = r("dtf (mutual TLS)")
    bf = r("dtf (mutual TLS, --wire bf16)")
    ov = r("dtf (mutual TLS, --wire bf16 --overlap-push)")
    pre = r("dtf (mutual TLS, --wire bf16 --prefetch-pull)")
    topk = r("dtf (mutual TLS, --wire bf16 --compress-push topk:0.01)")
    onebit = r("dtf (mutual TLS, --wire bf16 --compress-push onebit)")
    bps = "bytes per step (ps link)"
    acc = "test accuracy"
    return (
        f"- **Hosts with {link.replace('gbit', ' Gbit/s')} links** (`bench/hosts.sh`: each task "
        f"in a network namespace of its own, links shaped with tc, mutual TLS over TCP), "
        f"1 ps + 2 workers: TensorFlow {num(cell(n, tf, col))} images/s; dtf "
        f"{num(cell(n, f32, col))} ({ratio(cell(n, f32, col), cell(n, tf, col))}, "
        f"{cell(n, f32, bps)} a step through the ps's link), "
        f"{num(cell(n, bf, col))} with `--wire bf16` "
        f"({ratio(cell(n, bf, col), cell(n, tf, col))}, {cell(n, bf, bps)}) and "
        f"{num(cell(n, ov, col))} with `--overlap-push` besides "
        f"({ratio(cell(n, ov, col), cell(n, tf, col))}) or {num(cell(n, pre, col))} with "
        f"`--prefetch-pull` instead (the next step's pull during this one, staleness at most "
        f"1; {ratio(cell(n, pre, col), cell(n, tf, col))}); test accuracy at equal steps "
        f"{cell(n, f32, acc)} (f32), {cell(n, bf, acc)} (bf16), {cell(n, ov, acc)} "
        f"(overlapped pushes), {cell(n, pre, acc)} (prefetched pulls). Compressed pushes with "
        f"error feedback bring a step to {cell(n, topk, bps)} (`--compress-push topk:0.01`: "
        f"{num(cell(n, topk, col))} images/s, accuracy {cell(n, topk, acc)}) and "
        f"{cell(n, onebit, bps)} (`onebit`: {num(cell(n, onebit, col))}, accuracy "
        f"{cell(n, onebit, acc)}) (bench/results/hosts.md).")


def embedding():
    n = "embedding.md"
    t = read(n)
    one = "examples/s"
    dtf = row(n, t, framework="dtf (sparse update)")
    torch = row(n, t, framework="PyTorch, sparse nn.Embedding")
    tf = row(n, t, framework="TensorFlow tf.compat.v1")
    c = "examples/s (sum)"
    shape = "2 ps + 2 workers"
    tls = row(n, t, **{shape: "dtf, table looked up on the ps, mutual TLS (the default)"})
    plain = row(n, t, **{shape: "dtf, the same with --insecure (plaintext)"})
    tfc = row(n, t, **{shape: "TensorFlow tf.compat.v1 ps/worker (plaintext)"})
    ps_rss = re.search(r"ps\.0 (\d+)", cell(n, tls, "peak RSS MB per task"))
    tf_rss = re.search(r"ps\.0 (\d+)", cell(n, tfc, "peak RSS MB per task"))
    return (
        f"- **Large embeddings:** the CTR model with a 2M-row table trains at "
        f"{num(cell(n, dtf, one))} examples/s in one process (PyTorch "
        f"{num(cell(n, torch, one))}, TensorFlow {num(cell(n, tf, one))}), and on 2 ps + 2 "
        f"workers at {num(cell(n, tls, c))} with mutual TLS or {num(cell(n, plain, c))} in "
        f"plaintext (TensorFlow's ps/worker, plaintext: {num(cell(n, tfc, c))}), ps.0 in "
        f"{ps_rss.group(1) if ps_rss else '?'} MB (TensorFlow's: "
        f"{tf_rss.group(1) if tf_rss else '?'} MB) (bench/results/embedding.md).")


def block():
    date, machine, load = stamp()
    parts = [
        BEGIN,
        f"Measured here by `bench/readme.sh` ({date}; {machine}; load average "
        f"{load}), each framework on the same cores, peers in the same invocation "
        f"(the commands and every run are in the results files):",
        "",
        one_process(),
        mixed_precision(),
        cluster(),
        hosts(),
        embedding(),
        END,
    ]
    return "\n".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help="rewrite README's block")
    g.add_argument("--check", action="store_true",
                   help="exit 1 when README's block differs from the results")
    ap.add_argument("--readme", default=str(ROOT / "README.md"))
    args = ap.parse_args()
    try:
        text = block()
    except Missing as e:
        print(f"readme_figures: {e}", file=sys.stderr)
        return 2
    if not (args.write or args.check):
        print(text)
        return 0
    readme = pathlib.Path(args.readme)
    body = readme.read_text()
    if args.write and BEGIN not in body and END not in body and FIRST in body:
        # The first run: the hand-written paragraph of figures (up to its
        # blank line) becomes the block.
        start = body.index(FIRST)
        stop = body.find("\n\n", start)
        stop = len(body) if stop < 0 else stop
        body = body[:start] + BEGIN + "\n" + END + body[stop:]
    if body.count(BEGIN) != 1 or body.count(END) != 1:
        print(f"readme_figures: {readme} needs exactly one '{BEGIN}' and one '{END}'",
              file=sys.stderr)
        return 2
    start, stop = body.index(BEGIN), body.index(END) + len(END)
    if args.write:
        readme.write_text(body[:start] + text + body[stop:])
        print(f"readme_figures: wrote {readme}'s figures")
        return 0
    if body[start:stop] != text:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(
            body[start:stop].splitlines(True), text.splitlines(True),
            "README.md (now)", "from bench/results/"))
        print("\nreadme_figures: README's figures are not those of bench/results/: "
              "run bench/readme_figures.py --write (or bench/readme.sh)", file=sys.stderr)
        return 1
    print("readme_figures: README's figures are those of bench/results/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
