#include "core/thread_pool.h"

#include <algorithm>
#include <cstdlib>
#include <exception>

namespace deepinfer {

namespace {
size_t default_threads() {
  if (const char* env = std::getenv("DEEPINFER_THREADS")) {
    const long v = std::strtol(env, nullptr, 10);
    if (v > 0) return static_cast<size_t>(v);
  }
  return std::max<size_t>(1, std::thread::hardware_concurrency());
}
}  // namespace

ThreadPool::ThreadPool(size_t threads) {
  if (threads == 0) threads = default_threads();
  for (size_t i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

// Set while a thread runs a chunk: a nested parallel_for then runs inline instead of deadlocking.
thread_local bool tls_in_parallel_region = false;

static void run_chunk(const std::function<void(size_t, size_t)>& fn, size_t n, size_t chunks, size_t i) {
  const size_t begin = n * i / chunks, end = n * (i + 1) / chunks;
  if (begin >= end) return;
  tls_in_parallel_region = true;
  fn(begin, end);
  tls_in_parallel_region = false;
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t min_chunk) {
  if (n == 0) return;
  const size_t chunks = std::min(size(), std::max<size_t>(1, n / std::max<size_t>(1, min_chunk)));
  if (chunks <= 1 || workers_.empty() || tls_in_parallel_region) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  wake_.notify_all();
  run_chunk(fn, n, chunks, 0);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(size_t index) {
  size_t seen = 0;
  for (;;) {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= job_chunks_) continue;  // fewer chunks than workers this time
    const auto* fn = job_;
    const size_t n = job_n_, chunks = job_chunks_;
    lock.unlock();
    run_chunk(*fn, n, chunks, index);
    lock.lock();
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace deepinfer
