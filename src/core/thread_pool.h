#pragma once
// A small fixed pool for data-parallel loops. parallel_for splits [0, n) into contiguous
// chunks, one per worker; the split depends only on n and the worker count, so results are
// reproducible run to run.
#include <condition_variable>
#include <cstddef>
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
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t min_chunk = 1);

  static ThreadPool& global();

 private:
  void worker_loop(size_t index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0, job_chunks_ = 0, generation_ = 0, pending_ = 0;
  bool stop_ = false;
};

}  // namespace deepinfer
