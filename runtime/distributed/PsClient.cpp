// PsClient: pulls and pushes sliced over the ps shards, and Wait on a push
// in flight (each ps's call and what a pull learns of it: PsClientCalls.cpp;
// --prefetch-pull's pull: PsClientPrefetch.cpp; lookups: PsClientLookup.cpp;
// the sparse sums and their cut per shard: SparseRows.cpp).
#include "runtime/distributed/PsClient.h"
#include "dtf/OpNames.h"

#include "runtime/distributed/TensorMessage.h"
#include "runtime/plan/PlanTypes.h"

#include <algorithm>
#include <set>

namespace dtf::dist {

namespace {
// The tables the step looks up on the ps, and who holds them.
void findTables(const plan::Plan &plan, const plan::Placement &placement,
                const plan::Program &reads, std::vector<PsLink> &ps,
                PsTables &tables) {
  for (const plan::Op &op : reads.ops()) {
    if (op.name() != dtf::ops::kPsGather || !op.attrs().count("variable"))
      continue;
    const std::string &name = op.attrs().at("variable").s();
    for (const plan::Variable &v : plan.variables()) {
      if (v.name() != name || v.type().shape().dims_size() < 1)
        continue;
      PsTable t;
      t.shards = placement.shardsOf(plan, name);
      t.rows = v.type().shape().dims(0);
      t.rowDims.assign(v.type().shape().dims().begin() + 1,
                       v.type().shape().dims().end());
      (void)plan::toDType(v.type().dtype(), &t.dtype);
      t.dynamic = v.dynamic().enabled();
      t.parts = std::max<int64_t>(v.partitions(), 1);
      for (const plan::PlacedShard &sh : t.shards)
        if (sh.ps >= 0 && size_t(sh.ps) < ps.size())
          ps[size_t(sh.ps)].servesLookups = true;
      tables[name] = std::move(t);
    }
  }
}
} // namespace

PsClient::PsClient(const plan::Plan &plan, const plan::Placement &placement,
                   Links &links, const plan::Program *reads)
    : links_(links) {
  if (links.config().compressPush.enabled())
    compressor_ = std::make_unique<PushCompressor>(links.config().compressPush);
  const Roster &roster = links.config().roster;
  std::set<std::string> averages;
  for (size_t k = 0; k < roster.ps.size(); ++k) {
    PsLink l;
    l.task = roster.ps[k];
    l.connectAgain(links.config().transport);
    if (const Transport &t = links.config().transport;
        t.sharedMemoryTo(l.task.address)) {
      // A predecessor of this task killed before it removed its regions
      // (the launcher restarts a dead worker) left them in the directory.
      if (k == 0)
        if (int n = removeStaleRegions(t.regionDirectory(), links.self()))
          links.say(links.self() + ": removed " + std::to_string(n) +
                    " shared-memory regions of a previous run of this task "
                    "in " +
                    t.regionDirectory());
      l.regions =
          std::make_shared<RegionPool>(t.regionDirectory(), links.self());
    }
    // What the worker_step reads (and the global step, which says when
    // the job is done); the eval program's moving averages on demand.
    std::set<std::string> read;
    for (const plan::Op &op : (reads ? *reads : plan.worker_step()).ops())
      if (op.name() == dtf::ops::kReadVariable)
        read.insert(op.attrs().at("name").s());
    for (const plan::Variable &v : plan.variables()) {
      if (v.role() == "global_step")
        read.insert(v.name());
      if (v.role() == "moving_average")
        averages.insert(v.name());
    }
    // An evaluation also needs what only other stages read each step.
    for (const plan::Op &op : plan.eval().ops())
      if (op.name() == dtf::ops::kReadVariable &&
          !read.count(op.attrs().at("name").s()))
        averages.insert(op.attrs().at("name").s());
    for (const plan::HeldTensor &h : plan::heldBy(plan, placement, int(k))) {
      if (read.count(h.variable))
        l.pull.push_back(h);
      else if (averages.count(h.variable))
        l.evalPull.push_back(h);
    }
    plan::Program p;
    if (plan::psProgramFor(plan, placement, int(k), &p).isOk())
      for (const plan::Transfer &r : p.recvs())
        l.keys.push_back(r);
    ps_.push_back(std::move(l));
  }
  for (size_t k = 0; k < ps_.size(); ++k)
    heldBy_.push_back(plan::heldBy(plan, placement, int(k)));
  findTables(plan, placement, reads ? *reads : plan.worker_step(), ps_,
             tables_);
}

Status PsClient::connect() { return links_.connectPeers(ps_); }

Status PsClient::pull(bool forEval, bool sync, int64_t *globalStep) {
  std::vector<PullOutcome> outcomes = linkStates();
  Status s = pullAll(*store_, forEval, sync, &outcomes);
  applyPulls(outcomes);
  if (!s.isOk())
    return s;
  if (const Tensor *t = store_->find("global_step"))
    *globalStep = t->data<int64_t>()[0];
  return Status::ok();
}

// A push in flight: what it carries, where it goes, and how it ended.
struct PsClient::Pending {
  ValueOf value;
  PushOptions options;
  SparseSums sparse;
  Status summed = Status::ok();
  std::vector<PsLink *> targets;
  // What each push says it was computed at, taken before a pull that runs
  // meanwhile moves it on.
  std::vector<std::pair<int64_t, int64_t>> at;
  std::vector<PushOutcome> outcomes;
  std::vector<std::thread> threads;
  bool firstHere = false; // the first target's push runs in wait()
};

PsClient::~PsClient() {
  dropPrefetch();
  for (auto &[request, p] : pending_)
    for (std::thread &t : p->threads)
      t.join();
}

PsClient::Request PsClient::startPush(const ValueOf &value,
                                      const PushOptions &options) {
  return start(value, options, /*firstHere=*/false);
}

Status PsClient::push(const ValueOf &value, const PushOptions &options,
                      PushResult *result) {
  return wait(start(value, options, /*firstHere=*/true), result);
}

PsClient::Request PsClient::start(const ValueOf &value,
                                  const PushOptions &options, bool firstHere) {
  auto p = std::make_unique<Pending>();
  Pending &push = *p;
  const Request request = nextRequest_++;
  pending_[request] = std::move(p);
  push.value = value;
  push.options = options;
  push.firstHere = firstHere;
  push.summed = sumSparseSends(ps_, value, &push.sparse);
  if (!push.summed.isOk())
    return request;
  for (PsLink &l : ps_)
    if (!l.keys.empty()) {
      push.targets.push_back(&l);
      push.at.emplace_back(l.pulledVersion, l.incarnation);
    }
  push.outcomes.resize(push.targets.size());
  if (pushHomes_.size() < ps_.size())
    pushHomes_.resize(ps_.size());
  // Every ps at once: a push waits for its ps to apply it (and runs beside
  // a pull the caller makes meanwhile: each link carries both ways).
  for (size_t i = firstHere ? 1 : 0; i < push.targets.size(); ++i)
    push.threads.emplace_back([this, &push, i] {
      push.outcomes[i].status =
          pushTo(*push.targets[i], push.at[i].first, push.at[i].second,
                 push.sparse, push.value, push.options, &push.outcomes[i]);
    });
  return request;
}

Status PsClient::wait(Request request, PushResult *result) {
  auto found = pending_.find(request);
  if (found == pending_.end())
    return errorStatus("no push ", request, " is in flight");
  std::unique_ptr<Pending> p = std::move(found->second);
  pending_.erase(found);
  if (!p->summed.isOk())
    return p->summed;
  if (p->firstHere && !p->targets.empty())
    p->outcomes[0].status =
        pushTo(*p->targets[0], p->at[0].first, p->at[0].second, p->sparse,
               p->value, p->options, &p->outcomes[0]);
  for (std::thread &t : p->threads)
    t.join();
  for (size_t i = 0; i < p->targets.size(); ++i)
    settlePlacements(*p->targets[i], p->options, &p->outcomes[i]);
  PushResult got;
  for (size_t i = 0; i < p->targets.size(); ++i) {
    const PushOutcome &o = p->outcomes[i];
    got.stale += o.stale;
    got.leaseLost |= o.leaseLost;
    // A pull that found the ps restored meanwhile forgot what was pushed.
    if (o.pushedAt != PushOutcome::kUnchanged &&
        p->targets[i]->incarnation == p->at[i].second)
      p->targets[i]->pushedAt = o.pushedAt;
  }
  if (result)
    *result = got;
  for (const PushOutcome &o : p->outcomes)
    if (!o.status.isOk()) {
      lastRecoverable_ = o.recoverable;
      return o.status;
    }
  return Status::ok();
}

void PsClient::forgetVersions() {
  for (PsLink &l : ps_) {
    l.incarnation = -1;
    l.pushedAt = -1;
  }
}

} // namespace dtf::dist
