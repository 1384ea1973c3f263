#pragma once
// A fixture's golden tensors (a safetensors file written by the reference), read as ids or floats.
#include <cstdint>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace deepinfer::testing_util {

struct Golden {
  io::Checkpoint file;
  std::vector<int32_t> ids(const std::string& key) const {
    std::vector<int32_t> out;
    for (int64_t v : io::to_int64(file.get(key))) out.push_back(static_cast<int32_t>(v));
    return out;
  }
  std::vector<float> floats(const std::string& key) const { return io::to_float(file.get(key)); }
};

}  // namespace deepinfer::testing_util
