// Safetensors reader: mmap, header validation, sharded checkpoints.
#include "io/safetensors.h"
#include "core/json_excerpt.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/text_file.h"
#include "io/safetensors_writer.h"

namespace deepinfer::io {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The reference implementation caps headers at 100 MB; anything larger is corrupt or hostile.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

std::string display_name(const fs::path& p) { return p.filename().string(); }

// numel x bits / 8 without overflow; false if the result does not fit in 64 bits or is not whole bytes.
bool expected_byte_length(const std::vector<int64_t>& shape, DType dtype, uint64_t& bytes) {
  unsigned __int128 n = 1;
  for (int64_t d : shape) {
    n *= static_cast<uint64_t>(d);
    if (n > (static_cast<unsigned __int128>(1) << 64)) return false;
  }
  const unsigned __int128 bits = n * dtype_bits(dtype);
  if (bits % 8 != 0) return false;
  const unsigned __int128 b = bits / 8;
  if (b > UINT64_MAX) return false;
  bytes = static_cast<uint64_t>(b);
  return true;
}

std::string shape_to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// Parses the header while recording top-level keys, so duplicated tensor names (which nlohmann
// would silently collapse to the last one) are reported instead of hiding a tensor.
json parse_header_json(std::string_view text, const std::string& file) {
  std::set<std::string> seen;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception& e) {
    fail("{}: safetensors header is not valid JSON ({})", file, e.what());
  }
  if (!duplicate.empty()) fail("{}: safetensors header lists tensor '{}' more than once", file, duplicate);
  if (!header.is_object()) fail("{}: safetensors header must be a JSON object, found {}", file, header.type_name());
  return header;
}

int64_t json_nonnegative_int(const json& v, const std::string& file, const std::string& tensor, const char* field) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) fail("{}: tensor '{}' {} value {} is too large", file, tensor, field, u);
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    fail("{}: tensor '{}' {} must be non-negative, found {}", file, tensor, field, v.get<int64_t>());
  }
  fail("{}: tensor '{}' {} must hold integers, found {}", file, tensor, field, json_excerpt(v));
}

TensorView parse_tensor_entry(const std::string& name, const json& entry, const std::string& file,
                              uint64_t data_size, std::pair<uint64_t, uint64_t>& offsets) {
  if (!entry.is_object()) fail("{}: tensor '{}' header entry must be an object, found {}", file, name, entry.type_name());
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) fail("{}: tensor '{}' header entry has no '{}'", file, name, key);
  }
  TensorView t;
  t.name = name;
  t.file = file;
  const json& dtype = entry["dtype"];
  if (!dtype.is_string()) fail("{}: tensor '{}' dtype must be a string, found {}", file, name, json_excerpt(dtype));
  if (!parse_dtype_name(dtype.get_ref<const std::string&>(), t.dtype)) {
    fail("{}: tensor '{}' has unsupported dtype '{}' (supported: F64, F32, F16, BF16, F8_E4M3, F8_E8M0, F4, I8, U8, "
         "I32, I64, BOOL)",
         file, name, dtype.get_ref<const std::string&>());
  }
  const json& shape = entry["shape"];
  if (!shape.is_array()) fail("{}: tensor '{}' shape must be an array, found {}", file, name, json_excerpt(shape));
  for (const json& d : shape) t.shape.push_back(json_nonnegative_int(d, file, name, "shape"));

  const json& off = entry["data_offsets"];
  if (!off.is_array() || off.size() != 2) {
    fail("{}: tensor '{}' data_offsets must be [begin, end], found {}", file, name, json_excerpt(off));
  }
  const auto begin = static_cast<uint64_t>(json_nonnegative_int(off[0], file, name, "data_offsets"));
  const auto end = static_cast<uint64_t>(json_nonnegative_int(off[1], file, name, "data_offsets"));
  if (begin > end) fail("{}: tensor '{}' data_offsets [{}, {}] have begin after end", file, name, begin, end);
  if (end > data_size) {
    fail("{}: tensor '{}' data_offsets [{}, {}] exceed the data area of {} bytes (file truncated?)", file, name, begin,
         end, data_size);
  }
  uint64_t expected = 0;
  if (!expected_byte_length(t.shape, t.dtype, expected)) {
    fail("{}: tensor '{}' shape {} with dtype {} is not a whole number of bytes or overflows", file, name,
         shape_to_string(t.shape), dtype_name(t.dtype));
  }
  if (expected != end - begin) {
    fail("{}: tensor '{}' shape {} x {} needs {} bytes but data_offsets [{}, {}] span {} bytes", file, name,
         shape_to_string(t.shape), dtype_name(t.dtype), expected, begin, end, end - begin);
  }
  t.nbytes = static_cast<size_t>(end - begin);
  offsets = {begin, end};
  return t;
}

// Index file names must name a file inside the model folder: relative, no "..", and no symlink
// that resolves outside it (a downloaded index must not make us map arbitrary files).
fs::path resolve_shard_path(const fs::path& dir, const std::string& file, const std::string& index_name) {
  const fs::path rel(file);
  if (file.empty()) fail("{}: weight_map has an empty file name", index_name);
  if (rel.is_absolute() || rel.has_root_name() || rel.has_root_directory()) {
    fail("{}: shard file name '{}' must be relative to the model folder", index_name, file);
  }
  for (const auto& part : rel) {
    if (part == "..") fail("{}: shard file name '{}' escapes the model folder ('..')", index_name, file);
  }
  const fs::path full = dir / rel;
  std::error_code ec;
  if (!fs::exists(full, ec)) {
    fail("{}: names shard '{}' but {} does not exist", index_name, file, full.string());
  }
  const fs::path real_dir = fs::canonical(dir, ec);
  const fs::path real_file = fs::canonical(full, ec);
  if (ec) fail("{}: cannot resolve shard '{}': {}", index_name, file, ec.message());
  const auto mismatch = std::mismatch(real_dir.begin(), real_dir.end(), real_file.begin(), real_file.end());
  if (mismatch.first != real_dir.end()) {
    fail("{}: shard '{}' resolves to {}, outside the model folder {}", index_name, file, real_file.string(),
         real_dir.string());
  }
  if (!fs::is_regular_file(real_file, ec)) fail("{}: shard '{}' is not a regular file", index_name, file);
  return full;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_string() const { return shape_to_string(shape); }

std::shared_ptr<SafeTensorsFile> SafeTensorsFile::open(const fs::path& path) {
  const std::string file = display_name(path);
  std::shared_ptr<SafeTensorsFile> st(new SafeTensorsFile());
  st->path_ = path;

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open safetensors file {}: {}", path.string(), std::strerror(errno));
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    const int err = errno;
    ::close(fd);
    fail("cannot stat {}: {}", path.string(), std::strerror(err));
  }
  if (!S_ISREG(sb.st_mode)) {
    ::close(fd);
    fail("{} is not a regular file (expected a .safetensors file)", path.string());
  }
  const auto file_size = static_cast<uint64_t>(sb.st_size);
  if (file_size < 8) {
    ::close(fd);
    fail("{}: file is {} bytes, too short for a safetensors header (needs at least 8)", file, file_size);
  }
  void* map = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping stays valid after close
  if (map == MAP_FAILED) fail("{}: mmap of {} bytes failed: {}", file, file_size, std::strerror(map_err));
  st->map_ = map;
  st->map_size_ = file_size;
  st->parse(static_cast<const std::byte*>(map), file_size, file);
  return st;
}

std::shared_ptr<SafeTensorsFile> SafeTensorsFile::from_bytes(std::string bytes, const std::string& name) {
  std::shared_ptr<SafeTensorsFile> st(new SafeTensorsFile());
  st->path_ = name;
  st->owned_ = std::move(bytes);
  if (st->owned_.size() < 8)
    fail("{}: file is {} bytes, too short for a safetensors header (needs at least 8)", name, st->owned_.size());
  st->parse(reinterpret_cast<const std::byte*>(st->owned_.data()), st->owned_.size(), name);
  return st;
}

void SafeTensorsFile::parse(const std::byte* bytes, uint64_t file_size, const std::string& file) {
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);  // little-endian
  if (header_len > kMaxHeaderBytes) {
    fail("{}: header length {} exceeds the 100 MB limit (not a safetensors file?)", file, header_len);
  }
  if (header_len > file_size - 8) {
    fail("{}: header length {} is larger than the {} bytes after the length field (file truncated?)", file,
         header_len, file_size - 8);
  }
  const std::string_view header_text(reinterpret_cast<const char*>(bytes + 8), header_len);
  const json header = parse_header_json(header_text, file);
  const uint64_t data_size = file_size - 8 - header_len;
  const std::byte* data = bytes + 8 + header_len;

  std::vector<std::pair<std::pair<uint64_t, uint64_t>, std::string>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("{}: __metadata__ must be an object of strings, found {}", file, entry.type_name());
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail("{}: __metadata__ value for '{}' must be a string, found {}", file, key, json_excerpt(value));
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    std::pair<uint64_t, uint64_t> offsets;
    TensorView t = parse_tensor_entry(name, entry, file, data_size, offsets);
    t.data = data + offsets.first;
    ranges.push_back({offsets, name});
    tensors_.emplace(name, std::move(t));
  }
  // Overlapping byte ranges would let two tensors alias each other's data.
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    const auto& [prev_off, prev_name] = ranges[i - 1];
    const auto& [off, name] = ranges[i];
    if (off.first < prev_off.second && off.first != off.second) {
      fail("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", file, prev_name, prev_off.first, prev_off.second, name,
           off.first, off.second);
    }
  }
}

SafeTensorsFile::~SafeTensorsFile() {
  if (map_) ::munmap(map_, map_size_);
}

Checkpoint Checkpoint::open_file(const fs::path& file) {
  Checkpoint ck;
  ck.dir_ = file.parent_path();
  auto st = SafeTensorsFile::open(file);
  for (const auto& [name, view] : st->tensors()) ck.tensors_.emplace(name, view);
  ck.files_.push_back(std::move(st));
  return ck;
}

Checkpoint Checkpoint::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) fail("model folder {} does not exist", dir.string());
  if (!fs::is_directory(dir, ec)) fail("{} is not a folder (expected a model folder with safetensors weights)", dir.string());

  const fs::path index_path = dir / "model.safetensors.index.json";
  if (!fs::exists(index_path, ec)) {
    if (fs::exists(dir / "model.safetensors", ec)) {
      Checkpoint ck = open_file(dir / "model.safetensors");
      ck.dir_ = dir;
      return ck;
    }
    std::vector<fs::path> candidates;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".safetensors" && entry.is_regular_file()) candidates.push_back(entry.path());
    }
    if (candidates.empty()) fail("no safetensors weights in {}", dir.string());
    if (candidates.size() > 1) {
      std::sort(candidates.begin(), candidates.end());
      fail("{} has {} .safetensors files but no model.safetensors.index.json saying which hold the weights "
           "(first two: {}, {})",
           dir.string(), candidates.size(), display_name(candidates[0]), display_name(candidates[1]));
    }
    Checkpoint ck = open_file(candidates[0]);
    ck.dir_ = dir;
    return ck;
  }

  const std::string index_name = "model.safetensors.index.json";
  json index;
  try {
    index = json::parse(read_text_file(index_path, kWeightIndexFileLimit, "weight index"));
  } catch (const json::exception& e) {
    fail("{}: not valid JSON ({})", index_name, e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    fail("{}: expected an object with a 'weight_map' object (tensor name -> shard file)", index_name);
  }
  const json& weight_map = index["weight_map"];
  if (weight_map.empty()) fail("{}: weight_map is empty", index_name);

  // Open each shard once, in name order, and check the index against what each shard really holds.
  std::map<std::string, std::shared_ptr<SafeTensorsFile>> shards;
  for (const auto& [tensor, file_json] : weight_map.items()) {
    if (!file_json.is_string()) fail("{}: weight_map entry '{}' must be a file name, found {}", index_name, tensor, json_excerpt(file_json));
    const std::string& file = file_json.get_ref<const std::string&>();
    if (!shards.count(file)) shards[file] = SafeTensorsFile::open(resolve_shard_path(dir, file, index_name));
  }
  Checkpoint ck;
  ck.dir_ = dir;
  for (const auto& [tensor, file_json] : weight_map.items()) {
    const std::string& file = file_json.get_ref<const std::string&>();
    const auto& shard_tensors = shards.at(file)->tensors();
    auto it = shard_tensors.find(tensor);
    if (it == shard_tensors.end()) {
      fail("{}: tensor '{}' is listed in shard '{}' but that shard has no such tensor", index_name, tensor, file);
    }
    ck.tensors_.emplace(tensor, it->second);
  }
  for (const auto& [file, shard] : shards) {
    for (const auto& [tensor, view] : shard->tensors()) {
      auto it = weight_map.find(tensor);
      if (it == weight_map.end()) {
        fail("{}: tensor '{}' is not listed in {} (index and shards disagree)", file, tensor, index_name);
      }
      if (it->get_ref<const std::string&>() != file) {
        fail("{}: tensor '{}' is also stored here but {} assigns it to '{}'", file, tensor, index_name,
             it->get_ref<const std::string&>());
      }
    }
    ck.files_.push_back(shard);
  }
  return ck;
}

bool Checkpoint::contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

const TensorView& Checkpoint::get(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) fail("tensor '{}' not found in checkpoint {}", name, dir_.string());
  return it->second;
}

size_t Checkpoint::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, view] : tensors_) total += view.nbytes;
  return total;
}

}  // namespace deepinfer::io
