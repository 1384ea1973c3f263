#include "model/deepseek_v41/engram_tables.h"

#ifdef DEEPINFER_HAVE_ICU
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#endif

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/text_file.h"

namespace deepinfer::model::deepseek_v41 {

namespace {

// --- the tokenizer side ---

// GPT-2 byte-level alphabet: printable bytes map to themselves, the rest to U+0100 + n in order.
std::map<char32_t, uint8_t> byte_level_chars() {
  std::map<char32_t, uint8_t> out;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    out[printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++)] = static_cast<uint8_t>(b);
  }
  return out;
}

#ifdef DEEPINFER_HAVE_ICU
// The ByteLevel decoder on one token: its characters back to bytes when every one is in the
// alphabet (else the token's own UTF-8), then lossy UTF-8 decoding.
std::string byte_level_decode(const std::string& token, const std::map<char32_t, uint8_t>& alphabet) {
  const icu::UnicodeString u = icu::UnicodeString::fromUTF8(token);
  std::string bytes;
  bool all = true;
  for (int32_t i = 0; i < u.length(); i = u.moveIndex32(i, 1)) {
    auto it = alphabet.find(static_cast<char32_t>(u.char32At(i)));
    if (it == alphabet.end()) {
      all = false;
      break;
    }
    bytes.push_back(static_cast<char>(it->second));
  }
  if (!all) bytes = token;
  std::string out;  // fromUTF8 replaces each ill-formed sequence by U+FFFD, as from_utf8_lossy
  icu::UnicodeString::fromUTF8(bytes).toUTF8String(out);
  return out;
}

// engram.py's normalizer sequence (tokenizers' NFKC, NFD, StripAccents, Lowercase, whitespace
// Replace, lone-space sentinel, Strip).
std::string normalize(const std::string& text) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* nfkc = icu::Normalizer2::getNFKCInstance(err);
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(err);
  DEEPINFER_CHECK(U_SUCCESS(err), "ICU normalizers unavailable: {}", u_errorName(err));
  icu::UnicodeString s = nfkc->normalize(icu::UnicodeString::fromUTF8(text), err);
  s = nfd->normalize(s, err);
  DEEPINFER_CHECK(U_SUCCESS(err), "ICU normalisation failed: {}", u_errorName(err));
  std::u32string cps;
  for (int32_t i = 0; i < s.length(); i = s.moveIndex32(i, 1)) {
    const UChar32 c = s.char32At(i);
    const int8_t type = u_charType(c);
    if (type == U_NON_SPACING_MARK || type == U_COMBINING_SPACING_MARK || type == U_ENCLOSING_MARK) continue;
    // Full lowercase of each character alone (Rust's char::to_lowercase, no context).
    UChar buf[8], low[16];
    int32_t n = 0;
    U16_APPEND_UNSAFE(buf, n, c);
    const int32_t m = u_strToLower(low, 16, buf, n, "", &err);
    for (int32_t k = 0; k < m;) {
      UChar32 lc;
      U16_NEXT(low, k, m, lc);
      cps.push_back(static_cast<char32_t>(lc));
    }
  }
  std::u32string collapsed;  // [ \t\r\n]+ -> " "
  for (char32_t c : cps) {
    const bool ws = c == U' ' || c == U'\t' || c == U'\r' || c == U'\n';
    if (ws && !collapsed.empty() && collapsed.back() == U' ' && !collapsed.empty()) {
      // only collapse runs that came from the class, which all map to ' '
      continue;
    }
    collapsed.push_back(ws ? U' ' : c);
  }
  if (collapsed == U" ") return " ";  // the sentinel keeps a lone space through Strip
  size_t b = 0, e = collapsed.size();
  while (b < e && u_isUWhiteSpace(static_cast<UChar32>(collapsed[b]))) ++b;
  while (e > b && u_isUWhiteSpace(static_cast<UChar32>(collapsed[e - 1]))) --e;
  icu::UnicodeString out_u;
  for (size_t i = b; i < e; ++i) out_u.append(static_cast<UChar32>(collapsed[i]));
  std::string out;
  out_u.toUTF8String(out);
  return out;
}

#else
[[noreturn]] void no_icu() {
  fail("this build has no ICU (install libicu-dev and reconfigure): DeepSeek-V4.1's Engram token map needs "
       "Unicode normalisation");
}
std::string byte_level_decode(const std::string&, const std::map<char32_t, uint8_t>&) { no_icu(); }
std::string normalize(const std::string&) { no_icu(); }
#endif

// --- numpy's default_rng: SeedSequence -> PCG64 (XSL-RR 128/64) -> Lemire bounded integers ---

class NumpyPcg64 {
 public:
  explicit NumpyPcg64(uint64_t seed) {
    // SeedSequence(seed).generate_state(4, uint64)
    std::vector<uint32_t> entropy;
    if (seed == 0) entropy.push_back(0);
    for (uint64_t n = seed; n > 0; n >>= 32) entropy.push_back(static_cast<uint32_t>(n));
    uint32_t pool[4];
    uint32_t hash_a = 0x43b0d7e5u;
    auto hashmix = [&](uint32_t v) {
      v ^= hash_a;
      hash_a *= 0x931e8875u;
      v *= hash_a;
      v ^= v >> 16;
      return v;
    };
    auto mix = [](uint32_t x, uint32_t y) {
      uint32_t r = 0xca01f9ddu * x - 0x4973f715u * y;
      r ^= r >> 16;
      return r;
    };
    for (size_t i = 0; i < 4; ++i) pool[i] = hashmix(i < entropy.size() ? entropy[i] : 0u);
    for (size_t s = 0; s < 4; ++s)
      for (size_t d = 0; d < 4; ++d)
        if (s != d) pool[d] = mix(pool[d], hashmix(pool[s]));
    for (size_t s = 4; s < entropy.size(); ++s)
      for (size_t d = 0; d < 4; ++d) pool[d] = mix(pool[d], hashmix(entropy[s]));
    uint32_t hash_b = 0x8b51f9ddu, words[8];
    for (size_t i = 0; i < 8; ++i) {
      uint32_t v = pool[i % 4];
      v ^= hash_b;
      hash_b *= 0x58f38dedu;
      v *= hash_b;
      v ^= v >> 16;
      words[i] = v;
    }
    uint64_t val[4];
    for (size_t i = 0; i < 4; ++i) val[i] = uint64_t{words[2 * i]} | (uint64_t{words[2 * i + 1]} << 32);
    // pcg64_set_seed: state = val[0]:val[1], increment from val[2]:val[3]
    const unsigned __int128 init_state = (static_cast<unsigned __int128>(val[0]) << 64) | val[1];
    const unsigned __int128 init_seq = (static_cast<unsigned __int128>(val[2]) << 64) | val[3];
    state_ = 0;
    inc_ = (init_seq << 1) | 1;
    step();
    state_ += init_state;
    step();
  }

  uint64_t next64() {
    step();
    const auto hi = static_cast<uint64_t>(state_ >> 64), lo = static_cast<uint64_t>(state_);
    const auto rot = static_cast<unsigned>(state_ >> 122);
    const uint64_t x = hi ^ lo;
    return (x >> rot) | (x << ((64 - rot) & 63));
  }

  // Generator.integers(0, high) for int64 when high - 1 > 2^32 - 1 (bounded_lemire_uint64).
  uint64_t bounded(uint64_t high) {
    const uint64_t rng = high - 1, excl = high;
    DEEPINFER_CHECK(rng > 0xffffffffull, "numpy's 32-bit bounded path is not reproduced (bound {})", high);
    unsigned __int128 m = static_cast<unsigned __int128>(next64()) * excl;
    auto leftover = static_cast<uint64_t>(m);
    if (leftover < excl) {
      const uint64_t threshold = (UINT64_MAX - rng) % excl;
      while (leftover < threshold) {
        m = static_cast<unsigned __int128>(next64()) * excl;
        leftover = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

 private:
  void step() {
    constexpr unsigned __int128 kMult =
        (static_cast<unsigned __int128>(2549297995355413924ull) << 64) | 4865540595714422341ull;
    state_ = state_ * kMult + inc_;
  }
  unsigned __int128 state_ = 0, inc_ = 0;
};

}  // namespace

CompressedTokenMap compressed_token_map(const std::filesystem::path& tokenizer_json, int64_t rows) {
  // (Engram derives its token map from the tokenizer.)
  const nlohmann::json j =
      nlohmann::json::parse(read_text_file(tokenizer_json, kTokenizerFileLimit, "tokenizer"), nullptr, false);
  DEEPINFER_CHECK(!j.is_discarded() && j.contains("model") && j["model"].contains("vocab"),
                  "{}: not a tokenizers JSON with model.vocab", tokenizer_json.string());
  std::vector<std::string> token(static_cast<size_t>(rows));
  std::vector<bool> known(static_cast<size_t>(rows), false), added(static_cast<size_t>(rows), false);
  for (const auto& [text, id] : j["model"]["vocab"].items()) {
    const auto i = id.get<int64_t>();
    if (i >= 0 && i < rows) token[static_cast<size_t>(i)] = text, known[static_cast<size_t>(i)] = true;
  }
  if (j.contains("added_tokens"))
    for (const auto& a : j["added_tokens"]) {
      const auto i = a["id"].get<int64_t>();
      if (i >= 0 && i < rows) {
        token[static_cast<size_t>(i)] = a["content"].get<std::string>();
        known[static_cast<size_t>(i)] = added[static_cast<size_t>(i)] = true;
      }
    }
  const auto alphabet = byte_level_chars();
  CompressedTokenMap map;
  map.ids.resize(static_cast<size_t>(rows));
  std::map<std::string, int32_t> key_ids;
  for (int64_t i = 0; i < rows; ++i) {
    const auto u = static_cast<size_t>(i);
    // Added tokens go through the ByteLevel decoder too (ASCII specials map to themselves).
    const std::string text = known[u] ? byte_level_decode(token[u], alphabet) : std::string();
    std::string key;
    if (text.find("\xEF\xBF\xBD") != std::string::npos) {
      key = token[u];  // a partial UTF-8 byte token: keyed by its raw form
    } else {
      key = normalize(text);
      if (key.empty()) key = text;
    }
    auto [it, inserted] = key_ids.try_emplace(key, static_cast<int32_t>(key_ids.size()));
    map.ids[u] = it->second;
  }
  map.size = static_cast<int64_t>(key_ids.size());
  return map;
}

std::vector<int64_t> hash_multipliers(const std::vector<int64_t>& layer_ids, int64_t max_ngram,
                                      int64_t compressed_vocab) {
  DEEPINFER_CHECK(compressed_vocab > 0, "Engram: compressed vocabulary size must be positive");
  const int64_t bound = std::max<int64_t>(1, (INT64_MAX / compressed_vocab) / 2);
  std::vector<int64_t> out;
  for (int64_t layer : layer_ids) {
    NumpyPcg64 rng(static_cast<uint64_t>(10007 * layer));
    for (int64_t i = 0; i < max_ngram; ++i) out.push_back(static_cast<int64_t>(rng.bounded(static_cast<uint64_t>(bound))) * 2 + 1);
  }
  return out;
}

EngramTables load_engram_tables(const std::filesystem::path& model_dir, const io::DeepseekV41Config& c) {
  EngramTables t;
  const io::V41Engram& e = c.engram;
  if (!e.enabled()) return t;
  t.map = compressed_token_map(model_dir / "tokenizer.json", c.vocab_size);
  DEEPINFER_CHECK(t.map.size == e.compressed_vocab_size,
                  "{}: the tokenizer's compressed vocabulary has {} ids but text_config.engram_compressed_vocab_size "
                  "is {} (every Engram hash multiplier derives from it)",
                  (model_dir / "tokenizer.json").string(), t.map.size, e.compressed_vocab_size);
  t.pad_id = t.map.ids[static_cast<size_t>(e.pad_token_id)];
  t.multipliers = hash_multipliers(e.layer_ids, e.max_ngram_size, t.map.size);
  const io::EngramBuckets buckets = io::engram_buckets(e);
  for (size_t l = 0; l < e.layer_ids.size(); ++l) {
    t.primes.insert(t.primes.end(), buckets.primes[l].begin(), buckets.primes[l].end());
    t.offsets.insert(t.offsets.end(), buckets.offsets[l].begin(), buckets.offsets[l].end());
  }
  t.max_ngram = e.max_ngram_size;
  t.layers = static_cast<int64_t>(e.layer_ids.size());
  t.heads = e.n_heads;
  return t;
}

}  // namespace deepinfer::model::deepseek_v41
