// How the ranks of a "neuron" process group reach each other: the cc::TcpCommunicators among
// them, which meet through the group's store under the job token, and the channels that carry
// sends and receives, each on a thread of its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "neuronsim/cc/tcp.h"

namespace neuronsim::pytorch {

// Runs one peer's sends and receives in order on a thread of its own.
class PeerThread {
 public:
  PeerThread() : thread_([this] { loop(); }) {}
  ~PeerThread() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_all();
  }
  std::unique_ptr<cc::TcpCommunicator> comm;  // used by the thread only
  std::optional<std::string> broken;          // used by the thread only

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;
};

// The environment's `name`, else `fallback` (also when it is set but empty).
std::string env_or(const char* name, const std::string& fallback);

// How one group's ranks reach each other: through its store (`store`, waited on up to
// `timeout`), this rank announcing `core` as its place on the fabric.
class Transport {
 public:
  Transport(c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout,
            cc::CoreId core);

  // Joins the ranks `rank` of `size` that meet under `key`: rank 0 listens on a free port and
  // publishes it in the store; the others read it there.
  std::unique_ptr<cc::TcpCommunicator> connect(const std::string& key, int rank, int size);

  // The channel from rank `source` to rank `dest`, its thread started on first use.
  PeerThread& channel(int source, int dest);
  // Ends the channels: joins their threads after their queued work.
  void close_channels();

 private:
  std::string token();
  std::string published(const std::string& key);

  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  cc::CoreId core_;
  std::mutex peers_mu_;
  std::map<std::pair<int, int>, std::unique_ptr<PeerThread>> channels_;  // by (source, dest)
};

}  // namespace neuronsim::pytorch
