// Minimisation: the result accepts the same strings and has no two equivalent states.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "structured/fsm.h"
#include "structured/regex.h"

namespace deepinfer::structured {
namespace {

// Two states are equivalent when no string leads one to acceptance and not the other: explore
// pairs of states reachable together by the same bytes.
bool distinguishable(const Fsm& dfa, int32_t a, int32_t b) {
  auto step = [&](int32_t s, int byte) {
    if (s < 0) return -1;
    for (auto& e : dfa.states[s].edges) {
      if (e.lo <= byte && byte <= e.hi) return e.target;
    }
    return -1;
  };
  auto final = [&](int32_t s) { return s >= 0 && dfa.states[s].final; };
  std::set<std::pair<int32_t, int32_t>> seen{{a, b}};
  std::vector<std::pair<int32_t, int32_t>> stack{{a, b}};
  while (!stack.empty()) {
    auto [x, y] = stack.back();
    stack.pop_back();
    if (final(x) != final(y)) return true;
    for (int byte = 0; byte < 256; ++byte) {
      std::pair<int32_t, int32_t> next{step(x, byte), step(y, byte)};
      if (next.first == next.second) continue;
      if (seen.insert(next).second) stack.push_back(next);
    }
  }
  return false;
}

TEST(Fsm, MinimisedAutomataAreEquivalentAndMinimal) {
  const std::vector<std::string> patterns = {
      "a{0,40}", "(ab|ac)*d", "[a-c]{2,5}x|[a-b]{3,7}y", "(a|b)*a(a|b){4}", "\"([^\"\\\\]|\\\\.){0,12}\"",
      "-?(0|[1-9][0-9]{0,6})(\\.[0-9]{1,3})?", "(x{3}|x{5})*", "é{1,3}|€+", "(abc|abd|abe){1,3}f?"};
  std::mt19937 rng(11);
  for (auto& pattern : patterns) {
    ExprPtr expr = parse_regex(pattern);
    Fsm nfa = build_nfa(*expr);
    auto dfa = determinize(nfa);
    ASSERT_TRUE(dfa) << pattern;
    Fsm minimal = minimize(trim(*dfa));
    ASSERT_TRUE(minimal.is_deterministic()) << pattern;
    ASSERT_LE(minimal.states.size(), dfa->states.size()) << pattern;
    // Same language on random strings over the pattern's own bytes plus a few others.
    std::string alphabet = pattern + "xyz0123456789";
    for (int k = 0; k < 3000; ++k) {
      std::string text;
      size_t length = std::uniform_int_distribution<size_t>(0, 20)(rng);
      for (size_t i = 0; i < length; ++i) text += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      ASSERT_EQ(minimal.accepts(text), nfa.accepts(text)) << pattern << " on '" << text << "'";
    }
    for (int32_t a = 0; a < static_cast<int32_t>(minimal.states.size()); ++a) {
      for (int32_t b = a + 1; b < static_cast<int32_t>(minimal.states.size()); ++b) {
        ASSERT_TRUE(distinguishable(minimal, a, b)) << pattern << ": states " << a << " and " << b << " are equivalent";
      }
    }
  }
  // A bounded repetition is a chain: exactly one state per count.
  EXPECT_EQ(minimize(trim(*determinize(build_nfa(*parse_regex("a{0,40}"))))).states.size(), 41u);
}

}  // namespace
}  // namespace deepinfer::structured
