// Writing a file so that readers never see half of it and a failure leaves
// what was there before: the bytes go to a temporary file in the same
// folder, which is then renamed over the destination.
#pragma once

#include <string>

namespace tensorc {

// Throws Error naming `path` if the file cannot be written.
void writeFileAtomically(const std::string &path, const std::string &bytes);

} // namespace tensorc
