#!/usr/bin/env python3
"""Drives dtf-lsp over stdio like an editor would and checks its answers.

usage: lsp_client_test.py PATH/TO/dtf-lsp

Every read has a deadline, so a server that hangs fails the test instead of
stalling it. Ends with a plain 'N passed, N failed' line.
"""
import json
import os
import select
import subprocess
import sys
import time

DEADLINE_S = 10

BROKEN = """model m {
  input x: f32[B, 784]
  var W: f32[500, 10] = truncated_normal(stddev = 0.1)
  graph {
    logits = x @ W
    loss = mean(logits)
  }
  train { optimizer = sgd(0.1) }
}
"""
FIXED = BROKEN.replace("var W: f32[500, 10]", "var W: f32[784, 10]")
GOOD = """network tower(x) {
  h = dense(x, units = 16, activation = relu) as fc
  return h
}

model demo {
  input x: f32[B, 784]
  input y: i32[B]
  placement replicate(ps = round_robin)
  on "/job:ps/task:0" { var W: f32[784, 10] = zeros }
  graph {
    t = tower(x) as left
    logits = x @ W
    loss = mean(sparse_softmax_cross_entropy(logits, y))
  }
  train {
    optimizer = adam(learning_rate = 1e-3)
  }
}
"""
URI = "file:///tmp/dtf-lsp-test/model.dtf"


class Client:
    def __init__(self, server):
        self.proc = subprocess.Popen([server], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.buffer = b""
        self.next_id = 1
        self.notifications = []

    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message):
        body = json.dumps(message).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return self.wait_response(rid)

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def _read_message(self, deadline):
        while True:
            header_end = self.buffer.find(b"\r\n\r\n")
            if header_end >= 0:
                headers = self.buffer[:header_end].decode()
                length = int([h for h in headers.split("\r\n") if h.lower().startswith("content-length")][0].split(":")[1])
                start = header_end + 4
                if len(self.buffer) >= start + length:
                    body = self.buffer[start:start + length]
                    self.buffer = self.buffer[start + length:]
                    return json.loads(body)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no message from dtf-lsp within %ds" % DEADLINE_S)
            ready, _, _ = select.select([self.proc.stdout], [], [], remaining)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise EOFError("dtf-lsp closed its output")
                self.buffer += chunk

    def wait_response(self, rid):
        deadline = time.monotonic() + DEADLINE_S
        while True:
            message = self._read_message(deadline)
            if "method" in message and "id" not in message:
                self.notifications.append(message)
            elif message.get("id") == rid:
                return message

    def wait_diagnostics(self):
        deadline = time.monotonic() + DEADLINE_S
        while True:
            for i, n in enumerate(self.notifications):
                if n["method"] == "textDocument/publishDiagnostics":
                    return self.notifications.pop(i)["params"]
            self.notifications.append(self._read_message(deadline))


results = []


def check(name, condition, detail=""):
    results.append((name, bool(condition)))
    print(("PASS" if condition else "FAIL") + ": " + name + ("" if condition else "  " + str(detail)))


def main():
    server = sys.argv[1]
    c = Client(server)

    r = c.request("textDocument/hover", {"textDocument": {"uri": URI}, "position": {"line": 0, "character": 0}})
    check("a request before initialize gets ServerNotInitialized", r.get("error", {}).get("code") == -32002, r)

    r = c.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    caps = r.get("result", {}).get("capabilities", {})
    check("initialize announces hover, definition, symbols, completion",
          caps.get("hoverProvider") and caps.get("definitionProvider") and caps.get("documentSymbolProvider")
          and "completionProvider" in caps, r)
    c.notify("initialized", {})

    # Diagnostics: an error at the right range, then cleared by a fix.
    c.notify("textDocument/didOpen", {"textDocument": {"uri": URI, "languageId": "dtf", "version": 1, "text": BROKEN}})
    d = c.wait_diagnostics()
    diags = d["diagnostics"]
    check("the error is published", len(diags) == 1, diags)
    if diags:
        first = diags[0]
        check("the error says what dtfc says",
              "matmul expects inner dimensions to match, got f32[B, 784] and f32[500, 10]" in first["message"], first)
        check("the error's range is the '@' operator (line 4, columns 15-16)",
              first["range"] == {"start": {"line": 4, "character": 15}, "end": {"line": 4, "character": 16}}, first["range"])
        check("the error is an Error", first.get("severity") == 1, first)
        related = first.get("relatedInformation", [])
        check("notes point at where x and W are declared",
              len(related) == 2 and related[0]["location"]["range"]["start"] == {"line": 1, "character": 8}
              and related[1]["location"]["range"]["start"] == {"line": 2, "character": 6}, related)

    c.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 2},
                                        "contentChanges": [{"text": FIXED}]})
    d = c.wait_diagnostics()
    check("fixing the error clears the diagnostics", d["diagnostics"] == [] and d.get("version") == 2, d)

    c.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 3},
                                        "contentChanges": [{"text": GOOD}]})
    d = c.wait_diagnostics()
    check("the second model has no errors", d["diagnostics"] == [], d)

    def at(line, character):
        return {"textDocument": {"uri": URI}, "position": {"line": line, "character": character}}

    # Hover: an expression's dtype and shape; a variable's placement.
    r = c.request("textDocument/hover", at(12, 13))  # `x` in `logits = x @ W`
    text = (r.get("result") or {}).get("contents", {}).get("value", "")
    check("hover on an input shows its dtype and shape", "f32[B, 784]" in (text or ""), r)
    r = c.request("textDocument/hover", at(12, 17))  # `W`
    text = (r.get("result") or {}).get("contents", {}).get("value", "")
    check("hover on a variable shows its placement", "on /job:ps/task:0" in (text or "") and "f32[784, 10]" in text, r)
    r = c.request("textDocument/hover", at(12, 15))  # `@`
    text = (r.get("result") or {}).get("contents", {}).get("value", "")
    check("hover on an operator shows the result's shape", "f32[B, 10]" in (text or ""), r)
    r = c.request("textDocument/hover", at(11, 8))  # `tower`
    text = (r.get("result") or {}).get("contents", {}).get("value", "")
    check("hover on a network call shows its result", "f32[B, 16]" in (text or ""), r)

    # Definition.
    r = c.request("textDocument/definition", at(12, 17))
    result = r.get("result") if isinstance(r.get("result"), dict) else {}
    check("definition of W is its declaration",
          result.get("range", {}).get("start") == {"line": 9, "character": 28}, r)
    r = c.request("textDocument/definition", at(11, 8))
    result = r.get("result") if isinstance(r.get("result"), dict) else {}
    check("definition of a network call is the network",
          result.get("range", {}).get("start") == {"line": 0, "character": 8}, r)

    # Symbols.
    r = c.request("textDocument/documentSymbol", {"textDocument": {"uri": URI}})
    symbols = r.get("result", [])
    names = {s["name"]: s for s in symbols}
    check("symbols list the network and the model", "tower" in names and "demo" in names, symbols)
    children = {s["name"] for s in names.get("demo", {}).get("children", [])}
    check("the model's symbols hold its inputs, variables and layers", {"x", "y", "W", "left"} <= children, children)

    # Completion.
    r = c.request("textDocument/completion", at(12, 11))
    labels = {i["label"] for i in r.get("result", {}).get("items", [])}
    check("completion offers op and layer names", {"conv2d", "dense", "matmul", "max_pool"} <= labels, sorted(labels)[:20])
    edited = GOOD.replace("t = tower(x) as left", "t = dense(x, ")
    c.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 4}, "contentChanges": [{"text": edited}]})
    c.wait_diagnostics()
    r = c.request("textDocument/completion", at(11, 17))
    labels = [i["label"] for i in r.get("result", {}).get("items", [])]
    check("completion inside dense( offers its keyword arguments",
          {"units", "activation", "use_bias"} <= set(labels), labels[:10])
    r = c.request("textDocument/completion", at(16, 16))  # after `optimizer = `
    labels = {i["label"] for i in r.get("result", {}).get("items", [])}
    check("completion after `optimizer =` offers optimizers", {"adam", "sgd", "momentum", "ftrl"} <= labels, labels)
    grouped = GOOD.replace("    optimizer = adam(learning_rate = 1e-3)",
                             "    optimizer = adam(learning_rate = 1e-3)\n    optimizer for left, W = ftrl(0.2)")
    c.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 5}, "contentChanges": [{"text": grouped}]})
    c.wait_diagnostics()
    r = c.request("textDocument/completion", at(17, 28))  # after `optimizer for left, W = `
    labels = {i["label"] for i in r.get("result", {}).get("items", [])}
    check("completion after `optimizer for ... =` offers optimizers", {"ftrl", "adagrad"} <= labels, labels)
    r = c.request("textDocument/completion", at(17, 18))  # after `optimizer for `
    labels = {i["label"] for i in r.get("result", {}).get("items", [])}
    check("completion after `optimizer for` offers layers and variables",
          {"W", "left"} <= labels and "adam" not in labels, labels)
    mixed = GOOD.replace("    optimizer = adam(learning_rate = 1e-3)",
                         "    optimizer = adam(learning_rate = 1e-3)\n    precision = mixed_bfloat16")
    c.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 6}, "contentChanges": [{"text": mixed}]})
    c.wait_diagnostics()
    r = c.request("textDocument/completion", at(17, 16))  # after `precision = `
    labels = {i["label"] for i in r.get("result", {}).get("items", [])}
    check("completion after `precision =` offers the policies",
          labels == {"float32", "mixed_bfloat16", "mixed_float16"}, labels)
    r = c.request("textDocument/completion", at(17, 4))  # a train block setting
    labels = {i["label"] for i in r.get("result", {}).get("items", [])}
    check("completion in the train block offers `precision`", {"precision", "replication"} <= labels, labels)
    check("completion in the train block offers `loss_scale`", "loss_scale" in labels, labels)
    scaled = mixed.replace("precision = mixed_bfloat16", "precision = mixed_float16\n    loss_scale = dynamic(")
    c.notify("textDocument/didChange", {"textDocument": {"uri": URI, "version": 7}, "contentChanges": [{"text": scaled}]})
    c.wait_diagnostics()
    r = c.request("textDocument/completion", at(18, 17))  # after `loss_scale = `
    labels = {i["label"] for i in r.get("result", {}).get("items", [])}
    check("completion after `loss_scale =` offers dynamic", labels == {"dynamic"}, labels)
    r = c.request("textDocument/completion", at(18, 25))  # inside `dynamic(`
    labels = {i["label"] for i in r.get("result", {}).get("items", [])}
    check("completion inside `dynamic(` offers Keras' parameters",
          {"initial_scale", "dynamic_growth_steps"} <= labels, labels)

    # Malformed JSON-RPC: an error response each time, and the server lives on.
    c.send_raw(b"Content-Length: 12\r\n\r\n{not json!!}")
    r = c.wait_response(None)
    check("invalid JSON gets a ParseError response", r.get("error", {}).get("code") == -32700, r)
    c.send({"jsonrpc": "2.0", "id": 99, "params": {}})
    r = c.wait_response(99)
    check("a request without a method gets InvalidRequest", r.get("error", {}).get("code") == -32600, r)
    c.send({"jsonrpc": "1.0", "id": 100, "method": "initialize"})
    r = c.wait_response(100)
    check("a wrong jsonrpc version gets InvalidRequest", r.get("error", {}).get("code") == -32600, r)
    c.send_raw(b"Content-Length: 5\r\n\r\n[1,2]")
    r = c.wait_response(None)
    check("a JSON array gets InvalidRequest", r.get("error", {}).get("code") == -32600, r)
    c.send_raw(b"Content-Type: text/plain\r\n\r\n")
    r = c.wait_response(None)
    check("a message without Content-Length gets ParseError", r.get("error", {}).get("code") == -32700, r)
    r = c.request("textDocument/frobnicate", {})
    check("an unknown method gets MethodNotFound", r.get("error", {}).get("code") == -32601, r)
    r = c.request("textDocument/hover", {"textDocument": {"uri": 42}})
    check("bad params get InvalidParams", r.get("error", {}).get("code") == -32602, r)
    r = c.request("textDocument/hover", at(1, 1))
    check("the server still answers after all that", "result" in r, r)

    r = c.request("shutdown", None)
    check("shutdown is answered", "result" in r and r["result"] is None, r)
    c.notify("exit", None)
    try:
        code = c.proc.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        c.proc.kill()
        code = None
    check("exit after shutdown ends the server with code 0", code == 0, code)

    # A client that vanishes must not leave the server running.
    c2 = Client(server)
    c2.proc.stdin.close()
    try:
        code = c2.proc.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        c2.proc.kill()
        code = "hung"
    check("closing stdin ends the server (code 1: no shutdown)", code == 1, code)


if __name__ == "__main__":
    try:
        main()
    except (TimeoutError, EOFError) as e:
        results.append(("the session ran to the end", False))
        print("FAIL: " + str(e))
    passed = sum(1 for _, ok in results if ok)
    failed = len(results) - passed
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)
