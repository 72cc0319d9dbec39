// Scheduling: the dependencies of a program's nodes (per resource, in
// program order), and a step run concurrently on the inter-op pool, each
// node as soon as those it waits for are done.
#include "runtime/exec/Executor.h"
#include "runtime/exec/ExecutorNode.h"

#include "runtime/core/ThreadPool.h"

#include <algorithm>
#include <atomic>

namespace dtf::exec {

namespace {
// Process-wide, so that no two executors' variables share an id and no
// version repeats.
std::atomic<uint64_t> &variableVersionCounter() {
  static std::atomic<uint64_t> counter{1};
  return counter;
}
} // namespace

void Executor::wireVersions(const std::vector<std::vector<int>> &roots,
                            const std::vector<bool> &written) {
  const int numValues = static_cast<int>(slots_.size());
  const size_t count = size_t(numVariables_ + numValues);
  if (numVersions_ != count) {
    versions_ = std::make_unique<VariableVersion[]>(count);
    numVersions_ = count;
    for (size_t r = 0; r < count; ++r)
      versions_[r].id = variableVersionCounter().fetch_add(1);
    renewAllVersions();
  }
  // A value has a version of its own when nothing can change it within the
  // step once made: it shares no other resource's buffer (not a reshape of
  // a variable, not an update's aliasing result) and no op updates it in
  // place. A variable read has its variable's version; the rest have none.
  auto versionOf = [&](int v) -> const VariableVersion * {
    if (valueVariable_[size_t(v)] >= 0)
      return &versions_[size_t(valueVariable_[size_t(v)])];
    const int own = numVariables_ + v;
    if (roots[size_t(v)].size() == 1 && roots[size_t(v)][0] == own &&
        !written[size_t(own)])
      return &versions_[size_t(own)];
    return nullptr;
  };
  for (Node &node : nodes_) {
    if (node.kind != NodeKind::kKernel || !node.cpuOp)
      continue;
    std::vector<const VariableVersion *> versions(node.inputs.size(), nullptr);
    for (size_t k = 0; k < node.inputs.size(); ++k)
      versions[k] = versionOf(node.inputs[k]);
    node.ctx->setInputVersions(std::move(versions));
  }
}

void Executor::renewAllVersions() {
  const uint64_t base = variableVersionCounter().fetch_add(numVersions_);
  for (size_t r = 0; r < numVersions_; ++r)
    versions_[r].version.store(base + r, std::memory_order_release);
}

void Executor::bumpVersions(const Node &node) {
  for (int k = 0; k < node.updated && k < int(node.inputs.size()); ++k)
    if (const int r = valueVariable_[size_t(node.inputs[size_t(k)])]; r >= 0)
      versions_[size_t(r)].version.store(
          variableVersionCounter().fetch_add(1), std::memory_order_release);
}

// Resources are variables (0..numVariables_-1) and the values the nodes
// produce (numVariables_ + dense index). Walking the nodes in program order,
// each node waits for the last writer of every resource it reads or writes,
// and a writer also for every reader since the previous write: program order
// per resource, which is all that any result depends on.
void Executor::planSchedule() {
  const int numNodes = static_cast<int>(nodes_.size());
  const int numValues = static_cast<int>(slots_.size());
  const int numResources = numVariables_ + numValues;
  // The resources whose buffers a value may share.
  std::vector<std::vector<int>> roots(numValues);
  for (int v = 0; v < numValues; ++v)
    if (valueVariable_[v] >= 0)
      roots[v].push_back(valueVariable_[v]);
  std::vector<int> lastWriter(numResources, -1);
  std::vector<std::vector<int>> readers(numResources);
  std::vector<std::vector<int>> preds(numNodes);
  std::vector<int> reads, writes;
  // The resources some op updates in place (not merely makes).
  std::vector<bool> updatedInPlace(size_t(numResources), false);
  for (int n = 0; n < numNodes; ++n) {
    Node &node = nodes_[n];
    reads.clear();
    writes.clear();
    for (int v : node.inputs)
      reads.insert(reads.end(), roots[v].begin(), roots[v].end());
    for (int k = 0; k < node.updated && k < int(node.inputs.size()); ++k)
      for (int r : roots[node.inputs[k]]) {
        writes.push_back(r);
        updatedInPlace[size_t(r)] = true;
      }
    for (int v : node.outputs) {
      writes.push_back(numVariables_ + v);
      roots[v].assign(1, numVariables_ + v);
      if (node.mayAlias)
        roots[v].insert(roots[v].end(), reads.begin(), reads.end());
      std::sort(roots[v].begin(), roots[v].end());
      roots[v].erase(std::unique(roots[v].begin(), roots[v].end()),
                     roots[v].end());
    }
    std::vector<int> &p = preds[n];
    if (node.guarded)
      p.push_back(guardNode_);
    for (int r : reads) {
      if (lastWriter[r] >= 0)
        p.push_back(lastWriter[r]);
      readers[r].push_back(n);
    }
    for (int r : writes) {
      if (lastWriter[r] >= 0)
        p.push_back(lastWriter[r]);
      for (int m : readers[r])
        if (m != n)
          p.push_back(m);
      readers[r].clear();
      lastWriter[r] = n;
    }
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }

  // A program where every node waits for the one before it is a chain:
  // nothing could overlap, so it runs on the sequential path.
  bool chain = true;
  for (int n = 0; n < numNodes; ++n) {
    nodes_[n].successors.clear();
    nodes_[n].numPredecessors = static_cast<int>(preds[n].size());
    if (n > 0 && !std::binary_search(preds[n].begin(), preds[n].end(), n - 1))
      chain = false;
  }
  for (int n = 0; n < numNodes; ++n)
    for (int m : preds[n])
      nodes_[m].successors.push_back(n);
  // A stage with recvs runs in program order: that order is what makes the
  // stages of a replica deadlock-free.
  // GPU ops share one stream per device: the step runs in program order.
  concurrent_ = options_.interOpPool &&
                options_.interOpPool->numThreads() > 1 && !chain && !hasRecv_ &&
                !hasGpu_;
  Schedule &s = *schedule_;
  s.ready.clear();
  s.ready.reserve(numNodes);
  s.pending.assign(numNodes, 0);
  wireVersions(roots, updatedInPlace);
}

Status Executor::runConcurrently(uint64_t step) {
  Schedule &s = *schedule_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.step = step;
    s.failed = false;
    s.error = Status::ok();
    s.running = 0;
    s.remaining = nodes_.size();
    s.ready.clear();
    // Pushed in reverse so that the stack hands out the roots in program
    // order.
    for (size_t n = nodes_.size(); n-- > 0;) {
      s.pending[n] = nodes_[n].numPredecessors;
      if (s.pending[n] == 0)
        s.ready.push_back(static_cast<int>(n));
    }
  }
  ThreadPool &pool = *options_.interOpPool;
  // One chunk per thread, each taking ready nodes until the step is done.
  // A chunk that finds the pool busy runs on this thread, where it finds the
  // work already done: one participant alone always finishes a step.
  pool.parallelFor(pool.numThreads(), 1, [this](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      participate(*schedule_);
  });
  if (s.failed)
    return s.error;
  bool replan = false;
  for (size_t n = 0; n < nodes_.size(); ++n)
    replan |= noteAliasing(static_cast<int>(n));
  if (replan)
    planSchedule();
  return Status::ok();
}

void Executor::participate(Schedule &s) {
  std::unique_lock<std::mutex> lock(s.mutex);
  for (;;) {
    // Done: every node ran, or one failed and those in flight have finished.
    auto done = [&] {
      return s.remaining == 0 || (s.failed && s.running == 0);
    };
    while (!done() && (s.ready.empty() || s.failed)) {
      ++s.waiting;
      s.cv.wait(lock);
      --s.waiting;
    }
    if (done())
      break;
    const int n = s.ready.back();
    s.ready.pop_back();
    ++s.running;
    lock.unlock();
    Status st = timedRunNode(nodes_[n], s.step);
    lock.lock();
    --s.running;
    --s.remaining;
    if (!st.isOk() && !s.failed) {
      s.failed = true; // the first error wins; no new node starts
      s.error = std::move(st);
    }
    if (!s.failed)
      for (int m : nodes_[n].successors)
        if (--s.pending[m] == 0)
          s.ready.push_back(m);
    // This thread takes one ready node next; the others are for waiting
    // threads. At the end every waiter must leave.
    if (s.waiting > 0) {
      if (done())
        s.cv.notify_all();
      else if (!s.failed)
        for (size_t k = 1; k < s.ready.size() && int(k) <= s.waiting; ++k)
          s.cv.notify_one();
    }
  }
}

} // namespace dtf::exec
