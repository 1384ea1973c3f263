// ThreadPool: coverage of [0, n), concurrent callers, nested calls and exception propagation.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/thread_pool.h"

namespace deepinfer {
namespace {

using Ranges = std::set<std::pair<size_t, size_t>>;

// The (begin, end) ranges one parallel_for call hands out.
Ranges ranges_of(ThreadPool& pool, size_t n, size_t min_chunk = 1) {
  std::mutex m;
  Ranges out;
  pool.parallel_for(n, [&](size_t b, size_t e) {
    std::lock_guard lock(m);
    out.emplace(b, e);
  }, min_chunk);
  return out;
}

// The threads that run the chunks of parallel_for(4), each chunk held for `hold` so that no one
// thread can take them all.
std::set<std::thread::id> threads_of(ThreadPool& pool, std::chrono::milliseconds hold) {
  std::mutex m;
  std::set<std::thread::id> ids;
  pool.parallel_for(4, [&](size_t, size_t) {
    std::this_thread::sleep_for(hold);
    std::lock_guard lock(m);
    ids.insert(std::this_thread::get_id());
  });
  return ids;
}

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(4);
  for (size_t n : {1u, 2u, 3u, 4u, 5u, 7u, 64u, 1000u}) {
    for (size_t min_chunk : {1u, 3u, 100u}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, [&](size_t b, size_t e) {
        ASSERT_LT(b, e);
        for (size_t i = b; i < e; ++i) hits[i]++;
      }, min_chunk);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " min_chunk=" << min_chunk << " i=" << i;
    }
  }
}

TEST(ThreadPool, UsesWorkerThreads) {
  ThreadPool pool(4);
  EXPECT_EQ(threads_of(pool, std::chrono::milliseconds(20)).size(), 4u);
}

// Many threads hammer one pool; every call must see its own complete, correct result.
TEST(ThreadPool, ConcurrentCallersAllComplete) {
  ThreadPool pool(4);
  constexpr int kCallers = 6, kCalls = 300;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int call = 0; call < kCalls; ++call) {
        const size_t n = 1 + static_cast<size_t>((c * 131 + call * 17) % 97);
        std::vector<int> out(n, 0);
        pool.parallel_for(n, [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) out[i] += static_cast<int>(i) * c + call;
        });
        for (size_t i = 0; i < n; ++i)
          if (out[i] != static_cast<int>(i) * c + call) wrong++;
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

// A caller arriving while the pool is busy must finish on its own without waiting for the running
// job (which here waits for it: serialising would deadlock), over the same chunks.
TEST(ThreadPool, BusyPoolRunsSecondCallerInlineWithSameChunks) {
  ThreadPool pool(4);
  const Ranges free_split = ranges_of(pool, 10);
  ASSERT_EQ(free_split.size(), 4u);

  std::atomic<bool> first_started{false}, second_done{false};
  Ranges busy_split;
  std::thread first([&] {
    pool.parallel_for(4, [&](size_t b, size_t) {
      if (b != 0) return;
      first_started = true;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!second_done && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    });
  });
  while (!first_started) std::this_thread::yield();
  const size_t inline_before = pool.inline_runs();
  std::thread second([&] {
    busy_split = ranges_of(pool, 10);
    second_done = true;
  });
  second.join();
  first.join();
  EXPECT_TRUE(second_done.load()) << "second caller did not finish while the pool was busy";
  EXPECT_EQ(pool.inline_runs(), inline_before + 1);
  EXPECT_EQ(busy_split, free_split);
}

TEST(ThreadPool, NestedCallsRunInlineWithSameChunks) {
  ThreadPool pool(4);
  const Ranges free_split = ranges_of(pool, 10);
  std::mutex m;
  std::vector<Ranges> nested;
  pool.parallel_for(4, [&](size_t, size_t) {
    const auto caller = std::this_thread::get_id();
    std::mutex inner_m;
    Ranges inner;
    bool other_thread = false;
    pool.parallel_for(10, [&](size_t b, size_t e) {
      std::lock_guard lock(inner_m);
      inner.emplace(b, e);
      if (std::this_thread::get_id() != caller) other_thread = true;
    });
    EXPECT_FALSE(other_thread) << "a nested call left its thread";
    std::lock_guard lock(m);
    nested.push_back(inner);
  });
  ASSERT_EQ(nested.size(), 4u);
  for (const auto& r : nested) EXPECT_EQ(r, free_split);
}

// Runs a job of 4 chunks where `throwing` chunks throw; returns the message caught and how many
// chunks ran to their end.
std::pair<std::string, int> run_throwing(ThreadPool& pool, std::set<size_t> throwing) {
  std::atomic<int> finished{0};
  std::string caught;
  try {
    pool.parallel_for(4, [&](size_t b, size_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      finished++;
      if (throwing.count(b)) throw std::runtime_error("chunk " + std::to_string(b));
    });
  } catch (const std::runtime_error& e) {
    caught = e.what();
  }
  return {caught, finished.load()};
}

TEST(ThreadPool, WorkerExceptionReachesCallerAfterAllChunks) {
  ThreadPool pool(4);
  auto [message, finished] = run_throwing(pool, {2});  // chunk 2 of [0, 4) runs on a worker
  EXPECT_EQ(message, "chunk 2");
  EXPECT_EQ(finished, 4);
}

TEST(ThreadPool, CallerChunkExceptionWaitsForWorkers) {
  ThreadPool pool(4);
  auto [message, finished] = run_throwing(pool, {0});  // chunk 0 runs on the caller
  EXPECT_EQ(message, "chunk 0");
  EXPECT_EQ(finished, 4);
}

TEST(ThreadPool, FirstExceptionIsRethrown) {
  ThreadPool pool(4);
  std::atomic<bool> worker_threw{false};
  std::string caught;
  try {
    pool.parallel_for(4, [&](size_t b, size_t) {
      if (b == 3) {
        worker_threw = true;
        throw std::runtime_error("first");
      }
      if (b == 0) {  // the caller's chunk throws well after the worker's
        while (!worker_threw) std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        throw std::runtime_error("second");
      }
    });
  } catch (const std::runtime_error& e) {
    caught = e.what();
  }
  EXPECT_EQ(caught, "first");
}

TEST(ThreadPool, PoolStaysUsableAfterAnException) {
  ThreadPool pool(4);
  for (int round = 0; round < 20; ++round) {
    EXPECT_THROW(pool.parallel_for(8, [&](size_t b, size_t) {
      if (b == 0 || round % 2) throw std::logic_error("boom");
    }), std::logic_error);
    // The caller thread's chunk threw: it must not be left marked as inside a parallel region,
    // or later calls would silently run inline.
    EXPECT_GT(threads_of(pool, std::chrono::milliseconds(2)).size(), 1u) << "round " << round;
    EXPECT_EQ(ranges_of(pool, 100).size(), 4u);
  }
}

TEST(ThreadPool, InlineExceptionsPropagateToo) {
  ThreadPool single(1);
  EXPECT_THROW(single.parallel_for(5, [](size_t, size_t) { throw std::runtime_error("x"); }), std::runtime_error);
  ThreadPool pool(4);
  std::atomic<int> outer_caught{0};
  pool.parallel_for(4, [&](size_t, size_t) {
    try {
      pool.parallel_for(4, [](size_t b, size_t) {
        if (b == 1) throw std::runtime_error("nested");
      });
    } catch (const std::runtime_error&) {
      outer_caught++;
    }
  });
  EXPECT_EQ(outer_caught.load(), 4);
}

}  // namespace
}  // namespace deepinfer
