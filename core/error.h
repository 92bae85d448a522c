#pragma once
// Errors thrown by library code. Only cli/ and the MPI top level turn them into
// messages and exit codes; everything below throws with context.
#include <stdexcept>
#include <string>

namespace mambamt {

// Base of every mambamt error. what() is the full message shown to the user.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input (config, corpus, store, CLI argument). The message names the
// file and place, e.g. "configs/x.toml:12:1: model.d_state = 0: must be >= 1".
class InputError : public Error {
 public:
  using Error::Error;
};

// A wrong command line: the CLI prints usage and exits with code 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Formats "file:line:col: message" (line/col omitted when 0).
std::string located(const std::string& file, long line, long col, const std::string& message);

}  // namespace mambamt
