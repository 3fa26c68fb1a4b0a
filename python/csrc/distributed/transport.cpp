// How the ranks of a "neuron" process group reach each other (transport.h): the job token, the
// TcpCommunicator set-up through the group's store, and the point-to-point channels.
#include "distributed/transport.h"

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "runtime/backend.h"

namespace neuronsim::pytorch {
namespace {

std::string random_token() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}{:08x}{:08x}", rd(), rd(), rd(), rd());
}

std::string text(const std::vector<uint8_t>& b) {
  return std::string(b.begin(), b.end());
}
std::vector<uint8_t> bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

}  // namespace

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

Transport::Transport(c10::intrusive_ptr<c10d::Store> store, std::chrono::milliseconds timeout,
                     cc::CoreId core)
    : store_(std::move(store)), timeout_(timeout), core_(core) {}

// The job token: the environment's, else one the group's first rank to ask draws and
// shares through the store (which only the job's ranks reach).
std::string Transport::token() {
  std::string t = env_or("NEURONSIM_JOB_TOKEN", "");
  if (!t.empty()) return t;
  t = env_or("TORCHELASTIC_RUN_ID", "none");
  if (t != "none") return t;
  return text(store_->compareSet("neuronsim/token", {}, bytes(random_token())));
}

std::unique_ptr<cc::TcpCommunicator> Transport::connect(const std::string& key, int rank,
                                                        int size) {
  cc::TcpOptions o;
  o.rank = rank;
  o.world_size = size;
  o.timeout = timeout_;
  o.instance = pytorch::Backend::get().env().instance;
  o.core = core_;
  o.token = token();
  const std::string host = env_or("NEURONSIM_COMM_HOST", "127.0.0.1");
  if (rank == 0) {
    o.root = host.find(':') == std::string::npos ? host + ":0" : "[" + host + "]:0";
    o.on_listening = [&](const std::string& address) { store_->set(key, bytes(address)); };
  } else {
    o.root = published(key);
  }
  return cc::TcpCommunicator::connect(std::move(o));
}

// The value rank 0 publishes under `key`, once it is there. Polled, not Store::wait: a
// TCPStore client serialises its calls, so a blocking wait in one channel's thread would
// keep another thread of this process from publishing its own address (a deadlock across
// the ranks of a ring of sends).
std::string Transport::published(const std::string& key) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (!store_->check({key})) {
    if (std::chrono::steady_clock::now() > deadline)
      throw cc::CommError(cc::CommFault::timeout,
                          fmt::format("rank 0 of '{}' did not publish its address within {} s", key,
                                      timeout_.count() / 1000.0));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return text(store_->get(key));
}

PeerThread& Transport::channel(int source, int dest) {
  std::lock_guard lock(peers_mu_);
  auto& p = channels_[{source, dest}];
  if (!p) p = std::make_unique<PeerThread>();
  return *p;
}

void Transport::close_channels() {
  std::map<std::pair<int, int>, std::unique_ptr<PeerThread>> channels;
  {
    std::lock_guard lock(peers_mu_);
    channels.swap(channels_);
  }
  channels.clear();  // joins the threads after their queued work
}

}  // namespace neuronsim::pytorch
