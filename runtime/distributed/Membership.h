// Membership: which workers a ps task counts as live (docs/elastic.md,
// "Workers join and leave"). A worker is live from its first call to this ps
// until it leaves (WorkerDone with `leaving`), finishes (WorkerDone), or
// makes no call for the timeout (a worker killed with kill -9); a call that
// this ps holds open (a parked sync pull) counts as a call all the while.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dtf::dist::ps {

class Membership {
public:
  using Clock = std::chrono::steady_clock;

  explicit Membership(double timeoutSeconds) : timeout_(timeoutSeconds) {}

  /// The workers the job starts with: live from `now` as if they had
  /// called (so that the first sync updates wait for them), gone after the
  /// timeout if they never call.
  void expect(const std::vector<std::string> &workers, Clock::time_point now);
  /// `worker` called at `now`: live (again, after a timeout or a leave: a
  /// worker rejoins by calling).
  void seen(const std::string &worker, Clock::time_point now);
  /// `worker` left the job before its end (scaled down): not live at once.
  void left(const std::string &worker);
  /// `worker` finished its steps: not live, and counted as done.
  void finished(const std::string &worker);

  /// The live workers at `now`, in name order. Says (once per change) who
  /// joined and who went, through takeChanges.
  std::vector<std::string> live(Clock::time_point now);
  /// The sync rule: an update averages min(configured, live workers)
  /// gradients, at least 1, so that no update waits for a worker that is
  /// gone; never more than configured.
  int64_t replicasToAggregate(int64_t configured, Clock::time_point now);
  /// Lines about the workers that joined or went since the last call
  /// ("worker.3 joined: 3 live workers").
  std::vector<std::string> takeChanges();

  int64_t finishedCount() const;

private:
  enum class State { kLive, kLeft, kFinished, kTimedOut };
  struct Entry {
    State state = State::kLive;
    Clock::time_point last;
  };
  void note(const std::string &worker, const char *what);

  double timeout_;
  std::map<std::string, Entry> workers_;
  std::vector<std::string> changes_;
};

} // namespace dtf::dist::ps
