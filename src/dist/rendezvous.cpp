#include "dist/rendezvous.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "core/error.h"

namespace deepinfer::dist {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMagic = 0x56524944;  // "DIRV"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxPayload = 1u << 20;

struct Hello {
  uint32_t magic, version;
  int32_t rank, world;
};

struct Fd {
  int fd = -1;
  explicit Fd(int f = -1) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// Reads / writes exactly n bytes before the deadline; false on timeout, end of stream or error.
bool read_all(int fd, void* dst, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    pollfd pf{fd, POLLIN, 0};
    const int r = ::poll(&pf, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    const ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    p += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}
bool write_all(int fd, const void* src, size_t n) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t put = ::send(fd, p, n, MSG_NOSIGNAL);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return false;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

// status (0 payload, 1 error line), length, bytes.
bool send_reply(int fd, uint8_t status, const std::string& body) {
  const auto len = static_cast<uint32_t>(body.size());
  return write_all(fd, &status, 1) && write_all(fd, &len, 4) && write_all(fd, body.data(), body.size());
}

addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  DEEPINFER_CHECK(rc == 0 && res, "rendezvous: cannot resolve {}:{}: {}", host, port, gai_strerror(rc));
  return res;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  int out = 0;
  const char* end = v + std::strlen(v);
  const auto [p, ec] = std::from_chars(v, end, out);
  DEEPINFER_CHECK(ec == std::errc() && p == end && out >= lo && out <= hi, "{}={}: expected an integer in [{}, {}]",
                  name, v, lo, hi);
  return out;
}

}  // namespace

RendezvousConfig rendezvous_config_from_env() {
  RendezvousConfig c;
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) c.host = a;
  c.port = env_int("MASTER_PORT", c.port, 1, 65535);
  c.world = env_int("WORLD_SIZE", c.world, 1, 1 << 16);
  c.rank = env_int("RANK", c.rank, 0, 1 << 16);
  DEEPINFER_CHECK(c.rank < c.world, "RANK={} is not below WORLD_SIZE={}", c.rank, c.world);
  c.timeout = std::chrono::seconds(env_int("DEEPINFER_RENDEZVOUS_TIMEOUT_S", 300, 1, 1 << 20));
  return c;
}

RendezvousListener::RendezvousListener(const std::string& bind_host, int port) {
  DEEPINFER_CHECK(port >= 0 && port <= 65535, "rendezvous: port {} out of range", port);
  addrinfo* res = resolve(bind_host, port, true);
  std::string last = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    Fd s(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
    if (s.fd < 0) continue;
    const int one = 1;
    ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(s.fd, 128) != 0) {
      last = std::strerror(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(s.fd, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    fd_ = s.fd;
    s.fd = -1;
    break;
  }
  ::freeaddrinfo(res);
  where_ = (bind_host.empty() ? std::string("*") : bind_host) + ":" + std::to_string(port_ ? port_ : port);
  DEEPINFER_CHECK(fd_ >= 0, "rendezvous: rank 0 cannot listen on {}:{}: {} (MASTER_PORT in use?)",
                  bind_host.empty() ? "*" : bind_host, port, last);
}

RendezvousListener::~RendezvousListener() {
  if (fd_ >= 0) ::close(fd_);
}

void RendezvousListener::serve(int world, const std::string& payload, std::chrono::milliseconds timeout) {
  DEEPINFER_CHECK(world >= 1, "rendezvous: world size {}", world);
  DEEPINFER_CHECK(payload.size() <= kMaxPayload, "rendezvous: a payload of {} bytes (at most {})", payload.size(),
                  kMaxPayload);
  const auto deadline = Clock::now() + timeout;
  std::map<int, Fd> joined;  // rank -> connection
  std::vector<Fd> others;    // connections of a failed rendezvous, to tell
  auto fail = [&](const std::string& line) {
    for (auto& [r, c] : joined) send_reply(c.fd, 1, line);
    for (auto& c : others) send_reply(c.fd, 1, line);
    throw Error(line);
  };
  while (static_cast<int>(joined.size()) < world - 1) {
    pollfd pf{fd_, POLLIN, 0};
    const int r = ::poll(&pf, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      std::vector<int> missing;
      for (int k = 1; k < world; ++k)
        if (!joined.count(k)) missing.push_back(k);
      fail("rendezvous at " + where_ + ": rank(s) " + rank_list(missing) + " of " + std::to_string(world) +
           " did not join within " + std::to_string(timeout.count()) + " ms");
    }
    Fd c(::accept(fd_, nullptr, nullptr));
    if (c.fd < 0) continue;
    Hello h{};
    // A connection that is not a rank (no hello within a second, wrong magic) is dropped.
    if (!read_all(c.fd, &h, sizeof(h), std::min(deadline, Clock::now() + std::chrono::seconds(1))) ||
        h.magic != kMagic)
      continue;
    if (h.version != kVersion) {
      others.push_back(std::move(c));
      fail("rendezvous at " + where_ + ": a rank speaks protocol version " + std::to_string(h.version) + ", rank 0 " +
           std::to_string(kVersion) + " (mixed deepinfer builds?)");
    }
    if (h.world != world) {
      others.push_back(std::move(c));
      fail("rendezvous at " + where_ + ": rank " + std::to_string(h.rank) + " has WORLD_SIZE " +
           std::to_string(h.world) + ", rank 0 has " + std::to_string(world));
    }
    if (h.rank < 1 || h.rank >= world) {
      others.push_back(std::move(c));
      fail("rendezvous at " + where_ + ": a rank joined as rank " + std::to_string(h.rank) + ", outside 1.." +
           std::to_string(world - 1));
    }
    if (joined.count(h.rank)) {
      others.push_back(std::move(c));
      fail("rendezvous at " + where_ + ": rank " + std::to_string(h.rank) + " joined twice (two processes with RANK=" +
           std::to_string(h.rank) + ")");
    }
    joined.emplace(h.rank, std::move(c));
  }
  for (auto& [r, c] : joined)
    DEEPINFER_CHECK(send_reply(c.fd, 0, payload), "rendezvous at {}: rank {} left before receiving the id", where_, r);
}

std::string rendezvous_join(const RendezvousConfig& config) {
  DEEPINFER_CHECK(config.world >= 2 && config.rank >= 1 && config.rank < config.world,
                  "rendezvous: rank {} of {} does not join (rank 0 listens)", config.rank, config.world);
  const auto deadline = Clock::now() + config.timeout;
  const std::string where = config.host + ":" + std::to_string(config.port);
  std::string last = "no attempt";
  while (true) {
    addrinfo* res = resolve(config.host, config.port, false);
    Fd s;
    for (addrinfo* a = res; a && s.fd < 0; a = a->ai_next) {
      Fd t(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (t.fd < 0) continue;
      if (::connect(t.fd, a->ai_addr, a->ai_addrlen) == 0)
        s = std::move(t);
      else
        last = std::strerror(errno);
    }
    ::freeaddrinfo(res);
    if (s.fd >= 0) {
      const int one = 1;
      ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      const Hello h{kMagic, kVersion, config.rank, config.world};
      uint8_t status = 0;
      uint32_t len = 0;
      if (!write_all(s.fd, &h, sizeof(h)) || !read_all(s.fd, &status, 1, deadline) ||
          !read_all(s.fd, &len, 4, deadline)) {
        DEEPINFER_CHECK(Clock::now() < deadline,
                        "rendezvous: rank {} of {} reached {} but rank 0 did not hand out the id within {} ms "
                        "(waiting for other ranks?)",
                        config.rank, config.world, where, config.timeout.count());
        last = "rank 0 closed the connection";
      } else {
        DEEPINFER_CHECK(len <= kMaxPayload, "rendezvous: rank 0 at {} sent {} bytes (not a deepinfer rank 0?)", where,
                        len);
        std::string body(len, '\0');
        DEEPINFER_CHECK(read_all(s.fd, body.data(), len, deadline), "rendezvous: rank 0 at {} closed mid-reply", where);
        DEEPINFER_CHECK(status == 0, "rendezvous (rank {}): {}", config.rank, body);
        return body;
      }
    }
    DEEPINFER_CHECK(Clock::now() < deadline, "rendezvous: rank {} of {} found no rank 0 at {} within {} ms ({})",
                    config.rank, config.world, where, config.timeout.count(), last);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(100, ms_left(deadline))));
  }
}

std::string rendezvous(const RendezvousConfig& config, const std::string& payload) {
  if (config.world <= 1) return payload;
  if (config.rank != 0) return rendezvous_join(config);
  RendezvousListener listener("", config.port);
  listener.serve(config.world, payload, config.timeout);
  return payload;
}

}  // namespace deepinfer::dist
