// The folder temporary files go in: $TMPDIR where set, else /tmp. A TMPDIR
// that is not an existing folder is an error naming it (std::filesystem's
// temp_directory_path threw a filesystem_error, which the tools reported as
// an internal error).
#pragma once

#include <string>

namespace tensorc {

// Throws Error where $TMPDIR is set to something that is not a folder.
std::string temporaryFolder();

} // namespace tensorc
