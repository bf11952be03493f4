// libFuzzer target: kernel cache entries (files anyone with access to the
// cache directory could have written). The key digest is the one a fixed
// key gives, and also the entry's own bytes 8..72, so checksums are reached.
#include "runtime/cache/KernelCache.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  tensorc::KernelKey key{"src", "sm_90", "nvrtc", "", "fuzz"};
  tensorc::KernelCache::decodeEntry(bytes, key.digest());
  if (bytes.size() >= 72)
    tensorc::KernelCache::decodeEntry(bytes, bytes.substr(8, 64));
  return 0;
}
