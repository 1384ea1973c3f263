#pragma once
// Weight-loading progress for command-line tools: a bar redrawn on stderr when stderr is a
// terminal, otherwise silence until a single summary line at the end (keeps logs short).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace deepinfer::engine {

class LoadProgress {
 public:
  LoadProgress();
  ~LoadProgress();  // erases an unfinished bar, so an error message starts on a clean line
  LoadProgress(const LoadProgress&) = delete;
  LoadProgress& operator=(const LoadProgress&) = delete;
  void update(size_t done, size_t total);  // matches model::LoadOptions::progress
  void finish();                           // ends the bar and prints "loaded X of weights in Y s"

 private:
  bool tty_;
  bool finished_ = false;
  int last_percent_ = -1;
  size_t total_ = 0;
  std::chrono::steady_clock::time_point start_;
};

// Progress of a batch of requests for command-line tools: on a terminal, a bar redrawn at most
// ten times a second ("[####   ] 12/64 requests | 3,210 tokens | 845.2 tok/s"); otherwise silent.
// finish() prints one summary line either way.
class RequestProgress {
 public:
  explicit RequestProgress(size_t total);
  ~RequestProgress();
  RequestProgress(const RequestProgress&) = delete;
  RequestProgress& operator=(const RequestProgress&) = delete;
  void update(size_t done, int64_t tokens);  // requests finished, tokens generated so far
  void finish(size_t done, int64_t tokens, const std::string& extra = "");

 private:
  void draw(size_t done, int64_t tokens);
  bool tty_;
  bool drawn_ = false;
  size_t total_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

std::string human_bytes(double bytes);  // "18.3 MiB"

}  // namespace deepinfer::engine
