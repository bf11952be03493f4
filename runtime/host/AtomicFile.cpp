#include "runtime/host/AtomicFile.h"

#include "ir/core/Error.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <climits>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tensorc {
namespace {

// Writes all of `bytes` to `fd`; false on any error (errno set).
bool writeAll(int fd, const std::string &bytes) {
  const char *p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += n;
    left -= size_t(n);
  }
  return true;
}

std::string parentDir(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// A device node, FIFO, socket or /dev/stdout is written in place: renaming a
// temporary file over it would replace the node itself (as root, `-o
// /dev/null` would destroy /dev/null).
void writeInPlace(const std::string &path, const std::string &bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  check(fd >= 0, path + ": cannot open for writing: " + std::strerror(errno));
  bool ok = writeAll(fd, bytes);
  int err = errno;
  ::close(fd);
  check(ok, path + ": writing failed: " + std::strerror(err));
}

} // namespace

void writeFileAtomically(const std::string &path, const std::string &bytes) {
  check(!path.empty(), "an output path is empty");
  struct stat st;
  // stat follows symlinks: a link to a regular file is replaced atomically
  // by writing beside its target, so the link itself survives.
  std::string target = path;
  if (::stat(path.c_str(), &st) == 0) {
    check(!S_ISDIR(st.st_mode), path + ": is a directory, not a file");
    if (!S_ISREG(st.st_mode))
      return writeInPlace(path, bytes);
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved))
      target = resolved;
  }
  // Unique per process and per call, so concurrent writers (threads or
  // processes) never share a temporary file; O_EXCL refuses a planted file
  // or symlink of that name; rename is atomic on POSIX.
  static std::atomic<uint64_t> counter{0};
  std::string tmp = target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  check(fd >= 0, path + ": cannot write the file: " + std::strerror(errno));
  // fsync before rename: after a power loss the name must never point at an
  // empty or partial file.
  bool ok = writeAll(fd, bytes) && ::fsync(fd) == 0;
  int err = errno;
  ok = (::close(fd) == 0) && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    fail(path + ": writing failed: " + std::strerror(err ? err : EIO));
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    fail(path + ": cannot move the finished file into place: " + std::strerror(err));
  }
  // The rename itself is durable only once the folder is synced.
  int dirFd = ::open(parentDir(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd >= 0) {
    ::fsync(dirFd);
    ::close(dirFd);
  }
}

} // namespace tensorc
