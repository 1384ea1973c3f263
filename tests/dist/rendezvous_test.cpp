// The TCP rendezvous of the process-group bootstrap (dist/rendezvous.h), with ranks as threads on
// loopback and rank 0 on an ephemeral port: every rank gets rank 0's bytes; a missing rank, a rank
// twice, another world size and no rank 0 at all are one-line errors within the timeout.
#include "dist/rendezvous.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "core/error.h"
#include "testing/random_seed.h"

namespace deepinfer::dist {
namespace {

using namespace std::chrono_literals;

RendezvousConfig joiner(int port, int rank, int world, std::chrono::milliseconds timeout = 5s) {
  RendezvousConfig c;
  c.host = "127.0.0.1";
  c.port = port;
  c.rank = rank;
  c.world = world;
  c.timeout = timeout;
  return c;
}

// The message of what f throws (empty when it does not throw).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Rendezvous, EveryRankGetsRankZerosBytes) {
  const uint32_t seed = testing_util::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (DEEPINFER_TEST_SEED reruns it)");
  std::mt19937_64 rng(seed);
  std::string id(128, '\0');  // as ncclUniqueId: binary, zero bytes included
  for (auto& c : id) c = static_cast<char>(rng() & 0xff);
  id[5] = '\0';
  for (int world : {2, 5}) {
    RendezvousListener listener("127.0.0.1", 0);
    ASSERT_GT(listener.port(), 0);
    std::vector<std::future<std::string>> ranks;
    for (int r = world - 1; r >= 1; --r)  // in reverse: arrival order does not matter
      ranks.push_back(std::async(std::launch::async, [&, r] { return rendezvous_join(joiner(listener.port(), r, world)); }));
    listener.serve(world, id, 5s);
    for (auto& f : ranks) EXPECT_EQ(f.get(), id) << "world " << world;
  }
}

TEST(Rendezvous, ARankStartingBeforeRankZeroRetries) {
  // Rank 1 starts first and retries until rank 0 listens (on a port chosen, then freed, here).
  int port = 0;
  {
    RendezvousListener probe("127.0.0.1", 0);
    port = probe.port();
  }
  auto rank1 = std::async(std::launch::async, [&] { return rendezvous_join(joiner(port, 1, 2)); });
  std::this_thread::sleep_for(300ms);
  RendezvousListener listener("127.0.0.1", port);
  listener.serve(2, "late id", 5s);
  EXPECT_EQ(rank1.get(), "late id");
}

TEST(Rendezvous, AMissingRankIsNamedAfterTheTimeout) {
  RendezvousListener listener("127.0.0.1", 0);
  auto rank2 = std::async(std::launch::async, [&] { return error_of([&] { rendezvous_join(joiner(listener.port(), 2, 4)); }); });
  const std::string e = error_of([&] { listener.serve(4, "id", 400ms); });
  EXPECT_NE(e.find("rank(s) 1, 3 of 4 did not join within 400 ms"), std::string::npos) << e;
  const std::string e2 = rank2.get();
  EXPECT_NE(e2.find("rank(s) 1, 3 of 4 did not join"), std::string::npos) << "rank 2 is told why: " << e2;
}

TEST(Rendezvous, InconsistentRanksAreOneLineErrorsForEveryone) {
  struct Case {
    std::vector<std::pair<int, int>> joins;  // (rank, world) of each joiner
    const char* expected;
  };
  const Case cases[] = {
      {{{1, 3}, {1, 3}}, "rank 1 joined twice"},
      {{{1, 4}}, "rank 1 has WORLD_SIZE 4, rank 0 has 3"},
  };
  for (const auto& c : cases) {
    RendezvousListener listener("127.0.0.1", 0);
    std::vector<std::future<std::string>> joiners;
    for (size_t i = 0; i < c.joins.size(); ++i) {
      const auto [r, w] = c.joins[i];
      joiners.push_back(std::async(std::launch::async, [&listener, r = r, w = w] {
        return error_of([&] { rendezvous_join(joiner(listener.port(), r, w)); });
      }));
      std::this_thread::sleep_for(50ms);  // in order
    }
    const std::string e = error_of([&] { listener.serve(3, "id", 5s); });
    EXPECT_NE(e.find(c.expected), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    for (auto& f : joiners) {
      const std::string je = f.get();
      EXPECT_NE(je.find(c.expected), std::string::npos) << "a joiner is told: " << je;
    }
  }
}

TEST(Rendezvous, NoRankZeroIsNamedWithItsAddress) {
  int port = 0;
  {
    RendezvousListener probe("127.0.0.1", 0);
    port = probe.port();  // freed: nobody listens there now
  }
  const std::string e = error_of([&] { rendezvous_join(joiner(port, 1, 2, 300ms)); });
  EXPECT_NE(e.find("rank 1 of 2 found no rank 0 at 127.0.0.1:" + std::to_string(port) + " within 300 ms"),
            std::string::npos)
      << e;
}

TEST(Rendezvous, ConfigFromTheEnvironment) {
  ::setenv("MASTER_ADDR", "10.1.2.3", 1);
  ::setenv("MASTER_PORT", "29511", 1);
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "8", 1);
  ::setenv("DEEPINFER_RENDEZVOUS_TIMEOUT_S", "7", 1);
  const RendezvousConfig c = rendezvous_config_from_env();
  EXPECT_EQ(c.host, "10.1.2.3");
  EXPECT_EQ(c.port, 29511);
  EXPECT_EQ(c.rank, 3);
  EXPECT_EQ(c.world, 8);
  EXPECT_EQ(c.timeout, 7s);
  ::setenv("RANK", "8", 1);
  EXPECT_NE(error_of([] { rendezvous_config_from_env(); }).find("RANK=8 is not below WORLD_SIZE=8"), std::string::npos);
  ::setenv("RANK", "1", 1);
  ::setenv("MASTER_PORT", "29x", 1);
  EXPECT_NE(error_of([] { rendezvous_config_from_env(); }).find("MASTER_PORT=29x: expected an integer in [1, 65535]"),
            std::string::npos);
  for (const char* v : {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "DEEPINFER_RENDEZVOUS_TIMEOUT_S"}) ::unsetenv(v);
  const RendezvousConfig d = rendezvous_config_from_env();
  EXPECT_EQ(d.world, 1);
  EXPECT_EQ(rendezvous(d, "solo"), "solo");
}

}  // namespace
}  // namespace deepinfer::dist
