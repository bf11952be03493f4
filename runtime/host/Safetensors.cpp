#include "runtime/host/Safetensors.h"
#include "runtime/host/ReadFile.h"

#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <vector>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tensorc {

using json = nlohmann::json;

namespace {

struct DTypeName {
  DType dtype;
  const char *name;
};
constexpr DTypeName kDTypeNames[] = {{DType::F64, "F64"},  {DType::F32, "F32"}, {DType::F16, "F16"},
                                     {DType::BF16, "BF16"}, {DType::I64, "I64"}, {DType::I32, "I32"},
                                     {DType::I1, "BOOL"}};

uint64_t readLittleEndian64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

// The header's JSON is one object of tensors (and __metadata__), each an
// object of a string and two arrays of numbers: 3 levels. Deeper input is
// refused before anything recursive (a parse into values, a dump) sees it.
constexpr int kMaxHeaderDepth = 8;

// What the safetensors format forbids and a JSON parser accepts, found in
// one linear, non-recursive pass (nlohmann's SAX interface): nesting deeper
// than kMaxHeaderDepth, and a key repeated in any object (a parser keeps
// the last silently). `problem` says which; a syntax error is nlohmann's.
class HeaderChecker : public nlohmann::json_sax<json> {
public:
  std::string problem;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return deeper();
  }
  bool key(string_t &k) override {
    if (keys_.back().insert(k).second)
      return true;
    problem = keys_.size() == 1 ? "tensor '" + excerpt(k) + "' appears twice"
                                : "the key '" + excerpt(k) + "' appears twice in one object";
    return false;
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return deeper(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string &, const nlohmann::detail::exception &e) override {
    std::string what = e.what();
    size_t at = what.find("] ");
    what = at == std::string::npos ? what : what.substr(at + 2);
    if (what.size() > 160) // nlohmann quotes the offending token whole
      what = what.substr(0, 157) + "...";
    problem = "header is not valid JSON (" + what + ")";
    return false;
  }

  // At most 60 characters of `text`, for a message.
  static std::string excerpt(const std::string &text) {
    return text.size() <= 60 ? text : text.substr(0, 57) + "...";
  }

private:
  bool deeper() {
    if (++depth_ <= kMaxHeaderDepth)
      return true;
    problem = "header nested deeper than " + std::to_string(kMaxHeaderDepth) + " levels";
    return false;
  }
  int depth_ = 0;
  std::vector<std::set<std::string>> keys_;
};

// A JSON value in a message: at most 60 characters of its text.
std::string excerpt(const json &v) { return HeaderChecker::excerpt(v.dump()); }

// A non-negative integer JSON value, or a failure naming `what`.
uint64_t unsignedValue(const json &v, const std::string &what) {
  if (v.is_number_unsigned())
    return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return uint64_t(v.get<int64_t>());
  fail(what + ": expected a non-negative integer, got " + excerpt(v));
}

} // namespace

std::string safetensorsDTypeName(DType dtype) {
  for (const DTypeName &d : kDTypeNames)
    if (d.dtype == dtype)
      return d.name;
  fail("safetensors: no name for dtype " + std::string(dtypeName(dtype)));
}

SafetensorsHeader parseSafetensorsHeader(const uint8_t *data, uint64_t size, uint64_t fileSize,
                                         const std::string &where) {
  const std::string at = where + ": safetensors: ";
  check(fileSize >= 8 && size >= 8, at + "shorter than its 8-byte header length");
  const uint64_t n = readLittleEndian64(data);
  check(n <= kMaxSafetensorsHeader, at + "header of " + std::to_string(n) + " bytes (at most " +
                                        std::to_string(kMaxSafetensorsHeader) + ")");
  check(n <= fileSize - 8, at + "header of " + std::to_string(n) + " bytes in a file of " +
                               std::to_string(fileSize) + " (truncated?)");
  check(n <= size - 8, at + "header not read in full");
  const char *text = reinterpret_cast<const char *>(data + 8);
  // One JSON object, padded with spaces at most (the format's words): a
  // byte-order mark or NUL bytes are not JSON text, though parsers skip them.
  check(!(n >= 3 && std::memcmp(text, "\xEF\xBB\xBF", 3) == 0), at + "header starts with a byte-order mark");
  check(std::memchr(text, '\0', size_t(n)) == nullptr, at + "header contains NUL bytes");
  HeaderChecker checker;
  if (!json::sax_parse(text, text + n, &checker))
    fail(at + checker.problem);
  json header;
  try {
    header = json::parse(text, text + n); // checked above: shallow, no repeated key
  } catch (const json::exception &e) {
    fail(at + "header is not valid JSON (" + e.what() + ")");
  }
  check(header.is_object(), at + "header is not a JSON object");
  SafetensorsHeader h;
  h.dataStart = 8 + n;
  const uint64_t dataBytes = fileSize - h.dataStart;
  for (const auto &[name, v] : header.items()) {
    if (name == "__metadata__") {
      check(v.is_object(), at + "__metadata__ is not an object");
      for (const auto &[key, value] : v.items()) {
        check(value.is_string(), at + "__metadata__ '" + key + "' is not a string");
        h.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string what = at + "tensor '" + name + "'";
    check(v.is_object(), what + ": not an object");
    for (const auto &[key, unused] : v.items())
      check(key == "dtype" || key == "shape" || key == "data_offsets", what + ": unknown field '" + key + "'");
    check(v.contains("dtype") && v["dtype"].is_string(), what + ": no dtype");
    check(v.contains("shape") && v["shape"].is_array(), what + ": no shape");
    check(v.contains("data_offsets") && v["data_offsets"].is_array() && v["data_offsets"].size() == 2,
          what + ": data_offsets is not [begin, end]");
    SafetensorsEntry e;
    e.name = name;
    const std::string dt = v["dtype"].get<std::string>();
    const DTypeName *known = std::find_if(std::begin(kDTypeNames), std::end(kDTypeNames),
                                          [&](const DTypeName &d) { return dt == d.name; });
    check(known != std::end(kDTypeNames),
          what + ": dtype " + dt + " is not supported (F64 F32 F16 BF16 I64 I32 BOOL)");
    e.dtype = known->dtype;
    uint64_t elements = 1;
    for (const json &d : v["shape"]) {
      uint64_t size = unsignedValue(d, what + ": shape");
      check(size <= uint64_t(INT64_MAX), what + ": shape " + excerpt(v["shape"]) + " is too large");
      e.shape.push_back(int64_t(size));
      check(size == 0 || elements <= dataBytes / size, what + ": shape " + excerpt(v["shape"]) +
                                                           " needs more bytes than the file has");
      elements *= size;
    }
    const uint64_t begin = unsignedValue(v["data_offsets"][0], what + ": data_offsets");
    const uint64_t end = unsignedValue(v["data_offsets"][1], what + ": data_offsets");
    check(begin <= end && end <= dataBytes,
          what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
              "] outside the data section of " + std::to_string(dataBytes) + " bytes");
    const uint64_t bytes = elements * dtypeSize(e.dtype); // elements <= dataBytes: no overflow
    check(end - begin == bytes, what + ": " + std::to_string(end - begin) + " bytes for " + dt + " " +
                                    excerpt(v["shape"]) + " (needs " + std::to_string(bytes) + ")");
    e.begin = begin;
    e.bytes = bytes;
    h.entries.push_back(std::move(e));
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.bytes < b.bytes;
  });
  for (size_t i = 1; i < h.entries.size(); ++i) {
    const SafetensorsEntry &a = h.entries[i - 1], &b = h.entries[i];
    check(b.begin >= a.begin + a.bytes, at + "tensors '" + a.name + "' and '" + b.name + "' overlap");
  }
  return h;
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  std::string why;
  const int fd = openRegularFile(path, &why); // a FIFO is refused, never waited on
  check(fd >= 0, path + ": cannot open (" + why + ")");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(path + ": cannot inspect the file");
  }
  f->mapBytes_ = uint64_t(st.st_size);
  if (f->mapBytes_ > 0) {
    void *m = ::mmap(nullptr, size_t(f->mapBytes_), PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      fail(path + ": cannot map (" + std::strerror(e) + ")");
    }
    f->map_ = static_cast<const uint8_t *>(m);
  }
  f->fd_ = fd; // kept open: data() checks the file's size against the mapping
  f->header_ = parseSafetensorsHeader(f->map_, f->mapBytes_, f->mapBytes_, path);
  for (const SafetensorsEntry &e : f->header_.entries) {
    const uint8_t *p = f->map_ + f->header_.dataStart + e.begin;
    if (e.bytes && reinterpret_cast<uintptr_t>(p) % dtypeSize(e.dtype) != 0) {
      std::vector<uint64_t> copy((e.bytes + 7) / 8);
      std::memcpy(copy.data(), p, size_t(e.bytes));
      f->aligned_[e.name] = std::move(copy);
    }
  }
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_)
    ::munmap(const_cast<uint8_t *>(map_), size_t(mapBytes_));
  if (fd_ >= 0)
    ::close(fd_);
}

const SafetensorsEntry *SafetensorsFile::find(const std::string &name) const {
  for (const SafetensorsEntry &e : header_.entries)
    if (e.name == name)
      return &e;
  return nullptr;
}

const void *SafetensorsFile::data(const SafetensorsEntry &entry) const {
  if (auto it = aligned_.find(entry.name); it != aligned_.end())
    return it->second.data();
  // Reading a mapped page past the file's end is SIGBUS: a file truncated
  // since it was opened is an error here instead (one truncated between
  // this check and the read still faults: the documented contract is that
  // a weights file is not shortened while open).
  struct stat st;
  check(fd_ < 0 || (::fstat(fd_, &st) == 0 && uint64_t(st.st_size) >= mapBytes_),
        path_ + ": the file is shorter than when it was opened (changed while in use): open it again");
  return map_ + header_.dataStart + entry.begin;
}

void writeSafetensors(const std::string &path,
                      const std::vector<std::pair<std::string, const HostTensor *>> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  json header = json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto &[name, t] : tensors) {
    check(name != "__metadata__" && !header.contains(name), path + ": safetensors: tensor name '" + name +
                                                               "' is reserved or repeated");
    offset = (offset + 7) / 8 * 8;
    header[name] = {{"dtype", safetensorsDTypeName(t->dtype())},
                    {"shape", t->shape()},
                    {"data_offsets", {offset, offset + t->nbytes()}}};
    offset += t->nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' '); // the data starts 8-byte aligned
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[size_t(i)] = char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  bytes += text;
  const size_t dataStart = bytes.size();
  bytes.resize(dataStart + offset, '\0');
  for (const auto &[name, t] : tensors)
    if (t->nbytes())
      std::memcpy(&bytes[dataStart + header[name]["data_offsets"][0].get<uint64_t>()], t->data(), t->nbytes());
  writeFileAtomically(path, bytes);
}

} // namespace tensorc
