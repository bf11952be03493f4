// libFuzzer target: the .npy reader (inputs of `tensorc run`, tests).
#include "ir/core/Error.h"
#include "runtime/host/Npy.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  for (auto expected : {std::optional<tensorc::DType>(), std::optional(tensorc::DType::BF16)})
    try {
      tensorc::parseNpy(bytes, "fuzz.npy", expected);
    } catch (const tensorc::Error &) {
    }
  return 0;
}
