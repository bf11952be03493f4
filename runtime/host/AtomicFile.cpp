#include "runtime/host/AtomicFile.h"

#include "ir/core/Error.h"

#include <cstdio>
#include <fstream>
#include <unistd.h>

namespace tensorc {

void writeFileAtomically(const std::string &path, const std::string &bytes) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
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
