// libFuzzer target: the artifact reader and its manifest checks. The
// checksum is recomputed before parsing so that mutations reach the manifest
// (a crafted file can always carry a valid checksum). Nothing is loaded or
// run: a cpu artifact's code is trusted (docs/artifact-format.md).
#include "ir/core/Error.h"
#include "runtime/artifact/Artifact.h"

#include <cstdint>
#include <cstring>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string bytes(reinterpret_cast<const char *>(data), size);
  if (bytes.size() >= 48) {
    uint64_t sum = tensorc::artifact::checksum(bytes.data() + 48, bytes.size() - 48);
    std::memcpy(bytes.data() + 40, &sum, 8);
  }
  try {
    tensorc::artifact::parse(bytes, "fuzz.tcx");
  } catch (const tensorc::Error &) {
  }
  return 0;
}
