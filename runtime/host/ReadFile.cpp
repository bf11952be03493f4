#include "runtime/host/ReadFile.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace tensorc {

std::optional<std::string> readRegularFile(const std::string &path, uint64_t maxBytes,
                                           std::string *why) {
  auto refuse = [&](std::string reason) -> std::optional<std::string> {
    if (why)
      *why = std::move(reason);
    return std::nullopt;
  };
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return refuse(std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    return refuse("not a regular file");
  if (uint64_t(st.st_size) > maxBytes)
    return refuse("larger than " + std::to_string(maxBytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size_t(st.st_size), '\0');
  if (!in || !in.read(bytes.data(), std::streamsize(bytes.size())))
    return refuse("reading failed");
  return bytes;
}

} // namespace tensorc
