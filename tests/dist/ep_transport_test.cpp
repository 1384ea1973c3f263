// The in-process transport: payloads reach the right rank in every round, and a rank that never
// arrives, fails, or calls another collective gives the others one line naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "core/error.h"
#include "dist/ep_transport.h"

namespace deepinfer::dist {
namespace {

Bytes payload(int src, int dst, int round, size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((src * 31 + dst * 7 + round * 13 + i) & 0xff);
  return b;
}

// Runs fn(rank, transport) on world threads; returns each rank's error message ("" when none).
template <typename Fn>
std::vector<std::string> run_ranks(LocalHub& hub, Fn fn) {
  std::vector<std::string> errors(static_cast<size_t>(hub.world_size()));
  std::vector<std::thread> threads;
  for (int r = 0; r < hub.world_size(); ++r)
    threads.emplace_back([&, r] {
      auto t = hub.transport(r);
      try {
        fn(r, *t);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

TEST(EpTransport, AllToAllDeliversEveryPayloadOverManyRounds) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int world : {1, 2, 4, 7}) {
    LocalHub hub(world);
    // Sizes differ per (round, src, dst), zero included, so no round can pass on stale buffers.
    auto size_of = [&](int round, int src, int dst) {
      return static_cast<size_t>(std::mt19937(seed + static_cast<uint32_t>(round * 1000 + src * 10 + dst))() % 97);
    };
    auto errors = run_ranks(hub, [&](int r, EpTransport& t) {
      for (int round = 0; round < 300; ++round) {
        std::vector<Bytes> send;
        for (int d = 0; d < world; ++d) send.push_back(payload(r, d, round, size_of(round, r, d)));
        const auto recv = t.all_to_all(std::move(send));
        ASSERT_EQ(static_cast<int>(recv.size()), world);
        for (int s = 0; s < world; ++s)
          ASSERT_EQ(recv[static_cast<size_t>(s)], payload(s, r, round, size_of(round, s, r)))
              << "world " << world << " round " << round << " from " << s << " to " << r;
        if (round % 50 == 0) {
          const auto all = t.all_gather(payload(r, r, round, 5));
          for (int s = 0; s < world; ++s) ASSERT_EQ(all[static_cast<size_t>(s)], payload(s, s, round, 5));
          t.barrier();
        }
      }
    });
    for (const auto& e : errors) EXPECT_EQ(e, "");
  }
}

TEST(EpTransport, MissingRankTimesOutNamingIt) {
  LocalHub hub(3, std::chrono::milliseconds(200));
  auto errors = run_ranks(hub, [&](int r, EpTransport& t) {
    if (r == 2) return;  // never arrives
    t.all_to_all(std::vector<Bytes>(3));
  });
  for (int r : {0, 1}) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("rank(s) 2 did not arrive within 200 ms"), std::string::npos)
        << errors[static_cast<size_t>(r)];
    EXPECT_EQ(errors[static_cast<size_t>(r)].find('\n'), std::string::npos);
  }
}

TEST(EpTransport, AbortReachesTheWaitingRanks) {
  LocalHub hub(3, std::chrono::seconds(30));  // must not wait for the timeout
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = run_ranks(hub, [&](int r, EpTransport& t) {
    if (r == 1) {
      t.abort("weights missing");
      return;
    }
    t.barrier();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  for (int r : {0, 2})
    EXPECT_NE(errors[static_cast<size_t>(r)].find("rank 1 failed: weights missing"), std::string::npos)
        << errors[static_cast<size_t>(r)];
}

TEST(EpTransport, MismatchedCollectivesAreAnError) {
  LocalHub hub(2, std::chrono::seconds(5));
  auto errors = run_ranks(hub, [&](int r, EpTransport& t) {
    if (r == 0)
      t.all_to_all(std::vector<Bytes>(2));
    else
      t.barrier();
  });
  const std::string both = errors[0] + " | " + errors[1];
  EXPECT_NE(both.find("called barrier while"), std::string::npos) << both;
}

TEST(EpTransport, BadArgumentsAreOneLineErrors) {
  EXPECT_THROW(LocalHub(0), Error);
  LocalHub hub(2);
  EXPECT_THROW(hub.transport(2), Error);
  auto t = hub.transport(0);
  EXPECT_THROW(t->all_to_all(std::vector<Bytes>(3)), Error);
}

}  // namespace
}  // namespace deepinfer::dist
