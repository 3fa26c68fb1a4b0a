// Shell commands of the suite and the correlation cases (shell.h).
#include "shell.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace neuronsim::bench {

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string expand_placeholders(std::string command,
                                const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    const std::string token = "{" + key + "}";
    for (size_t at = 0; (at = command.find(token, at)) != std::string::npos; at += value.size())
      command.replace(at, token.size(), value);
  }
  return command;
}

int run_shell(const std::string& command, const std::filesystem::path& cwd,
              const std::filesystem::path& log) {
  // The newline ends a '#' comment inside the command before the closing parenthesis.
  const std::string shell = fmt::format("cd {} && ( {}\n) >{} 2>&1", shell_quoted(cwd.string()),
                                        command, shell_quoted(log.string()));
  const int status = std::system(shell.c_str());
  if (status == -1) return 127;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : status;
}

std::string tail_of_file(const std::filesystem::path& path, size_t lines) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();  // the last line's end is no line
  size_t at = text.size();
  while (lines-- > 0 && at > 0) {
    const size_t nl = text.rfind('\n', at - 1);
    if (nl == std::string::npos) return text;
    at = nl;
  }
  return at < text.size() ? text.substr(at + (text[at] == '\n')) : text;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot read", path.string()));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

ScratchDir::ScratchDir(const std::string& prefix)
    : path_(std::filesystem::temp_directory_path() /
            fmt::format("{}-{}", prefix, static_cast<long>(::getpid()))) {}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace neuronsim::bench
