// SyncAggregator: sums, averages and traces the sync updates of a ps task.
#include "runtime/distributed/SyncAggregator.h"

#include <algorithm>
#include <cstring>

namespace dtf::dist::ps {
namespace {

template <typename T> void addInto(Tensor &sum, const Tensor &t) {
  T *a = sum.data<T>();
  const T *b = t.data<T>();
  for (int64_t i = 0; i < sum.numElements(); ++i)
    a[i] += b[i];
}

} // namespace

bool SyncAggregator::joined(const std::string &who) const {
  return std::find(contributors_.begin(), contributors_.end(), who) !=
         contributors_.end();
}

void SyncAggregator::add(std::vector<Tensor> &values, const std::string &who,
                         const std::vector<bool> &concat) {
  if (sums_.empty()) {
    sums_ = std::move(values);
    contributors_.clear();
  } else {
    for (size_t k = 0; k < sums_.size() && k < concat.size(); ++k)
      if (!values[k].defined())
        continue; // withheld: its replica's loss-scale flag is false
      else if (!sums_[k].defined())
        sums_[k] = std::move(values[k]);
      else if (concat[k])
        sums_[k] = concatRows(sums_[k], values[k]);
      else
        accumulate(sums_[k], values[k]);
  }
  contributors_.push_back(who);
}

std::vector<Tensor> &SyncAggregator::average() {
  for (Tensor &t : sums_)
    scale(t, 1.0 / double(std::max<size_t>(contributors_.size(), 1)));
  return sums_;
}

void SyncAggregator::applied(int64_t at) {
  short_ += int64_t(contributors_.size()) < replicas_;
  if (!tracePath_.empty() && !trace_)
    trace_ = std::fopen(tracePath_.c_str(), "a");
  if (trace_) {
    std::fprintf(trace_, "update %lld averaged %zu gradients computed at %lld:",
                 (long long)(at + 1), contributors_.size(), (long long)at);
    for (const std::string &c : contributors_)
      std::fprintf(trace_, " %s", c.c_str());
    std::fputc('\n', trace_);
    std::fflush(trace_);
  }
  clear();
}

void SyncAggregator::clear() {
  sums_.clear();
  contributors_.clear();
}

std::string SyncAggregator::waitingFor(
    int64_t version, int64_t needed,
    const std::vector<std::string> &live) const {
  std::string s = std::to_string(contributors_.size()) + " of " +
                  std::to_string(needed) + " gradients for update " +
                  std::to_string(version + 1) + "; not yet from:";
  for (const std::string &w : live)
    if (!joined(w))
      s += " " + w;
  return s;
}

Tensor SyncAggregator::concatRows(const Tensor &a, const Tensor &b) {
  std::vector<int64_t> dims = a.shape();
  if (dims.empty() || a.dtype() != b.dtype() || b.rank() != a.rank())
    return a;
  dims[0] += b.shape()[0];
  Tensor out = Tensor::allocate(a.dtype(), dims);
  if (a.byteSize())
    std::memcpy(out.rawData(), a.rawData(), a.byteSize());
  if (b.byteSize())
    std::memcpy(static_cast<char *>(out.rawData()) + a.byteSize(), b.rawData(),
                b.byteSize());
  return out;
}

void SyncAggregator::accumulate(Tensor &sum, const Tensor &t) {
  if (sum.dtype() != t.dtype() || sum.numElements() != t.numElements())
    return;
  if (t.dtype() == DType::F32)
    addInto<float>(sum, t);
  else if (t.dtype() == DType::F64)
    addInto<double>(sum, t);
  else if (t.dtype() == DType::Bool)
    // mixed_float16's flag: the update is finite only if every replica's
    // gradients were (one non-finite contribution skips it whole).
    for (int64_t i = 0; i < sum.numElements(); ++i)
      sum.data<bool>()[i] = sum.data<bool>()[i] && t.data<bool>()[i];
  // Integer operands (assign_add's 1) are the same from every replica:
  // the first one's stands.
}

void SyncAggregator::scale(Tensor &t, double f) {
  if (!t.defined())
    return;
  if (t.dtype() == DType::F64) {
    double *a = t.data<double>();
    for (int64_t i = 0; i < t.numElements(); ++i)
      a[i] *= f;
    return;
  }
  if (t.dtype() != DType::F32)
    return;
  float *a = t.data<float>();
  for (int64_t i = 0; i < t.numElements(); ++i)
    a[i] = float(a[i] * f);
}

} // namespace dtf::dist::ps
