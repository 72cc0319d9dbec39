// In-graph replication: the chief is the client, running its own tower and
// asking every other worker for one per step; the towers' sends are averaged
// and pushed once. The other workers only serve towers.
#pragma once

#include "runtime/distributed/BetweenGraph.h"

#include <future>
#include <mutex>

namespace dtf::dist {

/// A worker that serves towers to the in-graph client.
class TowerService final : public rpc::Worker::Service {
public:
  TowerService(train::Trainer &trainer, Links &links, PsDriver &ps)
      : trainer_(trainer), links_(links), ps_(ps) {}

  grpc::Status GetStatus(grpc::ServerContext *ctx, const rpc::StatusRequest *,
                         rpc::StatusReply *reply) override {
    std::string who;
    if (auto bad = links_.config().transport.admitTask(*ctx, &who); !bad.ok())
      return bad;
    reply->set_task(links_.self());
    reply->set_plan_fingerprint(links_.config().planFingerprint);
    reply->set_initialized(true);
    return grpc::Status::OK;
  }

  grpc::Status RunTower(grpc::ServerContext *ctx, const rpc::TowerRequest *req,
                        rpc::TowerReply *reply) override;

  // Only the in-graph client (the chief) runs towers and stops them.
  grpc::Status Shutdown(grpc::ServerContext *ctx, const rpc::ShutdownRequest *,
                        rpc::ShutdownReply *) override {
    const TaskConfig &config = links_.config();
    if (auto bad =
            config.transport.admitOnly(*ctx, config.roster.workers[0].name,
                                       links_.self(), "stop its towers");
        !bad.ok())
      return bad;
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
    return grpc::Status::OK;
  }

  bool shutdown() {
    std::lock_guard<std::mutex> lock(mu_);
    return shutdown_;
  }
  int64_t towers() {
    std::lock_guard<std::mutex> lock(mu_);
    return towers_;
  }

private:
  train::Trainer &trainer_;
  Links &links_;
  PsDriver &ps_;
  std::mutex mu_;
  bool shutdown_ = false;
  int64_t towers_ = 0;
};

/// The in-graph client (the chief): its own tower plus one per other
/// worker, the towers' sends averaged and pushed once.
class InGraphDriver : public train::StepDriver {
public:
  InGraphDriver(PsDriver &ps, Links &links);

  Status connect();

  Status beforeStep(int64_t *globalStep, bool *done) override {
    return ps_.beforeStep(globalStep, done);
  }
  Status startStep(int64_t globalStep) override;

  Status afterStep(exec::Executor &e, int firstSend, bool withhold) override;

  Status beforeEval() override { return ps_.beforeEval(); }

  void shutdownTowers();

private:
  struct Remote {
    TaskRef task;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<rpc::Worker::Stub> stub;
    rpc::TowerReply reply;
    std::future<grpc::Status> pending;
  };
  PsDriver &ps_;
  Links &links_;
  std::vector<Remote> remotes_;
};

/// A worker other than the chief: serves towers until the client says the
/// job is done (or is gone for --sync-timeout); returns the exit code.
int serveTowers(train::Trainer &trainer, Links &links, PsDriver &ps,
                int replica);

} // namespace dtf::dist
