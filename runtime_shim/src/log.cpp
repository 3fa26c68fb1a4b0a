// Logging in libnrt's format, at the level NEURON_RT_LOG_LEVEL sets.
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "runtime.h"

namespace neuronsim::rt {

namespace {
std::atomic<int> g_level{-1};
std::mutex g_log_mu;
}  // namespace

std::string upper(const char* s) {
  std::string out;
  for (; *s; ++s) out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(*s))));
  return out;
}

std::optional<int> parse_log_level(const char* value) {
  if (value == nullptr || *value == '\0') return kError;
  const std::string v = upper(value);
  if (v == "QUIET" || v == "DISABLED" || v == "OFF") return kDisabled;
  if (v == "ERROR") return kError;
  if (v == "WARN" || v == "WARNING") return kWarn;
  if (v == "INFO") return kInfo;
  if (v == "DEBUG") return kDebug;
  if (v == "TRACE") return kTrace;
  return std::nullopt;
}

int log_level() {
  int l = g_level.load(std::memory_order_relaxed);
  if (l < 0) {
    l = parse_log_level(std::getenv("NEURON_RT_LOG_LEVEL")).value_or(kError);
    g_level.store(l, std::memory_order_relaxed);
  }
  return l;
}

void set_log_level(int level) {
  g_level.store(level, std::memory_order_relaxed);
}

void log_line(int level, const char* function, const std::string& message) {
  static const char* const kNames[] = {"", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  static const char* const kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const long usec = static_cast<long>(
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000);
  std::tm tm{};
  localtime_r(&t, &tm);
  const std::string line =
      fmt::format("{:04d}-{}-{:02d} {:02d}:{:02d}:{:02d}.{:06d} {}:{} {:<6} NRT:{:<20} {}\n",
                  tm.tm_year + 1900, kMonths[tm.tm_mon], tm.tm_mday, tm.tm_hour, tm.tm_min,
                  tm.tm_sec, usec, getpid(), static_cast<long>(syscall(SYS_gettid)),
                  kNames[level < 1   ? 1
                         : level > 5 ? 5
                                     : level],
                  function, message);
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::fputs(line.c_str(), stderr);
}

}  // namespace neuronsim::rt
