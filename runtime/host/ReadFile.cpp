#include "runtime/host/ReadFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace tensorc {

namespace {

const char *kindOf(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

} // namespace

std::string fileKindProblem(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode))
    return "";
  return std::string("not a regular file (") + kindOf(st.st_mode) + ")";
}

int openRegularFile(const std::string &path, std::string *why) {
  // O_NONBLOCK: opening a FIFO for reading waits for a writer otherwise.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (why)
      *why = std::strerror(errno);
    return -1;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (why)
      *why = std::string("not a regular file (") + kindOf(st.st_mode) + ")";
    ::close(fd);
    return -1;
  }
  // Reads of a regular file do not block; clear the flag all the same.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0)
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

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
    return refuse(std::string("not a regular file (") + kindOf(st.st_mode) + ")");
  if (uint64_t(st.st_size) > maxBytes)
    return refuse("larger than " + std::to_string(maxBytes) + " bytes");
  std::ifstream in(path, std::ios::binary);
  std::string bytes(size_t(st.st_size), '\0');
  if (!in || !in.read(bytes.data(), std::streamsize(bytes.size())))
    return refuse("reading failed");
  return bytes;
}

} // namespace tensorc
