#include "runtime/host/CacheHome.h"

#include <cstdlib>
#include <pwd.h>
#include <unistd.h>

namespace tensorc {

std::optional<std::string> tensorcCacheHome() {
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/tensorc";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/tensorc";
  if (const passwd *pw = ::getpwuid(::geteuid()); pw && pw->pw_dir && *pw->pw_dir && std::string(pw->pw_dir) != "/")
    return std::string(pw->pw_dir) + "/.cache/tensorc";
  return std::nullopt;
}

} // namespace tensorc
