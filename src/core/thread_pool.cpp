#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace deepinfer {

namespace {
size_t default_threads() {
  if (const char* env = std::getenv("DEEPINFER_THREADS")) {
    const long v = std::strtol(env, nullptr, 10);
    if (v > 0) return static_cast<size_t>(v);
  }
  return std::max<size_t>(1, std::thread::hardware_concurrency());
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Spins until done() or about 100 us have passed; true if done() became true. After a short pure
// spin it yields between polls, so a spinning thread gives its core to any other runnable thread
// (other processes too, e.g. parallel test runs) instead of starving it.
template <typename Done>
bool spin_until(Done done) {
  for (int i = 0; i < 256; ++i) {
    if (done()) return true;
    cpu_relax();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(100);
  while (std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    std::this_thread::yield();
  }
  return done();
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

size_t ThreadPool::inline_runs() const { return inline_runs_.load(); }

void ThreadPool::record_error(std::exception_ptr error) {
  // Called with mutex_ held.
  if (error && !job_error_) job_error_ = std::move(error);
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t min_chunk) {
  if (n == 0) return;
  const size_t chunks = std::min(size(), std::max<size_t>(1, n / std::max<size_t>(1, min_chunk)));
  if (chunks <= 1 || workers_.empty() || tls_in_parallel_region) {
    run_inline(fn, n, chunks);
    return;
  }
  if (busy_.exchange(true, std::memory_order_acquire)) {  // another caller's job is on the workers
    inline_runs_.fetch_add(1, std::memory_order_relaxed);
    run_inline(fn, n, chunks);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = chunks;
    job_error_ = nullptr;
    pending_.store(chunks - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  auto caller_error = run_chunk(fn, n, chunks, 0);
  // fn must outlive every worker's chunk, so wait even when chunk 0 threw.
  if (!spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  std::exception_ptr first;
  {
    std::lock_guard lock(mutex_);
    record_error(caller_error);
    first = job_error_;
    job_error_ = nullptr;
    job_ = nullptr;
  }
  busy_.store(false, std::memory_order_release);
  if (first) std::rethrow_exception(first);
}

void ThreadPool::worker_loop(size_t index) {
  uint64_t seen = 0;
  for (;;) {
    auto published = [&] {
      return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(published)) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, published);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    const std::function<void(size_t, size_t)>* fn;
    size_t n, chunks;
    {
      std::lock_guard lock(mutex_);
      seen = generation_.load(std::memory_order_acquire);
      fn = job_;
      n = job_n_;
      chunks = job_chunks_;
    }
    if (fn == nullptr || index >= chunks) continue;  // fewer chunks than workers this time
    if (auto error = run_chunk(*fn, n, chunks, index)) {
      // Hand over this thread's reference before the chunk counts as done: the caller may rethrow
      // and free the exception as soon as pending_ reaches 0 (TSan saw that free race the
      // worker's late release).
      std::lock_guard lock(mutex_);
      record_error(std::move(error));  // (leaves error null)
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mutex_);  // pairs with the caller's predicate check under mutex_
      done_.notify_one();
    }
  }
}

}  // namespace deepinfer
