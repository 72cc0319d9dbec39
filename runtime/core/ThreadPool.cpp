// ThreadPool: workers that take chunks of the current parallel-for job.
#include "runtime/core/ThreadPool.h"

#include <algorithm>

namespace dtf {

namespace {
// Set on worker threads, so that a nested parallelFor runs inline.
thread_local bool tInsideWorker = false;
} // namespace

ThreadPool::ThreadPool(int numThreads,
                       const std::function<void()> &onWorkerStart,
                       Workers workers)
    : kind_(workers) {
#ifndef _OPENMP
  kind_ = Workers::kOwn; // built without OpenMP: threads of the pool's own
#endif
  if (numThreads < 1)
    numThreads = std::max(1u, std::thread::hardware_concurrency());
  numThreads_ = numThreads;
  if (kind_ == Workers::kOpenMp)
    return;
  workers_.reserve(numThreads - 1);
  for (int i = 1; i < numThreads; ++i)
    workers_.emplace_back([this, onWorkerStart] {
      if (onWorkerStart)
        onWorkerStart();
      workerLoop();
    });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  workCv_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

void ThreadPool::runChunks(Job &job) {
  for (;;) {
    int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.numChunks)
      return;
    int64_t begin = c * job.chunk;
    job.fn(begin, std::min(job.n, begin + job.chunk));
    job.remaining.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::workerLoop() {
  tInsideWorker = true;
  uint64_t seen = 0;
  for (;;) {
    Job *job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      workCv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
      job = job_;
      if (!job)
        continue;
      ++job->users;
    }
    runChunks(*job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --job->users;
    }
    doneCv_.notify_all();
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t minChunk, RangeFn fn) {
  if (n <= 0)
    return;
  minChunk = std::max<int64_t>(minChunk, 1);
  int64_t numChunks =
      std::min<int64_t>(numThreads(), (n + minChunk - 1) / minChunk);
  if (numChunks <= 1 || tInsideWorker) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> submit(submitMutex_, std::try_to_lock);
  if (!submit.owns_lock()) {
    fn(0, n); // another job is in flight: do this one here
    return;
  }
  Job job{fn, n, (n + numChunks - 1) / numChunks, 0};
  job.numChunks = (n + job.chunk - 1) / job.chunk;
  job.remaining.store(job.numChunks);
#ifdef _OPENMP
  if (kind_ == Workers::kOpenMp) {
    // A thread per chunk at most. OpenMP may give the region fewer threads
    // than asked; the chunks are taken as they come, so any team size runs
    // them all. A parallelFor inside a chunk runs inline (tInsideWorker), as
    // on the own workers.
#pragma omp parallel num_threads(int(job.numChunks))
    {
      const bool outer = tInsideWorker;
      tInsideWorker = true;
      runChunks(job);
      tInsideWorker = outer;
    }
    return;
  }
#endif
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    ++generation_;
  }
  workCv_.notify_all();
  runChunks(job);
  std::unique_lock<std::mutex> lock(mutex_);
  job_ = nullptr; // no worker picks the job up from now on
  doneCv_.wait(lock,
               [&] { return job.remaining.load() == 0 && job.users == 0; });
}

} // namespace dtf
