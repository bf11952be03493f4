// SHA-256 (FIPS 180-4) for cache keys and entry checksums: a collision in a
// key would load the wrong binary, so a cryptographic hash rather than
// FNV. Self-contained so that the runtime needs no crypto library; checked
// against the NIST test vectors in test/unit/KernelCacheTest.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tensorc {

class Sha256 {
public:
  Sha256();
  Sha256 &update(const void *data, size_t size);
  Sha256 &update(const std::string &s) { return update(s.data(), s.size()); }
  std::array<uint8_t, 32> digest(); // finishes; the object is spent
  std::string hexDigest();

private:
  void block(const uint8_t *p);
  std::array<uint32_t, 8> h_;
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t length_ = 0;
};

std::string sha256Hex(const std::string &data);

} // namespace tensorc
