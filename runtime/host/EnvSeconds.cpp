#include "runtime/host/EnvSeconds.h"

#include "ir/core/Error.h"

#include <cstdlib>

namespace tensorc {

std::optional<double> secondsFromEnvironment(const char *variable, const std::string &who) {
  const char *text = std::getenv(variable);
  if (!text || !*text)
    return std::nullopt;
  char *end = nullptr;
  double seconds = std::strtod(text, &end);
  check(*end == 0 && seconds > 0,
        who + ": " + variable + " must be a positive number of seconds, not '" + text + "'");
  return seconds;
}

} // namespace tensorc
