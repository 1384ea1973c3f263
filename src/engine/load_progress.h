#pragma once
// Weight-loading progress for command-line tools: a bar redrawn on stderr when stderr is a
// terminal, otherwise silence until a single summary line at the end (keeps logs short).
#include <chrono>
#include <cstddef>
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

std::string human_bytes(double bytes);  // "18.3 MiB"

}  // namespace deepinfer::engine
