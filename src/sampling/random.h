#pragma once
// Counter-based random numbers: the value for (seed, stream, counter) is a pure function of those
// three numbers, so a sequence's draws do not depend on which other sequences share its batch or
// in which order they are sampled. The mixer is SplitMix64's finaliser applied in rounds.
#include <cstdint>

namespace deepinfer::sampling {

constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 64 random bits for draw `counter` of stream `stream` under `seed`.
constexpr uint64_t counter_random_u64(uint64_t seed, uint64_t stream, uint64_t counter) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;  // Weyl increment, keeps nearby inputs apart
  uint64_t z = mix64(seed + kGolden);
  z = mix64(z ^ (stream * kGolden + 0x632BE59BD9B4E019ull));
  z = mix64(z ^ (counter * kGolden + 0xD1B54A32D192ED03ull));
  return z;
}

// Uniform double in [0, 1) with 53 random bits.
constexpr double counter_random_unit(uint64_t seed, uint64_t stream, uint64_t counter) {
  return static_cast<double>(counter_random_u64(seed, stream, counter) >> 11) * 0x1.0p-53;
}

}  // namespace deepinfer::sampling
