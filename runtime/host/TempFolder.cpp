#include "runtime/host/TempFolder.h"

#include "ir/core/Error.h"

#include <cstdlib>
#include <sys/stat.h>

namespace tensorc {

std::string temporaryFolder() {
  const char *t = std::getenv("TMPDIR");
  if (!t || !*t)
    return "/tmp";
  struct stat st;
  check(::stat(t, &st) == 0 && S_ISDIR(st.st_mode),
        std::string("TMPDIR='") + t + "' is not a folder: set it to one, or unset it for /tmp");
  return t;
}

} // namespace tensorc
