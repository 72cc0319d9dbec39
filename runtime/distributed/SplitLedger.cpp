// The split ledger of exactly-once data: leases, consumption, re-sends and
// the checkpointed form.
#include "runtime/distributed/SplitLedger.h"

#include <algorithm>
#include <array>
#include <map>

namespace dtf::dist::ps {
namespace {

// The first word of a saved ledger: its layout.
// Layout 2 adds the re-send counts (per unfinished epoch, and in all) after
// layout 1's consumed batches; layout 1 is still read.
constexpr int64_t kLedgerFormat = 2;

std::string str(int64_t v) { return std::to_string(v); }

} // namespace

std::string SplitLedger::configure(const LedgerShape &s) {
  if (s.examples <= 0 || s.batch <= 0 || s.batchesPerEpoch <= 0 ||
      s.totalBatches < 0)
    return "a lease must name the data's examples, batch and batches per "
           "epoch (got " +
           str(s.examples) + ", " + str(s.batch) + ", " +
           str(s.batchesPerEpoch) + ")";
  if (configured() &&
      (s.examples != shape_.examples || s.batch != shape_.batch ||
       s.batchesPerEpoch != shape_.batchesPerEpoch))
    return "the ledger cuts " + str(shape_.examples) + " examples into " +
           str(shape_.batchesPerEpoch) + " batches of " + str(shape_.batch) +
           " per epoch, the caller " + str(s.examples) + " into " +
           str(s.batchesPerEpoch) + " of " + str(s.batch) +
           " (the data or the batch changed since the checkpoint, or the "
           "workers read different data; --fresh starts a new ledger)";
  shape_ = s;
  return "";
}

void SplitLedger::toPending(int64_t batch, Reason why) {
  pending_.insert(batch);
  ++epochs_[batch / shape_.batchesPerEpoch].resent[why];
  ++resentTotal_[why];
}

void SplitLedger::lease(const std::string &task, uint64_t run, int max,
                        Clock::time_point now, std::vector<int64_t> *out) {
  out->clear();
  auto known = runs_.find(task);
  if (known != runs_.end() && known->second != run)
    leave(task); // it restarted: what its dead process held goes out again
  runs_[task] = run;
  touch(task, run, now);
  while (int(out->size()) < max) {
    int64_t b;
    if (!pending_.empty()) {
      b = *pending_.begin();
      pending_.erase(pending_.begin());
    } else if (next_ < shape_.totalBatches) {
      b = next_++;
    } else {
      break;
    }
    leased_[b] = {task, run, now};
    out->push_back(b);
  }
}

void SplitLedger::touch(const std::string &task, uint64_t run,
                        Clock::time_point now) {
  for (auto &[b, l] : leased_)
    if (l.task == task && l.run == run)
      l.at = now;
}

std::string SplitLedger::waitingFor() const {
  std::set<std::string> holders;
  for (const auto &[b, l] : leased_)
    holders.insert(l.task);
  std::string s = str(int64_t(leased_.size())) + " batches leased";
  if (!holders.empty()) {
    s += " to";
    for (const std::string &h : holders)
      s += " " + h;
  }
  if (!inUpdate_.empty())
    s += ", " + str(int64_t(inUpdate_.size())) + " in the open update";
  return s;
}

bool SplitLedger::holds(const std::string &task, uint64_t run,
                        const std::vector<int64_t> &batches) const {
  for (int64_t b : batches) {
    auto it = leased_.find(b);
    if (it == leased_.end() || it->second.task != task || it->second.run != run)
      return false;
  }
  return true;
}

void SplitLedger::markConsumed(int64_t b) {
  consumed_.insert(b);
  while (!consumed_.empty() && *consumed_.begin() == base_) {
    consumed_.erase(consumed_.begin());
    ++base_;
    if (base_ % shape_.batchesPerEpoch != 0)
      continue;
    // Every batch of an epoch is applied.
    const int64_t epoch = base_ / shape_.batchesPerEpoch - 1;
    const EpochCount &c = epochs_[epoch];
    const int64_t resent = c.resent[kDeadWorker] + c.resent[kDroppedGradient] +
                           c.resent[kLostUpdate];
    const int64_t examples =
        std::min(shape_.examples, shape_.batch * shape_.batchesPerEpoch);
    lines_.push_back("data epoch " + str(epoch) + " done: " + str(examples) +
                     " examples applied once each (" +
                     str(shape_.batchesPerEpoch) + " batches); " + str(resent) +
                     " batches re-sent: " + str(c.resent[kDeadWorker]) +
                     " of dead workers, " + str(c.resent[kDroppedGradient]) +
                     " of dropped gradients, " + str(c.resent[kLostUpdate]) +
                     " lost with a ps");
    epochs_.erase(epoch);
  }
}

void SplitLedger::consume(const std::vector<int64_t> &batches) {
  for (int64_t b : batches)
    if (leased_.erase(b))
      markConsumed(b);
}

void SplitLedger::join(const std::vector<int64_t> &batches) {
  for (int64_t b : batches)
    if (leased_.erase(b))
      inUpdate_.insert(b);
}

void SplitLedger::applyUpdate() {
  for (int64_t b : inUpdate_)
    markConsumed(b);
  inUpdate_.clear();
}

void SplitLedger::loseUpdate() {
  for (int64_t b : inUpdate_)
    toPending(b, kLostUpdate);
  inUpdate_.clear();
}

void SplitLedger::release(const std::string &task, uint64_t run,
                          const std::vector<int64_t> &batches, Reason why) {
  for (int64_t b : batches) {
    auto it = leased_.find(b);
    if (it == leased_.end() || it->second.task != task || it->second.run != run)
      continue;
    leased_.erase(it);
    toPending(b, why);
  }
}

void SplitLedger::leave(const std::string &task) {
  for (auto it = leased_.begin(); it != leased_.end();)
    if (it->second.task == task) {
      toPending(it->first, kDeadWorker);
      it = leased_.erase(it);
    } else {
      ++it;
    }
}

void SplitLedger::expire(Clock::time_point now, double seconds) {
  const auto limit = std::chrono::duration<double>(seconds);
  for (auto it = leased_.begin(); it != leased_.end();)
    if (now - it->second.at > limit) {
      toPending(it->first, kDeadWorker);
      it = leased_.erase(it);
    } else {
      ++it;
    }
}

std::vector<int64_t> SplitLedger::save() const {
  std::vector<int64_t> v = {kLedgerFormat,
                            shape_.examples,
                            shape_.batch,
                            shape_.batchesPerEpoch,
                            shape_.totalBatches,
                            base_,
                            int64_t(consumed_.size())};
  v.insert(v.end(), consumed_.begin(), consumed_.end());
  v.push_back(int64_t(epochs_.size()));
  for (const auto &[epoch, c] : epochs_) {
    v.push_back(epoch);
    v.insert(v.end(), c.resent, c.resent + kReasons);
  }
  v.insert(v.end(), resentTotal_, resentTotal_ + kReasons);
  return v;
}

// Layout 2's counts after the consumed batches (at `at`): checked whole.
static bool readCounts(const std::vector<int64_t> &saved, size_t at,
                       std::map<int64_t, std::array<int64_t, 3>> *epochs,
                       std::array<int64_t, 3> *totals) {
  if (at >= saved.size() || saved[at] < 0 ||
      saved.size() - at - 1 != size_t(saved[at]) * 4 + 3)
    return false;
  for (size_t i = at + 1; i + 3 < saved.size(); i += 4)
    (*epochs)[saved[i]] = {saved[i + 1], saved[i + 2], saved[i + 3]};
  std::copy(saved.end() - 3, saved.end(), totals->begin());
  return std::all_of(saved.begin() + int64_t(at), saved.end(),
                     [](int64_t x) { return x >= 0; });
}

std::string SplitLedger::restore(const std::vector<int64_t> &saved) {
  static_assert(kReasons == 3, "the saved counts are 3 per epoch");
  int64_t base = 0;
  std::set<int64_t> consumed;
  std::map<int64_t, std::array<int64_t, 3>> counts;
  std::array<int64_t, 3> totals = {};
  if (!saved.empty()) {
    const bool v1 = saved.size() >= 7 && saved[0] == 1 &&
                    saved[6] == int64_t(saved.size()) - 7;
    const bool v2 = saved.size() >= 7 && saved[0] == kLedgerFormat &&
                    saved[6] >= 0 && saved[6] <= int64_t(saved.size()) - 7 &&
                    readCounts(saved, size_t(7 + saved[6]), &counts, &totals);
    if ((!v1 && !v2) || saved[5] < 0)
      return "the checkpoint's data ledger is malformed (format " +
             str(saved[0]) + ", " + str(int64_t(saved.size())) + " words)";
    LedgerShape s{saved[1], saved[2], saved[3], saved[4]};
    std::string refused = configure(s);
    if (!refused.empty())
      return refused;
    base = saved[5];
    consumed.insert(saved.begin() + 7, saved.begin() + 7 + saved[6]);
    if (!consumed.empty() && *consumed.begin() <= base)
      return "the checkpoint's data ledger is malformed (a batch below its "
             "base)";
  }
  // Everything handed out past the restored ledger goes out again.
  const int64_t end = std::max(
      {next_, base, consumed.empty() ? int64_t(0) : *consumed.rbegin() + 1});
  pending_.clear();
  leased_.clear();
  inUpdate_.clear();
  runs_.clear();
  base_ = base;
  consumed_ = std::move(consumed);
  next_ = end;
  // The re-send counts go on from the checkpoint's (a ps 0 that restarted
  // starts from them; one that restores in place keeps any higher ones of
  // its own), then the batches lost with the ps are counted on top.
  std::map<int64_t, EpochCount> epochs;
  for (const auto &[epoch, c] : counts)
    for (int r = 0; r < kReasons; ++r)
      epochs[epoch].resent[r] = std::max(c[size_t(r)], epochs_.count(epoch)
                                                           ? epochs_[epoch].resent[r]
                                                           : 0);
  for (int r = 0; r < kReasons; ++r)
    resentTotal_[r] = std::max(resentTotal_[r], totals[size_t(r)]);
  epochs_ = std::move(epochs);
  if (configured())
    for (int64_t b = base_; b < next_; ++b)
      if (!consumed_.count(b))
        toPending(b, kLostUpdate);
  return "";
}

std::vector<std::string> SplitLedger::takeEpochLines() {
  std::vector<std::string> lines;
  lines.swap(lines_);
  return lines;
}

} // namespace dtf::dist::ps
