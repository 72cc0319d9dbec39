// dtfc --emit=dot: each task's program of a plan as a Graphviz graph.
#include "compiler/plan/PlanDot.h"

#include "schema/PlanSchema.h"

#include <map>
#include <set>
#include <unordered_map>
#include <vector>

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
  // The worker side: the worker_step, or with model parallelism each stage
  // of a replica, its sends dashed to the other stages' recvs.
  const int span = checkReplicaSpan(plan).isOk() ? replicaSpan(plan) : 1;
  std::vector<Program> stages(1, plan.worker_step());
  std::vector<std::string> prefixes(1, "worker");
  if (span > 1) {
    stages.assign(size_t(span), Program());
    prefixes.clear();
    for (int k = 0; k < span; ++k) {
      if (!stageProgramFor(plan, k, &stages[size_t(k)]).isOk())
        return "digraph plan {}\n";
      prefixes.push_back("stage" + std::to_string(k));
    }
  }
  std::unordered_map<int32_t, std::string> workerProducer;
  std::map<std::string, std::string> sendNode, recvNode;
  for (size_t k = 0; k < stages.size(); ++k) {
    auto producer = emitProgram(
        stages[k], prefixes[k],
        span > 1 ? "worker_step stage " + std::to_string(k) +
                       " (task " + std::to_string(k) + " of each replica)"
                 : std::string("worker_step (every worker; in-graph: each tower)"),
        nullptr, out);
    if (k == 0)
      workerProducer = producer; // sends to the ps leave from stage 0
    for (int i = 0; i < stages[k].ops_size(); ++i) {
      const Op &op = stages[k].ops(i);
      if (op.name() == "dtf.send" || op.name() == "dtf.recv")
        (op.name() == "dtf.send" ? sendNode : recvNode)[op.attrs().at("key").s()] =
            prefixes[k] + "_" + std::to_string(i);
    }
  }
  for (const auto &[key, from] : sendNode)
    if (auto to = recvNode.find(key); to != recvNode.end())
      out += "  " + from + " -> " + to->second + " [style = dashed, color = blue, label = " +
             quote(key) + ", fontsize = 8];\n";
  const Program &worker = stages[0];
  // The ps side: one cluster per ps task when bound, else one for all.
  const Program &ps = plan.ps_update();
  const int numPs = placement && placement->numPs > 0 ? placement->numPs : 1;
  for (int k = 0; k < numPs; ++k) {
    const bool all = !placement || placement->numPs == 0;
    std::set<std::string> held;
    if (!all)
      for (const HeldTensor &h : heldBy(plan, *placement, k))
        held.insert(h.name);
    std::set<int> ops;
    for (int i = 0; i < ps.ops_size(); ++i)
      // The loss scale's guard (no held tensor) runs on every ps.
      if (all || held.count(ps.ops(i).held()) || ps.ops(i).held().empty())
        ops.insert(i);
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
      for (size_t k = 0; k < stages.size(); ++k)
        for (int j = 0; j < stages[k].ops_size(); ++j) {
          const Op &w = stages[k].ops(j);
          if (w.name() == "dtf.read_variable" &&
              w.attrs().at("name").s() == op.attrs().at("name").s())
            out += "  " + prefix + "_" + std::to_string(i) + " -> " +
                   prefixes[k] + "_" + std::to_string(j) +
                   " [style = dotted, label = \"pull\", fontsize = 8];\n";
        }
    }
  }
  return out + "}\n";
}

} // namespace dtf::plan
