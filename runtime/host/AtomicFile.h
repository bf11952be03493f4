// Writing a file so that readers never see half of it and a failure leaves
// what was there before: the bytes go to a temporary file in the same
// folder, synced, then renamed over the destination (and the folder synced).
// "-" is not special here (callers map it to stdout); a path that is not a
// regular file (a device node, FIFO, /dev/stdout) is written in place, never
// replaced; a directory is refused.
#pragma once

#include <string>

namespace tensorc {

// Throws Error naming `path` if the file cannot be written.
void writeFileAtomically(const std::string &path, const std::string &bytes);

} // namespace tensorc
