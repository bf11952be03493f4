// .safetensors files (the Hugging Face format PyTorch users keep weights
// in): an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
//    ..., "__metadata__": {"key": "value"}}
// then the tensors' bytes (row-major, little-endian), offsets relative to
// the end of the header. Readers map the file and check everything before
// any tensor is used: the header's bounds and JSON, known dtypes, offsets
// inside the data, sizes that match dtype x shape, no overlaps.
#pragma once

#include "runtime/host/HostTensor.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tensorc {

struct SafetensorsEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0; // byte offsets into the data section
  uint64_t bytes = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries; // in data order
  std::map<std::string, std::string> metadata;
  uint64_t dataStart = 0; // 8 + N: where the data section starts in the file
};

// The largest header the format allows (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeader = uint64_t(100) << 20;

// Parses and checks the header of a file of `fileSize` bytes whose first
// `size` bytes (at least the header) are `data`. Throws Error naming `where`
// and the tensor at fault.
SafetensorsHeader parseSafetensorsHeader(const uint8_t *data, uint64_t size, uint64_t fileSize,
                                         const std::string &where);

// A file mapped read-only for as long as the object lives.
class SafetensorsFile {
public:
  // Maps and checks `path`; throws Error naming it.
  static std::shared_ptr<const SafetensorsFile> open(const std::string &path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  const std::string &path() const { return path_; }
  const std::vector<SafetensorsEntry> &entries() const { return header_.entries; }
  const std::map<std::string, std::string> &metadata() const { return header_.metadata; }
  // The entry named `name`, or nullptr.
  const SafetensorsEntry *find(const std::string &name) const;
  // The tensor's bytes, aligned to its element size (copied once at open
  // where the file places it unaligned). Throws Error where the file is now
  // shorter than when it was opened: the bytes are read from the mapping,
  // and a file must not be shortened while a SafetensorsFile has it open.
  const void *data(const SafetensorsEntry &entry) const;

private:
  SafetensorsFile() = default;
  std::string path_;
  const uint8_t *map_ = nullptr;
  uint64_t mapBytes_ = 0;
  int fd_ = -1; // the mapped file, open for data()'s size check
  SafetensorsHeader header_;
  std::map<std::string, std::vector<uint64_t>> aligned_; // unaligned tensors, copied
};

// Writes `tensors` (name, tensor) and `metadata` atomically, data in the
// given order, each tensor 8-byte aligned in the file.
void writeSafetensors(const std::string &path,
                      const std::vector<std::pair<std::string, const HostTensor *>> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

// The format's dtype names: "F32", "BF16", "BOOL", ...
std::string safetensorsDTypeName(DType dtype);

} // namespace tensorc
