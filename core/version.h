#pragma once
// mambamt's version and the git revision it was built from (`git describe
// --always --dirty`, "unknown" outside a checkout), defined in the generated
// <build>/generated/mambamt_version.cpp (cmake/GitRevision.cmake).

namespace mambamt::core {

const char* version();
const char* git_revision();

}  // namespace mambamt::core
