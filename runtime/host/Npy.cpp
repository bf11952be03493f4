#include "runtime/host/Npy.h"

#include "ir/core/Error.h"
#include "runtime/host/AtomicFile.h"
#include "runtime/host/ReadFile.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tensorc {
namespace {

const char kMagic[] = "\x93NUMPY";

std::optional<DType> fromDescr(const std::string &d) {
  if (d == "<f8")
    return DType::F64;
  if (d == "<f4")
    return DType::F32;
  if (d == "<f2")
    return DType::F16;
  if (d == "<i8")
    return DType::I64;
  if (d == "<i4")
    return DType::I32;
  if (d == "|b1")
    return DType::I1;
  return std::nullopt;
}

const char *toDescr(DType d) {
  switch (d) {
  case DType::F64:
    return "<f8";
  case DType::F32:
  case DType::BF16:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::I64:
    return "<i8";
  case DType::I32:
    return "<i4";
  case DType::I1:
    return "|b1";
  }
  return "";
}

// Extracts the value text after `'key':` in the header dict.
std::string headerField(const std::string &header, const std::string &key,
                        const std::string &where) {
  size_t at = header.find("'" + key + "'");
  check(at != std::string::npos, where + ": .npy header has no '" + key + "'");
  size_t colon = header.find(':', at);
  check(colon != std::string::npos, where + ": malformed .npy header");
  size_t start = header.find_first_not_of(' ', colon + 1);
  check(start != std::string::npos, where + ": malformed .npy header");
  size_t end;
  if (header[start] == '(')
    end = header.find(')', start) + 1;
  else if (header[start] == '\'')
    end = header.find('\'', start + 1) + 1;
  else
    end = header.find_first_of(",}", start);
  check(end != std::string::npos && end > start, where + ": malformed .npy header");
  return header.substr(start, end - start);
}

} // namespace

HostTensor parseNpy(const std::string &bytes, const std::string &where,
                    std::optional<DType> expected) {
  check(bytes.size() >= 10 && std::memcmp(bytes.data(), kMagic, 6) == 0,
        where + ": not a .npy file (bad magic)");
  int major = uint8_t(bytes[6]);
  check(major >= 1 && major <= 3, where + ": unsupported .npy version " + std::to_string(major));
  size_t headerLen, offset;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
    offset = 10;
  } else {
    check(bytes.size() >= 12, where + ": truncated .npy header");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    offset = 12;
  }
  check(bytes.size() >= offset + headerLen, where + ": truncated .npy header");
  std::string header = bytes.substr(offset, headerLen);
  std::string descr = headerField(header, "descr", where);
  descr = descr.size() >= 2 ? descr.substr(1, descr.size() - 2) : descr;
  std::optional<DType> fileDType = fromDescr(descr);
  check(fileDType.has_value(),
        where + ": unsupported dtype '" + descr + "' (supported: <f8 <f4 <f2 <i8 <i4 |b1)");
  check(headerField(header, "fortran_order", where) == "False",
        where + ": Fortran-order arrays are not supported; save with np.ascontiguousarray");
  std::string shapeText = headerField(header, "shape", where);
  std::vector<int64_t> shape;
  {
    std::string inner = shapeText.substr(1, shapeText.size() - 2);
    std::stringstream ss(inner);
    std::string item;
    while (std::getline(ss, item, ',')) {
      size_t a = item.find_first_not_of(' ');
      if (a == std::string::npos)
        continue;
      item = item.substr(a, item.find_last_not_of(' ') - a + 1);
      check(!item.empty() && item.size() <= 15 &&
                item.find_first_not_of("0123456789") == std::string::npos,
            where + ": malformed shape " + shapeText);
      shape.push_back(std::stoll(item));
    }
  }
  DType target = *fileDType;
  if (expected) {
    bool bf16FromFloat = *expected == DType::BF16 && (target == DType::F32 || target == DType::F64);
    check(*expected == target || bf16FromFloat,
          where + ": holds " + std::string(dtypeName(target)) + " ('" + descr + "') but " +
              std::string(dtypeName(*expected)) + " is expected");
    target = *expected;
  }
  // The header's size against the file's before allocating anything: a
  // 144-byte file must not make us allocate gigabytes.
  size_t dataOffset = offset + headerLen;
  uint64_t needed = dtypeSize(*fileDType);
  std::string shapeStr = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    shapeStr += (i ? ", " : "") + std::to_string(shape[i]);
  shapeStr += ")";
  for (int64_t d : shape)
    check(!__builtin_mul_overflow(needed, uint64_t(d), &needed),
          where + ": shape " + shapeStr + " is too large");
  size_t have = bytes.size() - dataOffset;
  check(have == needed, where + ": holds " + std::to_string(have) + " data bytes; shape " +
                            shapeStr + " needs " + std::to_string(needed) +
                            (have < needed ? " (truncated?)" : ""));
  HostTensor file(*fileDType, shape);
  if (file.nbytes() > 0) // an empty tensor may have no buffer (memcpy of null is UB)
    std::memcpy(file.data(), bytes.data() + dataOffset, file.nbytes());
  if (target == *fileDType)
    return file;
  HostTensor converted(target, shape);
  for (int64_t i = 0; i < file.numel(); ++i)
    converted.setF(i, file.getF(i));
  return converted;
}

HostTensor readNpy(const std::string &path, std::optional<DType> expected) {
  std::string why;
  std::optional<std::string> bytes = readRegularFile(path, UINT64_MAX, &why);
  check(bytes.has_value(), path + ": cannot open the file: " + why);
  return parseNpy(*bytes, path, expected);
}

std::string formatNpy(const HostTensor &t) {
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i)
    shape += std::to_string(t.shape()[i]) + (t.shape().size() == 1      ? ","
                                             : i + 1 < t.shape().size() ? ", "
                                                                        : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + toDescr(t.dtype()) +
                       "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  if (t.dtype() == DType::BF16) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      float f = float(t.getF(i));
      out.append(reinterpret_cast<const char *>(&f), 4);
    }
  } else {
    out.append(reinterpret_cast<const char *>(t.data()), t.nbytes());
  }
  return out;
}

void writeNpy(const std::string &path, const HostTensor &t) {
  writeFileAtomically(path, formatNpy(t));
}

} // namespace tensorc
