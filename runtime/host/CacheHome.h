// Where a user's tensorc caches live by default (XDG base directories):
// $XDG_CACHE_HOME/tensorc, else $HOME/.cache/tensorc (HOME from the
// environment, else the password database); nullopt when neither is known
// (callers fall back to a per-user name under /tmp).
#pragma once

#include <optional>
#include <string>

namespace tensorc {

std::optional<std::string> tensorcCacheHome();

} // namespace tensorc
