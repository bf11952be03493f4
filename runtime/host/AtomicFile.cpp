#include "runtime/host/AtomicFile.h"

#include "ir/core/Error.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <unistd.h>

namespace tensorc {

void writeFileAtomically(const std::string &path, const std::string &bytes) {
  // Unique per process and per call, so concurrent writers (threads or
  // processes) never share a temporary file; rename is atomic on POSIX.
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    check(bool(out), path + ": cannot write the file");
    out.write(bytes.data(), std::streamsize(bytes.size()));
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      fail(path + ": writing failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(path + ": cannot move the finished file into place");
  }
}

} // namespace tensorc
