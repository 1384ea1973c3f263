#include "tokenizer/pre_tokenizer.h"
#include "core/json_excerpt.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace deepinfer {
namespace {

// The pattern HF's ByteLevel pre-tokenizer splits with when use_regex is true (GPT-2's).
constexpr std::string_view kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

SplitBehavior parse_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  fail("tokenizer.json: Split behavior must be Removed, Isolated, MergedWithPrevious, MergedWithNext or "
       "Contiguous, found \"{}\"",
       name);
}

SplitStep parse_split(const nlohmann::json& config) {
  const auto& pattern = config.at("pattern");
  std::optional<Regex> regex;
  if (pattern.contains("Regex")) {
    regex.emplace(pattern.at("Regex").get<std::string>());
  } else if (pattern.contains("String")) {
    regex.emplace(pattern.at("String").get<std::string>(), /*literal=*/true);
  } else {
    fail("tokenizer.json: Split pattern must be {{\"Regex\": ...}} or {{\"String\": ...}}, found {}", json_excerpt(pattern));
  }
  return SplitStep{std::move(*regex), parse_behavior(config.at("behavior").get<std::string>()),
                   config.value("invert", false)};
}

struct Span {
  size_t start, end;
  bool is_match;
};

}  // namespace

void split_with_behavior(const Regex& regex, SplitBehavior behavior, bool invert, std::string_view piece,
                         std::vector<std::string_view>& out) {
  if (piece.empty()) return;
  thread_local std::vector<std::pair<size_t, size_t>> matches;
  thread_local std::vector<Span> spans;
  matches.clear();
  spans.clear();
  regex.find_all(piece, matches);
  // Alternate gaps and matches covering the whole piece, as HF's Pattern::find_matches does.
  size_t previous = 0;
  for (const auto& [start, end] : matches) {
    if (previous != start) spans.push_back({previous, start, invert});
    spans.push_back({start, end, !invert});
    previous = end;
  }
  if (previous != piece.size()) spans.push_back({previous, piece.size(), invert});

  thread_local std::vector<Span> merged;
  merged.clear();
  switch (behavior) {
    case SplitBehavior::kIsolated:
      merged = spans;
      break;
    case SplitBehavior::kRemoved:
      for (const Span& span : spans)
        if (!span.is_match) merged.push_back(span);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Span& span : spans) {
        if (span.is_match && !previous_match && !merged.empty()) {
          merged.back().end = span.end;
        } else {
          merged.push_back(span);
        }
        previous_match = span.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) {
          merged.back().start = it->start;
        } else {
          merged.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const Span& span : spans) {
        if (span.is_match == previous_match && !merged.empty()) {
          merged.back().end = span.end;
        } else {
          merged.push_back(span);
        }
        previous_match = span.is_match;
      }
      break;
    }
  }
  for (const Span& span : merged)
    if (span.end > span.start) out.push_back(piece.substr(span.start, span.end - span.start));
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& config) {
  PreTokenizer result;
  if (config.is_null()) return result;
  std::vector<const nlohmann::json*> steps;
  const std::string type = config.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& step : config.at("pretokenizers")) steps.push_back(&step);
  } else {
    steps.push_back(&config);
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const nlohmann::json& step = *steps[i];
    const std::string step_type = step.at("type").get<std::string>();
    if (result.byte_level_) {
      fail("tokenizer.json: pre_tokenizer step {} ({}) follows ByteLevel; only ByteLevel as the last step is supported",
           i, step_type);
    }
    if (step_type == "Split") {
      result.splits_.push_back(parse_split(step));
    } else if (step_type == "ByteLevel") {
      result.byte_level_ = ByteLevelStep{step.value("add_prefix_space", true), step.value("use_regex", true)};
      if (result.byte_level_->use_regex) result.byte_level_regex_.emplace(kByteLevelPattern);
    } else {
      fail("tokenizer.json: unsupported pre_tokenizer type \"{}\" (supported: Sequence, Split, ByteLevel)", step_type);
    }
  }
  return result;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces,
                         std::deque<std::string>& storage) const {
  pieces.clear();
  if (text.empty()) return;
  pieces.push_back(text);
  thread_local std::vector<std::string_view> next;
  for (const SplitStep& step : splits_) {
    next.clear();
    for (std::string_view piece : pieces) split_with_behavior(step.regex, step.behavior, step.invert, piece, next);
    pieces.swap(next);
  }
  if (!byte_level_) return;
  if (!byte_level_->add_prefix_space && !byte_level_->use_regex) return;
  next.clear();
  for (std::string_view piece : pieces) {
    if (byte_level_->add_prefix_space && piece.front() != ' ') {
      storage.push_back(" " + std::string(piece));
      piece = storage.back();
    }
    if (byte_level_regex_) {
      split_with_behavior(*byte_level_regex_, SplitBehavior::kIsolated, false, piece, next);
    } else {
      next.push_back(piece);
    }
  }
  pieces.swap(next);
}

}  // namespace deepinfer
