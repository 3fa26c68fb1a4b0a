// Running the neuron-sim binary as a subprocess, for the CLI tests.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace neuronsim::test {

// What one run of a binary did.
struct Result {
  int status = 0;  // as waitpid reports it
  std::string out;
  std::string err;

  bool exited() const { return WIFEXITED(status); }
  int code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }
  // For failure messages: how it ended and what it printed.
  std::string describe() const {
    std::string how = WIFEXITED(status)     ? "exit code " + std::to_string(WEXITSTATUS(status))
                      : WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status))
                                            : "status " + std::to_string(status);
    return how + "\n--- stdout ---\n" + out + "\n--- stderr ---\n" + err;
  }
};

// Runs `binary` with `args`, stdin from /dev/null, stdout and stderr through the two files
// (read back into the result). A run that takes longer than `timeout` is killed.
inline Result run_binary(const std::filesystem::path& binary, const std::vector<std::string>& args,
                         const std::filesystem::path& out_path,
                         const std::filesystem::path& err_path, std::chrono::seconds timeout) {
  std::vector<std::string> argv_s{binary.string()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  Result r;
  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return r;
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int in = open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || in < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const pid_t done = waitpid(pid, &r.status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      ADD_FAILURE() << "waitpid: " << std::strerror(errno);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &r.status, 0);
      ADD_FAILURE() << binary.filename().string() << " did not finish within " << timeout.count()
                    << " s";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  EXPECT_NE(r.code(), 127) << "could not execute " << binary;
  return r;
}

// A test that runs the neuron-sim binary ($NEURON_SIM, set by ctest) in a fresh
// temporary folder, removed afterwards.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("NEURON_SIM");
    if (bin == nullptr || *bin == '\0') GTEST_SKIP() << "NEURON_SIM is not set (run through ctest)";
    binary_ = bin;
    ASSERT_TRUE(std::filesystem::is_regular_file(binary_))
        << "NEURON_SIM=" << binary_ << " is not a file";
    std::string tmpl = (std::filesystem::temp_directory_path() / "neuron-sim-cli-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << "mkdtemp: " << std::strerror(errno);
    tmp_ = tmpl;
  }

  void TearDown() override {
    if (tmp_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(tmp_, ec);
  }

  // Runs the binary with `args`; stdout and stderr go through files in tmp_. A run that
  // takes longer than `timeout` is killed (and so fails its checks).
  Result run(const std::vector<std::string>& args,
             std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const std::string n = std::to_string(runs_++);
    return run_binary(binary_, args, tmp_ / ("stdout." + n), tmp_ / ("stderr." + n), timeout);
  }

  std::filesystem::path binary_;
  std::filesystem::path tmp_;
  int runs_ = 0;
};

}  // namespace neuronsim::test
