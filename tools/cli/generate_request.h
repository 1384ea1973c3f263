#pragma once
// `generate --input`: one JSONL request line -> a checked request (prompt tokenized, every field
// typed and in range, the guided-decoding spec compiled by the grammar front end), so a bad line
// fails, naming its problem, before any weights load. Also the fuzz target's entry point.
#include <deepinfer/llm.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {

struct FileRequest {
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
};

inline constexpr size_t kMaxRequestJsonDepth = 64;

// Throws Error without the line's location (the caller adds it).
FileRequest parse_request(const std::string& line, const SamplingParams& defaults, const io::ModelConfig& config,
                          const std::optional<Tokenizer>& tokenizer);

// The checks the engine makes on sampling parameters (ranges, the guided-decoding spec).
void validate(const SamplingParams& p, int64_t vocab_size);

}  // namespace deepinfer::cli
