// Membership: the live workers of a ps task, from their calls and a timeout.
#include "runtime/distributed/Membership.h"

#include <algorithm>

namespace dtf::dist::ps {

void Membership::expect(const std::vector<std::string> &workers,
                        Clock::time_point now) {
  for (const std::string &w : workers)
    workers_[w].last = now;
}

void Membership::seen(const std::string &worker, Clock::time_point now) {
  auto [it, fresh] = workers_.try_emplace(worker);
  Entry &e = it->second;
  e.last = std::max(e.last, now);
  // A finished worker stays finished (its last calls may come after
  // WorkerDone); one that left or timed out and calls again rejoins.
  if (fresh || e.state == State::kLeft || e.state == State::kTimedOut) {
    e.state = State::kLive;
    note(worker, "joined");
  }
}

void Membership::left(const std::string &worker) {
  auto it = workers_.find(worker);
  if (it != workers_.end() && it->second.state == State::kLive) {
    it->second.state = State::kLeft;
    note(worker, "left");
  }
}

void Membership::finished(const std::string &worker) {
  Entry &e = workers_[worker];
  e.state = State::kFinished;
}

std::vector<std::string> Membership::live(Clock::time_point now) {
  std::vector<std::string> names;
  const auto limit = std::chrono::duration<double>(timeout_);
  for (auto &[name, e] : workers_) {
    if (e.state == State::kLive && now - e.last > limit) {
      e.state = State::kTimedOut;
      note(name, "went silent (no call within the lease timeout)");
    }
    if (e.state == State::kLive)
      names.push_back(name);
  }
  return names;
}

int64_t Membership::replicasToAggregate(int64_t configured,
                                        Clock::time_point now) {
  const int64_t n = int64_t(live(now).size());
  return std::max<int64_t>(1, std::min(configured, n));
}

std::vector<std::string> Membership::takeChanges() {
  std::vector<std::string> out;
  out.swap(changes_);
  return out;
}

int64_t Membership::finishedCount() const {
  return std::count_if(workers_.begin(), workers_.end(), [](const auto &w) {
    return w.second.state == State::kFinished;
  });
}

void Membership::note(const std::string &worker, const char *what) {
  int64_t n = 0;
  for (const auto &[name, e] : workers_)
    n += e.state == State::kLive;
  changes_.push_back(worker + " " + what + ": " + std::to_string(n) +
                     " live worker" + (n == 1 ? "" : "s"));
}

} // namespace dtf::dist::ps
