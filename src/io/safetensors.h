#pragma once
// Safetensors checkpoints: one file or a sharded folder (model.safetensors.index.json), memory-mapped.
// Every header is validated (length bound, JSON, dtype, shape x dtype == byte length, offsets inside
// the data area, no overlaps, index file names inside the folder) before any tensor is handed out.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace deepinfer::io {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // points into the mmap; valid while the owning file is open
  size_t nbytes = 0;
  std::string file;  // file name the tensor lives in (for error messages)

  int64_t numel() const;
  int64_t dim(size_t i) const { return shape.at(i); }
  std::string shape_string() const;  // "[512, 64]"
};

// One mmapped .safetensors file.
class SafeTensorsFile {
 public:
  static std::shared_ptr<SafeTensorsFile> open(const std::filesystem::path& path);  // throws Error
  // The same checks over bytes in memory (fuzzing, tests); `name` is used in errors.
  static std::shared_ptr<SafeTensorsFile> from_bytes(std::string bytes, const std::string& name);
  ~SafeTensorsFile();
  SafeTensorsFile(const SafeTensorsFile&) = delete;
  SafeTensorsFile& operator=(const SafeTensorsFile&) = delete;

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  SafeTensorsFile() = default;
  // Validates the header of the `size` bytes of a whole file and indexes its tensors.
  void parse(const std::byte* bytes, uint64_t size, const std::string& file);
  std::filesystem::path path_;
  std::string owned_;  // from_bytes: the file's bytes
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a model folder: model.safetensors, or the shards listed in
// model.safetensors.index.json (every listed tensor must be found in the shard the index names).
class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& dir);  // throws Error
  // Opens a single file as a checkpoint (golden files, tests).
  static Checkpoint open_file(const std::filesystem::path& file);

  bool contains(std::string_view name) const;
  const TensorView& get(std::string_view name) const;  // throws Error naming the tensor and folder
  const std::map<std::string, TensorView, std::less<>>& tensors() const { return tensors_; }
  size_t total_bytes() const;

 private:
  std::filesystem::path dir_;
  std::vector<std::shared_ptr<SafeTensorsFile>> files_;
  std::map<std::string, TensorView, std::less<>> tensors_;
};

// Widens any float tensor (F32, F64, F16, BF16, F8_E4M3, F8_E8M0) to float32; integer tensors are
// converted by value. Throws for packed FP4 (use dequantize_fp4).
std::vector<float> to_float(const TensorView& t);
// Integer tensors (I8, U8, I32, I64, BOOL) to int64.
std::vector<int64_t> to_int64(const TensorView& t);

// Block-scaled FP8 e4m3 weight [out, in] -> float32. The scale is either `weight_scale_inv`
// (F32, 128x128 blocks) or `.scale` (F8_E8M0, any square block, e.g. 128x128 or 32x32). The block
// size is derived from the shapes: block = ceil(dim / scale_dim) rounded up to a power of two.
std::vector<float> dequantize_fp8_blocks(const TensorView& weight, const TensorView& scale);

// Packed FP4 e2m1 weight stored as I8/U8 [out, in/2] (low nibble = even element) with one
// E8M0 scale per 32 elements along the input dimension ([out, in/32]) -> float32 [out, in].
std::vector<float> dequantize_fp4(const TensorView& weight, const TensorView& scale);

}  // namespace deepinfer::io
