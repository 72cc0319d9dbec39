#include "runtime/plan/PlanDot.h"

#include "runtime/plan/PlanTypes.h"

#include <map>
#include <set>
#include <unordered_map>

namespace dtf::plan {
namespace {

// A Graphviz string; each '\n' of `s` becomes a line break, every other
// byte is printed safely.
std::string quote(const std::string &s) {
  std::string out = "\"";
  size_t start = 0;
  for (;;) {
    size_t nl = s.find('\n', start);
    for (char c : printable(s.substr(start, nl == std::string::npos
                                                ? std::string::npos
                                                : nl - start))) {
      if (c == '"' || c == '\\')
        out += '\\';
      out += c;
    }
    if (nl == std::string::npos)
      break;
    out += "\\n";
    start = nl + 1;
  }
  return out + "\"";
}

std::string opLabel(const Op &op) {
  std::string label = op.name();
  auto name = op.attrs().find("name");
  if (name != op.attrs().end() && name->second.value_case() == AttrValue::kS)
    label += " " + name->second.s();
  if (!op.location().empty())
    label += "\n" + op.location();
  return label;
}

// The nodes and value edges of one program inside a cluster; `prefix` keeps
// node names apart. Returns the node of each value's producer.
std::unordered_map<int32_t, std::string>
emitProgram(const Program &p, const std::string &prefix,
            const std::string &label, const std::set<int> *only,
            std::string &out) {
  std::unordered_map<int32_t, std::string> producer;
  out += "  subgraph cluster_" + prefix + " {\n    label = " + quote(label) +
         ";\n";
  for (int i = 0; i < p.ops_size(); ++i) {
    if (only && !only->count(i))
      continue;
    const Op &op = p.ops(i);
    const std::string node = prefix + "_" + std::to_string(i);
    out += "    " + node + " [label = " + quote(opLabel(op)) + "];\n";
    for (int32_t in : op.inputs()) {
      auto it = producer.find(in);
      if (it != producer.end())
        out += "    " + it->second + " -> " + node + ";\n";
    }
    for (int32_t o : op.outputs())
      producer[o] = node;
  }
  out += "  }\n";
  return producer;
}

} // namespace

std::string planToDot(const Plan &plan, const Placement *placement) {
  std::string out = "digraph plan {\n  compound = true;\n  node [shape = box, "
                    "fontsize = 10];\n";
  const Program &worker = plan.worker_step();
  auto workerProducer =
      emitProgram(worker, "worker", "worker_step (every worker; in-graph: each tower)",
                  nullptr, out);
  // The ps side: one cluster per ps task when bound, else one for all.
  const Program &ps = plan.ps_update();
  const int numPs = placement && placement->numPs > 0 ? placement->numPs : 1;
  for (int k = 0; k < numPs; ++k) {
    std::set<int> ops;
    for (int i = 0; i < ps.ops_size(); ++i) {
      if (!placement || placement->numPs == 0) {
        ops.insert(i);
        continue;
      }
      std::string var;
      const Op &op = ps.ops(i);
      if (op.name() == "dtf.read_variable")
        var = op.attrs().at("name").s();
      else
        var = updatedVariable(ps, i);
      auto it = placement->psOf.find(var);
      if (it != placement->psOf.end() && it->second == k)
        ops.insert(i);
    }
    const std::string prefix = "ps" + std::to_string(k);
    const std::string label =
        placement && placement->numPs > 0
            ? "ps_update on /job:ps/task:" + std::to_string(k)
            : std::string("ps_update (each ps: the updates of its variables)");
    emitProgram(ps, prefix, label, &ops, out);
    // Sends: from the worker's producer to each receiving op on this ps.
    std::unordered_map<int32_t, std::string> keyOf;
    for (const Transfer &r : ps.recvs())
      keyOf[r.value()] = r.key();
    for (int i : ops) {
      const Op &op = ps.ops(i);
      for (int32_t in : op.inputs()) {
        auto key = keyOf.find(in);
        if (key == keyOf.end())
          continue;
        for (const Transfer &send : worker.sends())
          if (send.key() == key->second) {
            auto from = workerProducer.find(send.value());
            if (from != workerProducer.end())
              out += "  " + from->second + " -> " + prefix + "_" +
                     std::to_string(i) + " [style = dashed, label = " +
                     quote(send.key()) + ", fontsize = 8];\n";
          }
      }
    }
    // Pulls: from the ps's read of a variable to the worker's.
    for (int i : ops) {
      const Op &op = ps.ops(i);
      if (op.name() != "dtf.read_variable")
        continue;
      for (int j = 0; j < worker.ops_size(); ++j) {
        const Op &w = worker.ops(j);
        if (w.name() == "dtf.read_variable" &&
            w.attrs().at("name").s() == op.attrs().at("name").s())
          out += "  " + prefix + "_" + std::to_string(i) + " -> worker_" +
                 std::to_string(j) +
                 " [style = dotted, label = \"pull\", fontsize = 8];\n";
      }
    }
  }
  return out + "}\n";
}

} // namespace dtf::plan
