// libFuzzer target: the .safetensors header reader (weights files given to
// `tensorc run --weights`, tc_weights_open, Session.bind_weights).
#include "ir/core/Error.h"
#include "runtime/host/Safetensors.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    tensorc::SafetensorsHeader h = tensorc::parseSafetensorsHeader(data, size, size, "fuzz.safetensors");
    // Every entry the reader accepts lies inside the input.
    for (const tensorc::SafetensorsEntry &e : h.entries)
      if (h.dataStart + e.begin + e.bytes > size)
        __builtin_trap();
  } catch (const tensorc::Error &) {
  }
  return 0;
}
