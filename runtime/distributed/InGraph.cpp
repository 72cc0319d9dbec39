// In-graph replication: the towers a worker serves, and the client (the
// chief) that runs one per worker each step and pushes their average.
#include "runtime/distributed/InGraph.h"

#include "runtime/distributed/TensorMessage.h"
#include "runtime/plan/PlanTypes.h"

#include <cstring>
#include <map>
#include <thread>

namespace dtf::dist {

grpc::Status TowerService::RunTower(grpc::ServerContext *ctx,
                                    const rpc::TowerRequest *req,
                                    rpc::TowerReply *reply) {
  const TaskConfig &config = links_.config();
  if (auto bad = config.transport.admitOnly(*ctx, config.roster.workers[0].name,
                                            links_.self(), "run a tower");
      !bad.ok())
    return bad;
  if (req->caller().plan_fingerprint() != links_.config().planFingerprint)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        req->caller().task() + " runs a different plan than " +
                            links_.self());
  std::lock_guard<std::mutex> lock(mu_);
  int64_t step = 0, examples = 0;
  Status s = trainer_.runTowerStep(&step, &examples);
  if (!s.isOk())
    // A lost ps is the client's to recover (ABORTED); anything else
    // is this tower's failure.
    return grpc::Status(ps_.lastRecoverable() ? grpc::StatusCode::ABORTED
                                              : grpc::StatusCode::INTERNAL,
                        links_.self() + ": " + s.message());
  exec::Executor &e = trainer_.trainExecutor();
  reply->set_version(step);
  reply->set_examples(examples);
  for (int i = 0; i < trainer_.numMetrics(); ++i)
    reply->add_metrics(train::meanValue(e.fetch(i)));
  for (int i = trainer_.numMetrics(); i < e.numFetches(); ++i)
    toWire(e.fetchInfo(i).name, e.fetch(i), reply->add_sends());
  ++towers_;
  return grpc::Status::OK;
}
InGraphDriver::InGraphDriver(PsDriver &ps, Links &links)
    : ps_(ps), links_(links) {
  const Roster &roster = links.config().roster;
  for (size_t i = 1; i < roster.workers.size(); ++i) {
    Remote r;
    r.task = roster.workers[i];
    r.channel = links.config().transport.channel(r.task.address);
    r.stub = rpc::Worker::NewStub(r.channel);
    remotes_.push_back(std::move(r));
  }
}

Status InGraphDriver::connect() { return links_.connectPeers(remotes_); }

Status InGraphDriver::startStep(int64_t globalStep) {
  // The other towers run while this one does.
  for (Remote &r : remotes_) {
    r.reply = rpc::TowerReply();
    r.pending = std::async(std::launch::async, [this, &r, step = globalStep] {
      rpc::TowerRequest req;
      *req.mutable_caller() = links_.caller();
      req.set_step(step);
      grpc::ClientContext ctx;
      setDeadline(&ctx, kCallTimeout);
      return r.stub->RunTower(&ctx, req, &r.reply);
    });
  }
  return Status::ok();
}

Status InGraphDriver::afterStep(exec::Executor &e, int firstSend,
                                bool withhold) {
  (void)withhold; // in-graph training refuses the loss scale (Trainer)
  std::map<std::string, Tensor> sums;
  for (int i = firstSend; i < e.numFetches(); ++i) {
    const Tensor &t = e.fetch(i);
    Tensor copy = Tensor::allocate(t.dtype(), t.shape());
    std::memcpy(copy.rawData(), t.rawData(), t.byteSize());
    sums[e.fetchInfo(i).name] = std::move(copy);
  }
  Status failed = Status::ok();
  std::string lostPs; // a tower that lost a ps: the step is dropped
  for (Remote &r : remotes_) {
    grpc::Status st = r.pending.get();
    if (st.error_code() == grpc::StatusCode::ABORTED) {
      lostPs = st.error_message();
      continue;
    }
    if (!st.ok()) {
      if (failed.isOk())
        failed = errorStatus("tower on ", r.task.name, " at ", r.task.address,
                             " failed: ", describe(st));
      continue;
    }
    for (const rpc::WireTensor &w : r.reply.sends()) {
      auto it = sums.find(w.name());
      Tensor t;
      Status s = fromWire(w, &t);
      if (!s.isOk() || it == sums.end() ||
          t.numElements() != it->second.numElements())
        return errorStatus(r.task.name, " sent a tower value '",
                           plan::printable(w.name()), "' that does not fit");
      if (t.dtype() == DType::F32 && it->second.dtype() == DType::F32) {
        float *a = it->second.data<float>();
        const float *b = t.data<float>();
        for (int64_t j = 0; j < t.numElements(); ++j)
          a[j] += b[j];
      } else if (t.dtype() == DType::F64 && it->second.dtype() == DType::F64) {
        double *a = it->second.data<double>();
        const double *b = t.data<double>();
        for (int64_t j = 0; j < t.numElements(); ++j)
          a[j] += b[j];
      }
    }
  }
  DTF_RETURN_IF_ERROR(failed);
  if (!lostPs.empty()) {
    links_.say(lostPs + "; this step's update is dropped, and the next "
                        "pull waits for the ps tasks to come back");
    return Status::ok();
  }
  const double towers = double(remotes_.size() + 1);
  for (auto &[key, t] : sums)
    if (t.dtype() == DType::F32) {
      float *a = t.data<float>();
      for (int64_t j = 0; j < t.numElements(); ++j)
        a[j] = float(a[j] / towers);
    } else if (t.dtype() == DType::F64) {
      double *a = t.data<double>();
      for (int64_t j = 0; j < t.numElements(); ++j)
        a[j] /= towers;
    }
  return ps_.pushAndSave([&](const std::string &k) -> const Tensor * {
    auto it = sums.find(k);
    return it == sums.end() ? nullptr : &it->second;
  });
}

void InGraphDriver::shutdownTowers() {
  for (Remote &r : remotes_) {
    rpc::ShutdownRequest req;
    *req.mutable_caller() = links_.caller();
    req.set_reason("training finished");
    grpc::ClientContext ctx;
    setDeadline(&ctx, milliseconds(3000));
    rpc::ShutdownReply reply;
    (void)r.stub->Shutdown(&ctx, req, &reply);
  }
}
int serveTowers(train::Trainer &trainer, Links &links, PsDriver &ps,
                int replica) {
  const TaskConfig &config = links.config();
  const Roster &roster = config.roster;
  const std::string &self = links.self();
  TowerService service(trainer, links, ps);
  std::unique_ptr<grpc::Server> server;
  Status s =
      serveWorker(service, roster.workers[replica], config.transport, &server);
  if (!s.isOk())
    return fail(self, s, 4);
  links.say("serving in-graph towers on " + roster.workers[replica].address +
            " for " + roster.workers[0].name);
  // No silent wait: say so when the client stops asking, and give up
  // after --sync-timeout without a tower (the chief is gone).
  int64_t seen = -1;
  Clock::time_point lastTower = Clock::now();
  double lastSaid = 0;
  while (!service.shutdown() && !(config.stop && config.stop->load())) {
    std::this_thread::sleep_for(milliseconds(100));
    const int64_t towers = service.towers();
    if (towers != seen) {
      seen = towers;
      lastTower = Clock::now();
      lastSaid = 0;
      continue;
    }
    const double idle = secondsSince(lastTower);
    if (idle - lastSaid >= 30) {
      links.say("no tower asked of this worker for " +
                std::to_string(int(idle)) + " s; waiting for " +
                roster.workers[0].name);
      lastSaid = idle;
    }
    if (idle > config.syncTimeoutSeconds) {
      server->Shutdown(std::chrono::system_clock::now() + milliseconds(500));
      return fail(self,
                  errorStatus("the in-graph client ", roster.workers[0].name,
                              " at ", roster.workers[0].address,
                              " asked for no tower in ", int(idle),
                              " s (--sync-timeout); giving up"),
                  6);
    }
  }
  links.say("ran " + std::to_string(service.towers()) + " towers; done");
  server->Shutdown(std::chrono::system_clock::now() + milliseconds(500));
  return config.stop && config.stop->load() ? 130 : 0;
}

} // namespace dtf::dist
