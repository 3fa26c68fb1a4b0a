// Shared helpers of the isa tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace neuronsim::test {

inline std::filesystem::path source_dir() {
  return NEURONSIM_SOURCE_DIR;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The shared fixtures: $NEURONSIM_FIXTURES, else the build's default.
inline std::filesystem::path fixtures_dir() {
  if (const char* env = std::getenv("NEURONSIM_FIXTURES")) return env;
  return NEURONSIM_FIXTURES_DEFAULT;
}

}  // namespace neuronsim::test
