// libFuzzer: the safetensors header parser never crashes on any bytes; a bad file is a typed Error.
// Every tensor it accepts lies inside the data area, so reading all of its bytes is safe (ASan
// checks it).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;
  try {
    const auto file = deepinfer::io::SafeTensorsFile::from_bytes(std::string(reinterpret_cast<const char*>(data), size),
                                                                 "fuzz.safetensors");
    volatile uint8_t sink = 0;
    for (const auto& [name, t] : file->tensors())
      for (size_t i = 0; i < t.nbytes; ++i) sink = sink ^ static_cast<uint8_t>(t.data[i]);
  } catch (const deepinfer::Error&) {
  }
  return 0;
}
