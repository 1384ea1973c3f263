#pragma once
// A small fixed pool for data-parallel loops. parallel_for splits [0, n) into contiguous
// chunks, one per worker; the split depends only on n and the worker count (never on timing or on
// whether the pool was free), so results are reproducible run to run.
//
// Concurrent callers: one job runs on the workers at a time. A caller that finds the pool busy
// runs its whole job inline on its own thread, over the same chunks in order, instead of waiting
// for the pool. Waiting would idle a thread whose core could work, and could deadlock when a chunk
// of the running job waits on the thread that is calling; inline keeps every caller progressing
// and, chunk by chunk, computes what the pool would have.
//
// Hand-off: workers and the waiting caller spin (with a pause instruction) for a short while
// before they block on a condition variable. A forward step issues hundreds of short parallel
// loops back to back; on a VM a blocked vCPU takes tens of microseconds to wake, which measured
// 9 ms per kjv decode step with 2 threads against 0.8 ms with 1 before the spin.
//
// Exceptions: a chunk that throws (on a worker or on the caller) does not stop the other chunks;
// once every chunk has finished, parallel_for rethrows the first exception thrown.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads = 0);  // 0 = hardware concurrency (or DEEPINFER_THREADS)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // fn(begin, end) is called on disjoint ranges covering [0, n); the caller thread takes part.
  // Safe to call from several threads at once; a call from inside a chunk runs inline.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t min_chunk = 1);

  // Calls that found the pool busy and ran inline (for tests and diagnostics).
  size_t inline_runs() const;

  static ThreadPool& global();

 private:
  void worker_loop(size_t index);
  void record_error(std::exception_ptr error);

  std::vector<std::thread> workers_;
  mutable std::mutex mutex_;
  std::condition_variable wake_, done_;
  // The job on the workers; valid while busy_.
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0, job_chunks_ = 0;
  std::atomic<uint64_t> generation_{0};  // bumped (under mutex_) each time a job is published
  std::atomic<size_t> pending_{0};       // worker chunks of the current job not yet finished
  std::exception_ptr job_error_;         // first exception of the job on the workers (mutex_)
  std::atomic<bool> busy_{false}, stop_{false};
  std::atomic<size_t> inline_runs_{0};
};

}  // namespace deepinfer
