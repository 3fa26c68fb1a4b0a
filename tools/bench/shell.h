// Running the shell commands of the benchmark suite (suite.h) and of the correlation cases
// (correlate.h): quoting, placeholders, and a command's exit status with its output kept.
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace neuronsim::bench {

// POSIX shell quoting: `s` as one word.
std::string shell_quoted(const std::string& s);

// `command` with every {key} replaced by its value (values are inserted as given: quote them).
std::string expand_placeholders(std::string command,
                                const std::map<std::string, std::string>& values);

// Runs `command` with /bin/sh in `cwd`, its stdout and stderr into `log`; returns the exit
// status (the signal number + 128 when killed).
int run_shell(const std::string& command, const std::filesystem::path& cwd,
              const std::filesystem::path& log);

// A folder <temp>/<prefix>-<pid>, removed however the scope that holds it ends (a failed
// benchmark or case throws; its output is in the error, so nothing is kept).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A whole file as it is; std::runtime_error naming it when it cannot be read.
std::string read_text(const std::filesystem::path& path);

// The last `lines` lines of a file (what to show of a failed command's output).
std::string tail_of_file(const std::filesystem::path& path, size_t lines);

}  // namespace neuronsim::bench
