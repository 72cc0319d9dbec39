// ThreadPool: intra-op parallelism, a parallel-for over an index range.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace dtf {

/// A non-owning reference to a callable `void(int64_t begin, int64_t end)`,
/// so that a parallel-for over a lambda allocates nothing.
class RangeFn {
public:
  template <typename F, typename = std::enable_if_t<
                            !std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(F &&f) // NOLINT: implicit on purpose, like std::function
      : object_(const_cast<void *>(static_cast<const void *>(&f))),
        call_([](void *o, int64_t b, int64_t e) {
          (*static_cast<std::remove_reference_t<F> *>(o))(b, e);
        }) {}
  void operator()(int64_t begin, int64_t end) const {
    call_(object_, begin, end);
  }

private:
  void *object_;
  void (*call_)(void *, int64_t, int64_t);
};

/// A fixed set of worker threads. parallelFor splits [0, n) into contiguous
/// chunks, runs them on the workers and on the calling thread, and returns
/// when all are done. One parallelFor runs at a time: a call made while
/// another is in flight (from another thread, or nested inside a chunk) runs
/// its whole range on the calling thread instead of waiting, so it can never
/// deadlock.
///
/// The workers are either threads of the pool's own or OpenMP's team: the
/// threads oneDNN's primitives run on. The intra-op pool of a training run
/// uses OpenMP's, so that a step's kernels and its oneDNN calls share one set
/// of threads. With two sets, each had to sleep between its jobs (a spinning
/// one took the core the other set needed next), so nearly every job paid a
/// wake-up; one set can spin briefly between jobs instead, which
/// bench/omp_waits.sh measures against passive waits (1.09x for the seed CNN
/// to 2.2x for the transformer, bench/results/omp_waits.md). The chunks are
/// the same either way, so results do not depend on the choice.
class ThreadPool {
public:
  enum class Workers { kOwn, kOpenMp };

  /// `numThreads` counts the calling thread: ThreadPool(2) starts one worker.
  /// Values below 1 mean std::thread::hardware_concurrency(). Each worker
  /// calls `onWorkerStart` (when given) before its first job: per-thread
  /// settings such as OpenMP's thread count, which a new thread does not
  /// inherit. With Workers::kOpenMp the pool starts no thread: a parallelFor
  /// is an OpenMP parallel region of numThreads threads (onWorkerStart is not
  /// called).
  explicit ThreadPool(int numThreads,
                      const std::function<void()> &onWorkerStart = {},
                      Workers workers = Workers::kOwn);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int numThreads() const { return numThreads_; }
  Workers workers() const { return kind_; }

  /// Runs fn(begin, end) over [0, n) in at most numThreads() chunks of at
  /// least `minChunk` indices each (one chunk, inline, when n is small).
  void parallelFor(int64_t n, int64_t minChunk, RangeFn fn);

private:
  struct Job {
    RangeFn fn;
    int64_t n;
    int64_t chunk;
    int64_t numChunks;
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> remaining{0};
    int users = 0; // workers inside runChunks; guarded by mutex_
  };

  void workerLoop();
  static void runChunks(Job &job);

  int numThreads_ = 1;
  Workers kind_ = Workers::kOwn;
  std::vector<std::thread> workers_;
  std::mutex submitMutex_; // one job at a time
  std::mutex mutex_;
  std::condition_variable workCv_;
  std::condition_variable doneCv_;
  Job *job_ = nullptr;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

/// parallelFor on `pool`, or the whole range inline when `pool` is null.
inline void parallelFor(ThreadPool *pool, int64_t n, int64_t minChunk,
                        RangeFn fn) {
  if (n <= 0)
    return;
  if (pool)
    pool->parallelFor(n, minChunk, fn);
  else
    fn(0, n);
}

} // namespace dtf
