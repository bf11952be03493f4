#include "runtime/tune/TuneDbFile.h"

#include "ir/core/Error.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tensorc::tune {

namespace {

const char *kindName(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

// Every database file SQLite writes starts with these 16 bytes.
constexpr char kSqliteHeader[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f', 'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};

} // namespace

TuneDbFile inspectTuneDbFile(const std::string &path) {
  const std::string refused = "; tensorc leaves it as it is (name a new file or an autotune database)";
  TuneDbFile file;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR)
      return file; // Missing
    fail(path + ": cannot inspect the autotune cache: " + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    file.throughSymlink = true;
    if (::stat(path.c_str(), &st) != 0)
      fail(path + ": the autotune cache is a symbolic link to a missing or unreachable file (" +
           std::strerror(errno) + ")" + refused);
  }
  if (!S_ISREG(st.st_mode))
    fail(path + ": the autotune cache must be a SQLite database file, but this is " + kindName(st.st_mode) +
         refused);
  if (st.st_size == 0) {
    file.kind = TuneDbFile::Kind::Empty;
    return file;
  }
  // O_NONBLOCK: should the file become a FIFO after the stat, open must not
  // wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    fail(path + ": cannot read the autotune cache: " + std::strerror(errno));
  char header[sizeof kSqliteHeader] = {};
  ssize_t n;
  do
    n = ::read(fd, header, sizeof header);
  while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n != ssize_t(sizeof header) || std::memcmp(header, kSqliteHeader, sizeof header) != 0)
    fail(path + ": not a SQLite database (its first bytes are not SQLite's header), so not an autotune cache" +
         refused);
  file.kind = TuneDbFile::Kind::Database;
  return file;
}

std::string privateTempDirectory() {
  std::string base = "/tmp";
  if (const char *t = std::getenv("TMPDIR"); t && t[0] == '/')
    base = t;
  std::string dir = base + "/tensorc-" + std::to_string(::geteuid());
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    fail(dir + ": cannot create tensorc's per-user folder: " + std::strerror(errno));
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0)
    fail(dir + ": cannot inspect tensorc's per-user folder: " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    fail(dir + ": tensorc's per-user folder is " + (S_ISLNK(st.st_mode) ? "a symbolic link" : kindName(st.st_mode)) +
         "; remove it or set TENSORC_TUNE_DB");
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    fail(dir + ": tensorc's per-user folder belongs to another user or is open to others (it must be yours, mode "
               "0700); remove it or set TENSORC_TUNE_DB");
  return dir;
}

} // namespace tensorc::tune
