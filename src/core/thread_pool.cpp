#include "core/thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace deepinfer {

namespace {
size_t default_threads() {
  if (const char* env = std::getenv("DEEPINFER_THREADS")) {
    const long v = std::strtol(env, nullptr, 10);
    if (v > 0) return static_cast<size_t>(v);
  }
  return std::max<size_t>(1, std::thread::hardware_concurrency());
}

// Set while a thread runs a chunk: a nested parallel_for then runs inline instead of deadlocking.
thread_local bool tls_in_parallel_region = false;

// Runs chunk i of `chunks`; returns what it threw (null if nothing). The flag is restored on throw.
std::exception_ptr run_chunk(const std::function<void(size_t, size_t)>& fn, size_t n, size_t chunks, size_t i) {
  const size_t begin = n * i / chunks, end = n * (i + 1) / chunks;
  if (begin >= end) return nullptr;
  const bool outer = tls_in_parallel_region;
  tls_in_parallel_region = true;
  std::exception_ptr error;
  try {
    fn(begin, end);
  } catch (...) {
    error = std::current_exception();
  }
  tls_in_parallel_region = outer;
  return error;
}

// All chunks on this thread, in order; every chunk runs, the first exception is rethrown after.
void run_inline(const std::function<void(size_t, size_t)>& fn, size_t n, size_t chunks) {
  std::exception_ptr first;
  for (size_t i = 0; i < chunks; ++i) {
    auto error = run_chunk(fn, n, chunks, i);
    if (error && !first) first = error;
  }
  if (first) std::rethrow_exception(first);
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

size_t ThreadPool::inline_runs() const {
  std::lock_guard lock(mutex_);
  return inline_runs_;
}

void ThreadPool::record_error(std::exception_ptr error) {
  // Called with mutex_ held.
  if (error && !job_error_) job_error_ = error;
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t min_chunk) {
  if (n == 0) return;
  const size_t chunks = std::min(size(), std::max<size_t>(1, n / std::max<size_t>(1, min_chunk)));
  if (chunks <= 1 || workers_.empty() || tls_in_parallel_region) {
    run_inline(fn, n, chunks);
    return;
  }
  bool took_pool = false;
  {
    std::lock_guard lock(mutex_);
    if (busy_) {
      ++inline_runs_;
    } else {
      took_pool = busy_ = true;
      job_ = &fn;
      job_n_ = n;
      job_chunks_ = chunks;
      pending_ = chunks - 1;
      job_error_ = nullptr;
      ++generation_;
    }
  }
  if (!took_pool) {  // another caller's job is on the workers (see the header)
    run_inline(fn, n, chunks);
    return;
  }
  wake_.notify_all();
  auto caller_error = run_chunk(fn, n, chunks, 0);
  std::exception_ptr first;
  {
    std::unique_lock lock(mutex_);
    record_error(caller_error);
    // fn must outlive every worker's chunk, so wait even when chunk 0 threw.
    done_.wait(lock, [this] { return pending_ == 0; });
    first = job_error_;
    job_error_ = nullptr;
    job_ = nullptr;
    busy_ = false;
  }
  if (first) std::rethrow_exception(first);
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
    auto error = run_chunk(*fn, n, chunks, index);
    lock.lock();
    record_error(error);
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace deepinfer
