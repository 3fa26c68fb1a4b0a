#include "neuronsim/cc/tcp.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <nlohmann/json.hpp>

#include "tcp_link.h"

namespace neuronsim::cc {
namespace {

using namespace wire;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using boost::system::error_code;

constexpr uint64_t kMaxDataBytes = uint64_t{1} << 40;
constexpr size_t kNonceBytes = 32;
constexpr size_t kDescBytes = 48;  // how a rank describes its collective to the others

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

std::string random_nonce() {
  uint8_t b[kNonceBytes];
  if (RAND_bytes(b, sizeof b) != 1)
    throw CommError(CommFault::config, "no random bytes for a challenge (OpenSSL RAND_bytes)");
  return hex(b, sizeof b);
}

// HMAC-SHA256 of `message` under the job token: proves the token without sending it.
std::string mac(const std::string& token, const std::string& message) {
  uint8_t out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
       reinterpret_cast<const uint8_t*>(message.data()), message.size(), out, &len);
  return hex(out, len);
}

bool same_mac(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

// A signed payload: {"body": <json text>, "mac": HMAC(token, nonce + body)}.
std::string sign(const std::string& token, const std::string& nonce, const json& body) {
  const std::string text = body.dump();
  return json{{"body", text}, {"mac", mac(token, nonce + text)}}.dump();
}
// The body of a signed payload, or nullopt when it is malformed or the MAC is wrong.
std::optional<json> verify(const std::string& token, const std::string& nonce,
                           const std::string& payload) {
  try {
    const json j = json::parse(payload);
    const std::string text = j.at("body").get<std::string>();
    if (!same_mac(j.at("mac").get<std::string>(), mac(token, nonce + text))) return std::nullopt;
    return json::parse(text);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// `any_port`: port 0 is allowed (rank 0 then listens on a free port, TcpOptions::on_listening).
std::pair<std::string, uint16_t> split_address(const std::string& address, const char* what,
                                               bool any_port = false) {
  const auto colon = address.rfind(':');
  std::string host = colon == std::string::npos ? "" : address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const std::string port_text = colon == std::string::npos ? "" : address.substr(colon + 1);
  char* end = nullptr;
  const unsigned long port = std::strtoul(port_text.c_str(), &end, 10);
  if (host.empty() || port_text.empty() || *end != '\0' || (port == 0 && !any_port) || port > 65535)
    throw CommError(CommFault::config,
                    fmt::format("{}='{}' is not host:port (e.g. 127.0.0.1:62182)", what, address));
  return {host, static_cast<uint16_t>(port)};
}

// Everything the ranks of a job must agree on, as text (compared at the rendezvous).
std::string job_description(const TcpOptions& o) {
  const Thresholds t = o.run.thresholds ? *o.run.thresholds : thresholds_for(o.instance);
  return fmt::format(
      "instance={} algorithm={} mesh_below={} rdh_below={} placement={} lnc={} runtime={}",
      o.instance.name, algorithm_name(o.run.algorithm), t.mesh_below_bytes, t.rdh_below_bytes,
      o.run.placement == Placement::packed ? "packed" : "one_per_chip", o.run.lnc,
      runtime_costs(o.run).release);
}

std::string describe(const CollectiveSpec& s, bool with_data) {
  std::string d = fmt::format("{}({}, {}, {}){}", op_name(s.op), reduce_op_name(s.reduce),
                              isa::dtype_name(s.dtype), s.count, with_data ? "" : " timing");
  return d.substr(0, kDescBytes);
}

// FNV-1a over everything that makes two ranks' collectives the same collective.
uint64_t digest(const CollectiveSpec& s, bool with_data) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  mix(static_cast<uint64_t>(s.op));
  mix(static_cast<uint64_t>(s.reduce));
  mix(static_cast<uint64_t>(s.dtype));
  mix(s.count);
  mix(static_cast<uint64_t>(s.root));
  mix(with_data);
  for (int p : s.peers) mix(static_cast<uint64_t>(static_cast<int64_t>(p)));
  for (uint64_t c : s.counts) mix(c);
  return h;
}

std::string rank_list(const std::vector<int>& ranks) {
  return fmt::format("{}", fmt::join(ranks, ", "));
}

struct Hello {
  int rank = -1;
  int world = 0;
  std::string job;
  uint16_t port = 0;
  std::optional<CoreId> core;
  std::string nonce;  // the rank's own challenge to whoever answers it
};

json to_json(const Hello& h) {
  json j{
      {"rank", h.rank}, {"world", h.world}, {"job", h.job}, {"port", h.port}, {"nonce", h.nonce}};
  j["core"] = h.core ? json::array({h.core->chip, h.core->core}) : json(nullptr);
  return j;
}

Hello hello_from(const json& j) {
  Hello h;
  h.rank = j.at("rank").get<int>();
  h.world = j.at("world").get<int>();
  h.job = j.at("job").get<std::string>();
  h.port = j.at("port").get<uint16_t>();
  h.nonce = j.at("nonce").get<std::string>();
  if (!j.at("core").is_null())
    h.core = CoreId{j["core"].at(0).get<uint32_t>(), j["core"].at(1).get<uint32_t>()};
  return h;
}

}  // namespace

void read_tcp_environment(TcpOptions& options) {
  const char* root = std::getenv("NEURON_RT_ROOT_COMM_ID");
  if (root == nullptr || *root == '\0')
    throw CommError(
        CommFault::config,
        "NEURON_RT_ROOT_COMM_ID is not set: collectives across processes need rank 0's address "
        "(host:port) in every rank's environment");
  split_address(root, "NEURON_RT_ROOT_COMM_ID");
  options.root = root;
  const char* token = std::getenv("NEURONSIM_JOB_TOKEN");
  const char* run_id = std::getenv("TORCHELASTIC_RUN_ID");
  if (token != nullptr && *token != '\0')
    options.token = token;
  else if (run_id != nullptr && *run_id != '\0' && std::string(run_id) != "none")
    options.token = run_id;
  else
    throw CommError(
        CommFault::config,
        "NEURONSIM_JOB_TOKEN is not set: give every rank of the job the same secret, so that no "
        "stranger can join it (torchrun's TORCHELASTIC_RUN_ID is used when set)");
}

struct TcpCommunicator::Impl final : Network {
  TcpOptions opt;
  asio::io_context io;  // first: destroyed last, after the links whose handlers it holds
  std::vector<std::shared_ptr<Link>> links;  // by rank; null for this rank
  std::vector<int> local;
  std::optional<tcp::acceptor> acceptor;
  std::set<std::shared_ptr<Link>> strangers;  // connections not yet admitted
  std::optional<CommError> failure;           // the first fatal error a handler saw
  std::vector<std::string> closed;            // by rank: why its link closed ("" while open)
  std::vector<bool> left;                     // by rank: said goodbye
  Clock::time_point start = Clock::now();
  Clock::time_point last_progress = Clock::now();

  // ---- the network API for the algorithms (one local rank) ----
  struct Msg {
    std::vector<uint8_t> data;
    uint64_t bytes = 0;
    bool has_data = false;
  };
  struct Posted {
    void* buffer = nullptr;
    uint64_t bytes = 0;
    Callback on_done;
  };
  using Key = std::tuple<uint64_t, int, uint64_t>;  // (epoch, src, tag)
  std::map<Key, std::deque<Msg>> unexpected;
  std::map<Key, std::deque<Posted>> posted;
  uint64_t epoch = 0;
  size_t outstanding = 0;
  uint64_t collectives = 0;
  std::string phase;  // what run() is doing, for messages

  explicit Impl(TcpOptions o) : opt(std::move(o)), local{opt.rank} {
    links.resize(static_cast<size_t>(opt.world_size));
    closed.resize(links.size());
    left.resize(links.size());
  }

  int me() const { return opt.rank; }
  std::chrono::milliseconds timeout() const { return opt.timeout; }
  std::string seconds() const {
    return fmt::format("{:g} s", static_cast<double>(opt.timeout.count()) / 1000.0);
  }
  void warn(const std::string& m) const {
    if (opt.warn)
      opt.warn(m);
    else
      std::cerr << "neuronsim collectives: rank " << opt.rank << ": " << m << "\n";
  }

  // Runs handlers until `done()` or `deadline`; a handler's failure is thrown here.
  template <typename Pred, typename Describe>
  void wait(Pred done, Clock::time_point deadline, CommFault on_timeout, Describe describe) {
    while (!done()) {
      if (failure) throw *failure;
      if (Clock::now() >= deadline) throw CommError(on_timeout, describe());
      if (io.stopped()) io.restart();
      io.run_one_until(deadline);
    }
    if (failure) throw *failure;
  }

  // ---- rendezvous and mesh ----
  void stranger(const std::shared_ptr<Link>& link, const std::string& why) {
    warn(fmt::format("turned away a connection from {}: {}", link->where(), why));
    strangers.erase(link);
    link->close();
  }

  // A stranger that spoke our protocol is told why, so that a misconfigured rank fails clearly.
  void refuse(const std::shared_ptr<Link>& link, const std::string& why) {
    warn(fmt::format("turned away a connection from {}: {}", link->where(), why));
    link->say_and_close(Kind::reject, why);
    strangers.erase(link);
  }

  void turn_away(const std::shared_ptr<Link>& link, const Hello& h, const std::string& why) {
    warn(fmt::format("turned away rank {} from {}: {}", h.rank, link->where(), why));
    link->say_and_close(Kind::reject, why);
    strangers.erase(link);
  }

  // Challenges a new connection; `admit` returns "" to admit the hello or why not.
  void serve(const std::shared_ptr<Link>& link, std::function<std::string(const Hello&)> admit,
             std::function<void(const std::shared_ptr<Link>&, const Hello&)> admitted) {
    strangers.insert(link);
    const std::string nonce = random_nonce();
    link->write(Kind::challenge, nonce);
    link->read(kMaxControlBytes, [this, link, nonce, admit, admitted](const error_code& ec,
                                                                      Frame f) {
      if (!strangers.count(link)) return;  // dealt with already (the job is over)
      if (ec == asio::error::invalid_argument)
        return stranger(link, "it sent bytes that are not a neuronsim hello");
      if (ec)
        return stranger(link, fmt::format("it went away before saying hello ({})", ec.message()));
      if (f.header.kind != Kind::hello) return stranger(link, "it did not say hello");
      const auto body = verify(opt.token, nonce, f.text());
      if (!body) return refuse(link, "it does not know the job token (NEURONSIM_JOB_TOKEN)");
      Hello h;
      try {
        h = hello_from(*body);
      } catch (const json::exception&) {
        return stranger(link, "its hello is malformed");
      }
      if (h.world != opt.world_size)
        return turn_away(
            link, h,
            fmt::format("world size {} does not match the job's {}", h.world, opt.world_size));
      if (h.job != job_description(opt))
        return turn_away(link, h,
                         fmt::format("job settings differ: it has '{}', rank {} has '{}'", h.job,
                                     me(), job_description(opt)));
      if (const std::string why = admit(h); !why.empty()) return turn_away(link, h, why);
      strangers.erase(link);
      admitted(link, h);
    });
  }

  void accept_loop(std::function<std::string(const Hello&)> admit,
                   std::function<void(const std::shared_ptr<Link>&, const Hello&)> admitted) {
    acceptor->async_accept([this, admit, admitted](const error_code& ec, tcp::socket s) {
      if (ec) return;  // closed once everyone is in
      serve(std::make_shared<Link>(std::move(s)), admit, admitted);
      accept_loop(admit, admitted);
    });
  }

  void open_acceptor(const tcp::endpoint& ep) {
    acceptor.emplace(io);
    error_code ec;
    acceptor->open(ep.protocol(), ec);
    if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor->bind(ep, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      throw CommError(CommFault::config,
                      fmt::format("rank {} cannot listen at {}:{}: {}", me(),
                                  ep.address().to_string(), ep.port(), ec.message()));
  }

  void close_acceptor() {
    error_code ec;
    if (acceptor) acceptor->close(ec);
    for (const auto& s : strangers) s->close();
    strangers.clear();
  }

  Hello my_hello() const {
    Hello h;
    h.rank = me();
    h.world = opt.world_size;
    h.job = job_description(opt);
    h.port = acceptor ? acceptor->local_endpoint().port() : 0;
    h.core = opt.core;
    h.nonce = random_nonce();
    return h;
  }

  // Connects to `host:port`, retrying until the deadline (the peer may not listen yet).
  std::shared_ptr<Link> dial(const std::string& host, uint16_t port, Clock::time_point deadline,
                             const std::string& who) {
    tcp::resolver resolver(io);
    error_code last;
    while (Clock::now() < deadline) {
      error_code ec;
      auto endpoints = resolver.resolve(host, std::to_string(port), ec);
      if (!ec) {
        tcp::socket s(io);
        bool done = false;
        asio::async_connect(s, endpoints, [&](const error_code& e, const tcp::endpoint&) {
          ec = e;
          done = true;
        });
        wait([&] { return done; }, deadline, CommFault::timeout,
             [&] {
               return fmt::format("rank {} could not reach {} at {}:{} within {}", me(), who, host,
                                  port, seconds());
             });
        if (!ec) return std::make_shared<Link>(std::move(s));
      }
      last = ec;
      asio::steady_timer pause(io, std::chrono::milliseconds(50));
      bool slept = false;
      pause.async_wait([&](const error_code&) { slept = true; });
      wait([&] { return slept; }, deadline + std::chrono::milliseconds(100), CommFault::timeout,
           [] { return ""; });
    }
    throw CommError(CommFault::timeout,
                    fmt::format("rank {} could not reach {} at {}:{} within {} (last error: {})",
                                me(), who, host, port, seconds(), last ? last.message() : "none"));
  }

  Frame read_frame(const std::shared_ptr<Link>& link, Clock::time_point deadline,
                   const std::string& who) {
    std::optional<Frame> got;
    error_code err;
    link->read(kMaxControlBytes, [&](const error_code& ec, Frame f) {
      err = ec;
      got = std::move(f);
    });
    wait([&] { return got.has_value(); }, deadline, CommFault::timeout,
         [&] {
           return fmt::format("rank {}: no answer from {} at {} within {}", me(), who,
                              link->where(), seconds());
         });
    if (err == asio::error::invalid_argument)
      throw CommError(CommFault::protocol,
                      fmt::format("rank {}: {} at {} is not a neuronsim rank (bad frame)", me(),
                                  who, link->where()));
    if (err)
      throw CommError(CommFault::peer_lost,
                      fmt::format("rank {}: {} at {} closed the connection ({})", me(), who,
                                  link->where(), err.message()));
    return std::move(*got);
  }

  // The connecting side: answers the challenge, then reads the verdict. Returns the body of a
  // welcome or table frame (checked against our own nonce: the peer knows the token too).
  json introduce(const std::shared_ptr<Link>& link, Clock::time_point deadline,
                 const std::string& who) {
    const Frame challenge = read_frame(link, deadline, who);
    if (challenge.header.kind != Kind::challenge)
      throw CommError(CommFault::protocol,
                      fmt::format("rank {}: {} did not send a challenge", me(), who));
    const Hello h = my_hello();
    link->write(Kind::hello, sign(opt.token, challenge.text(), to_json(h)));
    const Frame answer = read_frame(link, deadline, who);
    switch (answer.header.kind) {
      case Kind::reject:
        throw CommError(CommFault::rejected,
                        fmt::format("rank {} was turned away by {}: {}", me(), who, answer.text()));
      case Kind::abort:
        throw CommError(CommFault::timeout, fmt::format("rank {}: {} gave up on the job: {}", me(),
                                                        who, answer.text()));
      case Kind::welcome:
      case Kind::table: {
        auto body = verify(opt.token, h.nonce, answer.text());
        if (!body)
          throw CommError(CommFault::protocol,
                          fmt::format("rank {}: {} at {} does not know the job token", me(), who,
                                      link->where()));
        return *body;
      }
      default:
        throw CommError(CommFault::protocol,
                        fmt::format("rank {}: unexpected answer from {}", me(), who));
    }
  }

  // Rank 0's view of the rendezvous (members: late strangers are still answered mid-job).
  std::vector<std::optional<Hello>> hellos;
  std::vector<std::string> hosts;
  int joined = 1;
  int awaited = 0;  // ranks above this one that have not yet connected to it

  std::string admit_at_root(const Hello& h) const {
    if (h.rank <= 0 || h.rank >= opt.world_size)
      return fmt::format("rank {} is not a rank of a {}-rank job (ranks 1..{} join rank 0)", h.rank,
                         opt.world_size, opt.world_size - 1);
    if (hellos[static_cast<size_t>(h.rank)])
      return fmt::format("rank {} has already joined the job (from {})", h.rank,
                         hosts[static_cast<size_t>(h.rank)]);
    if (h.core.has_value() != opt.core.has_value())
      return fmt::format("rank {} {} its core and rank 0 {}", h.rank,
                         h.core ? "announced" : "did not announce", opt.core ? "did" : "did not");
    return "";
  }

  void rendezvous_as_root(Clock::time_point deadline) {
    const auto [host, port] = split_address(opt.root, "NEURON_RT_ROOT_COMM_ID", true);
    tcp::resolver resolver(io);
    error_code ec;
    auto eps = resolver.resolve(host, std::to_string(port), ec);
    if (ec || eps.empty())
      throw CommError(
          CommFault::config,
          fmt::format("cannot resolve NEURON_RT_ROOT_COMM_ID host '{}': {}", host, ec.message()));
    open_acceptor(eps.begin()->endpoint());
    if (opt.on_listening) {
      const std::string shown = host.find(':') == std::string::npos ? host : "[" + host + "]";
      opt.on_listening(fmt::format("{}:{}", shown, acceptor->local_endpoint().port()));
    }

    hellos.assign(links.size(), std::nullopt);
    hosts.assign(links.size(), host);
    hellos[0] = my_hello();
    accept_loop([this](const Hello& h) { return admit_at_root(h); },
                [this](const std::shared_ptr<Link>& link, const Hello& h) {
                  const size_t r = static_cast<size_t>(h.rank);
                  links[r] = link;
                  hellos[r] = h;
                  error_code e;
                  hosts[r] = link->socket().remote_endpoint(e).address().to_string();
                  ++joined;
                });
    try {
      wait([&] { return joined == opt.world_size; }, deadline, CommFault::timeout,
           [&] {
             std::vector<int> missing;
             for (int r = 0; r < opt.world_size; ++r)
               if (!hellos[static_cast<size_t>(r)]) missing.push_back(r);
             return fmt::format("rank 0 waited {} at {} and rank(s) {} never joined the job",
                                seconds(), opt.root, rank_list(missing));
           });
    } catch (const CommError& e) {
      abort_all(e.what());
      throw;
    }

    json table = json::array();
    for (size_t r = 0; r < links.size(); ++r) {
      json entry = to_json(*hellos[r]);
      entry["host"] = hosts[r];
      table.push_back(entry);
    }
    adopt_cores(table);
    for (size_t r = 1; r < links.size(); ++r)
      links[r]->write(Kind::table, sign(opt.token, hellos[r]->nonce, json{{"table", table}}));
  }

  std::string admit_at_peer(const Hello& h) const {
    if (h.rank <= me() || h.rank >= opt.world_size)
      return fmt::format("rank {} should not connect to rank {} (only ranks above it do)", h.rank,
                         me());
    if (links[static_cast<size_t>(h.rank)])
      return fmt::format("rank {} is already connected", h.rank);
    return "";
  }

  void rendezvous_as_peer(Clock::time_point deadline) {
    const auto [host, port] = split_address(opt.root, "NEURON_RT_ROOT_COMM_ID");
    auto root = dial(host, port, deadline, "rank 0");
    // Listen on the address that reaches rank 0, so that the others can reach us too.
    error_code ec;
    open_acceptor(tcp::endpoint(root->socket().local_endpoint(ec).address(), 0));
    awaited = opt.world_size - 1 - me();
    accept_loop([this](const Hello& h) { return admit_at_peer(h); },
                [this](const std::shared_ptr<Link>& link, const Hello& h) {
                  link->write(Kind::welcome, sign(opt.token, h.nonce, json::object()));
                  links[static_cast<size_t>(h.rank)] = link;
                  --awaited;
                });

    const json table = introduce(root, deadline, "rank 0").at("table");
    links[0] = root;
    adopt_cores(table);
    for (int j = 1; j < me(); ++j) {
      const json& e = table.at(static_cast<size_t>(j));
      const std::string who = fmt::format("rank {}", j);
      auto link =
          dial(e.at("host").get<std::string>(), e.at("port").get<uint16_t>(), deadline, who);
      introduce(link, deadline, who);
      links[static_cast<size_t>(j)] = link;
    }
    wait([&] { return awaited == 0; }, deadline, CommFault::timeout,
         [&] {
           std::vector<int> missing;
           for (int r = me() + 1; r < opt.world_size; ++r)
             if (!links[static_cast<size_t>(r)]) missing.push_back(r);
           return fmt::format("rank {}: rank(s) {} did not connect within {}", me(),
                              rank_list(missing), seconds());
         });
  }

  // When the ranks announced their cores, those are the placement of the fabric model.
  void adopt_cores(const json& table) {
    if (!opt.core) return;
    opt.run.cores.clear();
    for (const auto& e : table) opt.run.cores.push_back(*hello_from(e).core);
  }

  void abort_all(const std::string& why) {
    for (auto& l : links)
      if (l && l->is_open()) l->write(Kind::abort, why);
    // Give the aborts a moment to leave before the sockets close with this object.
    io.restart();
    io.run_for(std::chrono::milliseconds(200));
  }

  void join() {
    const auto deadline = Clock::now() + timeout();
    if (me() == 0)
      rendezvous_as_root(deadline);
    else  // a little longer than rank 0, so that its verdict (who never came) reaches us first
      rendezvous_as_peer(deadline + timeout() / 4 + std::chrono::milliseconds(500));
    for (int r = 0; r < opt.world_size; ++r)
      if (r != me()) listen(r);
  }

  // ---- data phase ----
  void listen(int peer) {
    auto link = links[static_cast<size_t>(peer)];
    link->read(kMaxDataBytes, [this, peer](const error_code& ec, Frame f) {
      const size_t p = static_cast<size_t>(peer);
      if (ec) {
        closed[p] = ec == asio::error::eof ? "closed its connection" : ec.message();
        return;
      }
      switch (f.header.kind) {
        case Kind::data:
          deliver(peer, std::move(f));
          break;
        case Kind::bye:
          left[p] = true;
          break;
        case Kind::abort:
          if (!failure)
            failure = CommError(CommFault::peer_lost,
                                fmt::format("rank {} aborted the job: {}", peer, f.text()));
          break;
        default:
          if (!failure)
            failure = CommError(CommFault::protocol,
                                fmt::format("rank {} sent an unexpected frame", peer));
      }
      listen(peer);
    });
  }

  void progress() { last_progress = Clock::now(); }

  void deliver(int src, Frame f) {
    progress();
    Msg m{std::move(f.payload), f.header.bytes, !f.header.size_only()};
    const Key key{f.header.epoch, src, f.header.tag};
    auto it = posted.find(key);
    if (it == posted.end() || it->second.empty()) {
      unexpected[key].push_back(std::move(m));
      return;
    }
    Posted r = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) posted.erase(it);
    complete(m, r, src);
  }

  void complete(Msg& m, Posted& r, int src) {
    if (m.bytes != r.bytes)
      throw CommError(CommFault::protocol,
                      fmt::format("rank {}: rank {} sent {} bytes where {} were expected ({})",
                                  me(), src, m.bytes, r.bytes, phase));
    if (r.buffer && m.has_data && m.bytes > 0) std::memcpy(r.buffer, m.data.data(), m.bytes);
    --outstanding;
    if (r.on_done && !failure) r.on_done();
  }

  int num_ranks() const override { return opt.world_size; }
  Picos now() const override {
    return static_cast<Picos>(
               std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count()) *
           kPicosPerNs;
  }

  void send(int src, int dst, const void* data, uint64_t bytes, uint64_t tag,
            Callback on_done) override {
    if (src != me())
      throw std::logic_error(fmt::format("rank {} cannot send for rank {}", me(), src));
    Header h;
    h.kind = Kind::data;
    h.epoch = epoch;
    h.tag = tag;
    h.bytes = bytes;
    if (!data) h.flags = kSizeOnly;
    std::vector<uint8_t> payload;
    if (data)
      payload.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
    ++outstanding;
    if (dst == me()) {
      Frame f{h, std::move(payload)};
      asio::post(io, [this, f = std::move(f), on_done]() mutable {
        --outstanding;
        if (failure) return;
        deliver(me(), std::move(f));
        if (on_done) on_done();
      });
      return;
    }
    auto& link = links.at(static_cast<size_t>(dst));
    link->write(h, std::move(payload), [this, dst, on_done](const error_code& ec) {
      --outstanding;
      progress();
      if (ec) {
        if (!failure)
          failure = CommError(CommFault::peer_lost,
                              fmt::format("rank {}: sending to rank {} failed: {} ({})", me(), dst,
                                          ec.message(), phase));
        return;
      }
      if (on_done && !failure) on_done();
    });
  }

  void recv(int dst, int src, void* buffer, uint64_t bytes, uint64_t tag,
            Callback on_done) override {
    if (dst != me())
      throw std::logic_error(fmt::format("rank {} cannot receive for rank {}", me(), dst));
    const Key key{epoch, src, tag};
    Posted r{buffer, bytes, std::move(on_done)};
    ++outstanding;
    auto it = unexpected.find(key);
    if (it != unexpected.end() && !it->second.empty()) {
      Msg m = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) unexpected.erase(it);
      auto shared = std::make_shared<std::pair<Msg, Posted>>(std::move(m), std::move(r));
      asio::post(io, [this, shared, src] {
        if (!failure) complete(shared->first, shared->second, src);
      });
      return;
    }
    posted[key].push_back(std::move(r));
  }

  void schedule(Picos, Callback fn) override {
    ++outstanding;
    asio::post(io, [this, fn = std::move(fn)] {
      --outstanding;
      if (!failure) fn();
    });
  }

  // The ranks whose data this rank still waits for.
  std::vector<int> waiting_for() const {
    std::set<int> s;
    for (const auto& [key, q] : posted)
      if (!q.empty()) s.insert(std::get<1>(key));
    return {s.begin(), s.end()};
  }

  // A rank we wait for whose link has closed: it died, or it has finished a different job.
  void check_peers() const {
    for (int r : waiting_for()) {
      const size_t p = static_cast<size_t>(r);
      if (closed[p].empty()) continue;
      throw CommError(
          CommFault::peer_lost,
          left[p]
              ? fmt::format("rank {}: rank {} left the job while rank {} waits for its data in {} "
                            "(the ranks ran different numbers of collectives)",
                            me(), r, me(), phase)
              : fmt::format("rank {}: lost rank {} ({}) while waiting for its data in {}: "
                            "did the process die?",
                            me(), r, closed[p], phase));
    }
  }

  Picos run() override {
    progress();
    while (outstanding > 0) {
      if (failure) throw *failure;
      check_peers();
      const auto deadline = last_progress + timeout();
      if (Clock::now() >= deadline)
        throw CommError(CommFault::timeout,
                        fmt::format("rank {}: nothing from rank(s) {} for {} in {}", me(),
                                    rank_list(waiting_for()), seconds(), phase));
      if (io.stopped()) io.restart();
      // Wake up now and then to notice closed links while nothing arrives.
      io.run_one_until(std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
    }
    if (failure) throw *failure;
    return now();
  }

  // Runs `spec` for this rank over the links; returns its buffers.
  void move_data(const CollectiveSpec& spec, Algorithm algorithm, RankBuffers* buffers) {
    const std::vector<CoreId> cores =
        opt.run.cores.empty()
            ? Fabric::place(opt.instance, opt.world_size, opt.run.placement, opt.run.lnc)
            : opt.run.cores;
    std::vector<RankPlan> plans{make_plan(spec, opt.world_size, me(), algorithm,
                                          Fabric::ranks_per_entry(opt.instance, cores))};
    std::vector<RankBuffers> b;
    if (buffers) b.push_back(std::move(*buffers));
    execute(*this, spec, local, plans, buffers ? &b : nullptr);
    if (buffers) *buffers = std::move(b[0]);
  }

  CollectiveOutcome collective(const CollectiveSpec& spec, const RankCall& call, bool with_data) {
    const int R = opt.world_size;
    const uint64_t n = ++collectives;
    // 1. Every rank tells every other when it arrived and what it runs.
    CollectiveSpec hello_spec;
    hello_spec.op = Op::all_gather;
    hello_spec.dtype = isa::DType::uint8;
    hello_spec.count = 16 + kDescBytes;
    std::vector<uint8_t> mine(hello_spec.count, 0);
    const uint64_t d = digest(spec, with_data);
    std::memcpy(mine.data(), &call.arrival_ps, 8);
    std::memcpy(mine.data() + 8, &d, 8);
    const std::string desc = describe(spec, with_data);
    std::memcpy(mine.data() + 16, desc.data(), desc.size());
    RankBuffers hb = prepare_buffers(hello_spec, R, me(), mine);
    epoch = 2 * n;
    phase = fmt::format("collective #{} ({}), exchanging arrival times", n, desc);
    move_data(hello_spec, Algorithm::mesh, &hb);
    const std::vector<uint8_t> all = extract_output(hello_spec, R, me(), hb);
    std::vector<Picos> arrivals(static_cast<size_t>(R));
    for (int r = 0; r < R; ++r) {
      const uint8_t* p = all.data() + static_cast<size_t>(r) * hello_spec.count;
      uint64_t theirs = 0;
      std::memcpy(&arrivals[static_cast<size_t>(r)], p, 8);
      std::memcpy(&theirs, p + 8, 8);
      if (theirs != d) {
        const char* text = reinterpret_cast<const char*>(p + 16);
        throw CommError(CommFault::protocol,
                        fmt::format("collective #{}: rank {} runs {} but rank {} runs {}", n, me(),
                                    desc, r, std::string(text, strnlen(text, kDescBytes))));
      }
    }
    // 2. The data, for real.
    CollectiveOutcome out = simulate_timing(opt.instance, spec, arrivals, opt.run);
    epoch = 2 * n + 1;
    phase = fmt::format("collective #{} ({})", n, desc);
    if (with_data) {
      RankBuffers b = prepare_buffers(spec, R, me(), call.input);
      move_data(spec, out.algorithm, &b);
      out.outputs.push_back(extract_output(spec, R, me(), b));
    } else {
      move_data(spec, out.algorithm, nullptr);
    }
    // 3. The time: the same model on every rank, so all agree.
    out.finish_ps = {out.finish_ps[static_cast<size_t>(me())]};
    return out;
  }

  // After a failure the links are in an unknown state and the collective's frames are gone: the
  // job is over for this rank. Pending completions must not reach the dead collective.
  void abandon(const CommError& e) {
    if (!failure) failure = e;
    posted.clear();
    unexpected.clear();
  }

  void say_goodbye() {
    size_t pending = 0;
    for (size_t r = 0; r < links.size(); ++r)
      if (links[r] && links[r]->is_open() && closed[r].empty()) {
        ++pending;
        links[r]->write(Kind::bye, "", [&pending](const error_code&) { --pending; });
      }
    try {
      const auto deadline = Clock::now() + std::chrono::seconds(1);
      io.restart();
      while (pending > 0 && Clock::now() < deadline) io.run_one_until(deadline);
    } catch (...) {
      // Leaving anyway: a peer that is gone cannot be told.
    }
    for (auto& l : links)
      if (l) l->close();
    close_acceptor();
  }
};

std::unique_ptr<TcpCommunicator> TcpCommunicator::connect(TcpOptions options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size)
    throw CommError(CommFault::config, fmt::format("rank {} is not a rank of a {}-rank job",
                                                   options.rank, options.world_size));
  if (options.token.empty())
    throw CommError(CommFault::config,
                    "no job token: every rank needs the same NEURONSIM_JOB_TOKEN");
  // Port 0 is for a rank 0 that tells the others where it listens (on_listening).
  split_address(options.root, "NEURON_RT_ROOT_COMM_ID",
                options.rank == 0 && static_cast<bool>(options.on_listening));
  if (!options.run.runtime) options.run.runtime = RuntimeCosts::load();  // read once per job
  auto impl = std::make_unique<Impl>(std::move(options));
  if (impl->opt.world_size > 1) impl->join();
  if (impl->opt.run.cores.empty())
    Fabric::make(impl->opt.instance, impl->opt.world_size, impl->opt.run.placement,
                 impl->opt.run.lnc);
  return std::unique_ptr<TcpCommunicator>(new TcpCommunicator(std::move(impl)));
}

TcpCommunicator::TcpCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpCommunicator::~TcpCommunicator() {
  impl_->say_goodbye();
}

int TcpCommunicator::world_size() const {
  return impl_->opt.world_size;
}
const std::vector<int>& TcpCommunicator::local_ranks() const {
  return impl_->local;
}

CollectiveOutcome TcpCommunicator::run(const CollectiveSpec& spec, std::vector<RankCall> calls,
                                       bool with_data) {
  if (calls.size() != 1 || calls[0].rank != impl_->me())
    throw std::invalid_argument(fmt::format(
        "rank {}'s process runs only its own rank's part of a collective", impl_->me()));
  if (impl_->failure) throw *impl_->failure;
  try {
    return impl_->collective(spec, calls[0], with_data);
  } catch (const CommError& e) {
    impl_->abandon(e);
    throw;
  } catch (const std::exception& e) {
    impl_->abandon(CommError(CommFault::protocol, e.what()));
    throw;
  }
}

}  // namespace neuronsim::cc
