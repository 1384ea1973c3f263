#pragma once
// Bounded reads of the text files around a model and its requests (config.json, the tokenizer
// files, the safetensors index, request files). Every kind of file has a size limit far above any
// real one, checked against the file's size before anything is read, so a crafted multi-gigabyte
// file is a one-line error instead of an allocation of its size.
#include <cstdint>
#include <filesystem>
#include <istream>
#include <optional>
#include <string>
#include <string_view>

namespace deepinfer {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;

// Each limit is ~100x the largest real file of its kind we know of.
inline constexpr uint64_t kConfigFileLimit = 16 * kMiB;            // config.json, generation_config.json: a few KB
inline constexpr uint64_t kTokenizerFileLimit = 512 * kMiB;        // tokenizer.json: DeepSeek's 7.5 MB
inline constexpr uint64_t kTokenizerConfigFileLimit = 64 * kMiB;   // tokenizer_config.json: < 1 MB with templates
inline constexpr uint64_t kWeightIndexFileLimit = 256 * kMiB;      // model.safetensors.index.json: ~ 2 MB
inline constexpr uint64_t kRequestFileLimit = 1024 * kMiB;         // a chat request, grammar or schema file
inline constexpr uint64_t kRequestLineLimit = 256 * kMiB;          // one line of `generate --input`

// "2.0 GB", "16 MB", "812 bytes".
std::string human_bytes(uint64_t bytes);

// The whole file. Fails with one line naming the file and `what` ("model config") when it cannot be
// opened, is not a regular file, or holds more than max_bytes.
std::string read_text_file(const std::filesystem::path& path, uint64_t max_bytes, std::string_view what);

// The same, but nullopt when nothing exists at `path`.
std::optional<std::string> read_text_file_if_exists(const std::filesystem::path& path, uint64_t max_bytes,
                                                    std::string_view what);

// All of a stream (stdin); fails once more than max_bytes have arrived.
std::string read_text_stream(std::istream& in, uint64_t max_bytes, std::string_view what);

// The next line of `in` without its '\n' (and a '\r' before it); false at the end of the input.
// A line longer than max_bytes fails naming `source` and line_number, after reading only max_bytes.
bool read_bounded_line(std::istream& in, std::string& line, uint64_t max_bytes, std::string_view source,
                       int64_t line_number);

}  // namespace deepinfer
