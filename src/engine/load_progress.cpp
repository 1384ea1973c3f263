#include "engine/load_progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

namespace deepinfer::engine {

std::string human_bytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[unit]);
}

LoadProgress::LoadProgress() : tty_(isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}

LoadProgress::~LoadProgress() {
  if (tty_ && last_percent_ >= 0 && !finished_) std::fprintf(stderr, "\r%80s\r", "");
}

void LoadProgress::update(size_t done, size_t total) {
  total_ = total;
  if (!tty_ || total == 0) return;
  const int percent = static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total));
  if (percent == last_percent_) return;  // redraw only when the number changes
  last_percent_ = percent;
  constexpr int kWidth = 30;
  const int filled = percent * kWidth / 100;
  std::fprintf(stderr, "\rloading weights [%s%s] %3d%% %s / %s", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, ' ').c_str(), percent, human_bytes(double(done)).c_str(),
               human_bytes(double(total)).c_str());
  std::fflush(stderr);
}

void LoadProgress::finish() {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  finished_ = true;
  if (tty_ && last_percent_ >= 0) std::fputc('\n', stderr);
  std::fprintf(stderr, "loaded %s of weights in %.2f s\n", human_bytes(double(total_)).c_str(), seconds);
}

RequestProgress::RequestProgress(size_t total)
    : tty_(isatty(STDERR_FILENO) == 1), total_(total), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

RequestProgress::~RequestProgress() {
  if (drawn_) std::fprintf(stderr, "\r%100s\r", "");  // an error message then starts on a clean line
}

void RequestProgress::draw(size_t done, int64_t tokens) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  constexpr size_t kWidth = 30;
  const size_t filled = total_ ? done * kWidth / total_ : kWidth;
  std::fprintf(stderr, "\r[%s%s] %zu/%zu requests | %lld tokens | %.1f tok/s | %.1f s ", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, ' ').c_str(), done, total_, static_cast<long long>(tokens),
               seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0, seconds);
  std::fflush(stderr);
  drawn_ = true;
}

void RequestProgress::update(size_t done, int64_t tokens) {
  if (!tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(done, tokens);
}

void RequestProgress::finish(size_t done, int64_t tokens, const std::string& extra) {
  if (tty_) {
    draw(done, tokens);
    std::fputc('\n', stderr);
    drawn_ = false;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "%zu/%zu requests done: %lld tokens generated in %.2f s (%.1f tok/s)%s\n", done, total_,
               static_cast<long long>(tokens), seconds, seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0,
               extra.c_str());
}

}  // namespace deepinfer::engine
