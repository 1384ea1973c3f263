#include "tokenizer/utf8.h"

#include <unordered_map>

namespace deepinfer::utf8 {
namespace {

// Allowed range of the second byte for a given lead byte (RFC 3629 table), which excludes
// overlong forms, surrogates and code points above U+10FFFF.
bool second_byte_ok(unsigned char lead, unsigned char second) {
  if (lead == 0xE0) return second >= 0xA0 && second <= 0xBF;
  if (lead == 0xED) return second >= 0x80 && second <= 0x9F;
  if (lead == 0xF0) return second >= 0x90 && second <= 0xBF;
  if (lead == 0xF4) return second >= 0x80 && second <= 0x8F;
  return second >= 0x80 && second <= 0xBF;
}

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

SequenceScan scan_sequence(std::string_view bytes, size_t position) {
  using Kind = SequenceScan::Kind;
  const auto lead = static_cast<unsigned char>(bytes[position]);
  if (lead < 0x80) return {Kind::kComplete, 1};
  size_t needed = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    needed = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    needed = 3;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    needed = 4;
  } else {
    return {Kind::kInvalid, 1};
  }
  const size_t available = bytes.size() - position;
  for (size_t i = 1; i < needed; ++i) {
    if (i >= available) return {Kind::kTruncated, available};
    const auto byte = static_cast<unsigned char>(bytes[position + i]);
    const bool ok = i == 1 ? second_byte_ok(lead, byte) : is_continuation(byte);
    if (!ok) return {Kind::kInvalid, i};
  }
  return {Kind::kComplete, needed};
}

size_t find_invalid_byte(std::string_view bytes) {
  size_t position = 0;
  while (position < bytes.size()) {
    if (static_cast<unsigned char>(bytes[position]) < 0x80) {
      ++position;
      continue;
    }
    const SequenceScan scan = scan_sequence(bytes, position);
    if (scan.kind != SequenceScan::Kind::kComplete) return position;
    position += scan.length;
  }
  return std::string_view::npos;
}

std::string repair_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t position = 0;
  while (position < bytes.size()) {
    const SequenceScan scan = scan_sequence(bytes, position);
    if (scan.kind == SequenceScan::Kind::kComplete) {
      out.append(bytes.substr(position, scan.length));
    } else {
      out.append(kReplacementCharacter);
    }
    position += scan.length;
  }
  return out;
}

uint32_t decode_next(std::string_view valid, size_t& position) {
  const auto lead = static_cast<unsigned char>(valid[position]);
  auto byte_at = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(valid[position + i]) & 0x3F); };
  uint32_t code_point;
  if (lead < 0x80) {
    code_point = lead;
    position += 1;
  } else if (lead < 0xE0) {
    code_point = ((lead & 0x1Fu) << 6) | byte_at(1);
    position += 2;
  } else if (lead < 0xF0) {
    code_point = ((lead & 0x0Fu) << 12) | (byte_at(1) << 6) | byte_at(2);
    position += 3;
  } else {
    code_point = ((lead & 0x07u) << 18) | (byte_at(1) << 12) | (byte_at(2) << 6) | byte_at(3);
    position += 4;
  }
  return code_point;
}

void append_code_point(std::string& out, uint32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

bool is_white_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

const std::array<uint32_t, 256>& byte_to_code_point() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> result{};
    uint32_t next_unprintable = 256;
    for (uint32_t byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
                             (byte >= 0xAE && byte <= 0xFF);
      result[byte] = printable ? byte : next_unprintable++;
    }
    return result;
  }();
  return table;
}

int byte_from_code_point(uint32_t code_point) {
  static const std::unordered_map<uint32_t, int> inverse = [] {
    std::unordered_map<uint32_t, int> result;
    const auto& forward = byte_to_code_point();
    for (int byte = 0; byte < 256; ++byte) result.emplace(forward[byte], byte);
    return result;
  }();
  const auto it = inverse.find(code_point);
  return it == inverse.end() ? -1 : it->second;
}

}  // namespace deepinfer::utf8
