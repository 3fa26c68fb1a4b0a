// Collectives across a TCP transport on loopback: ranks in threads of this process, and ranks in
// processes of their own (fork). Values against the reference, times against the same job run
// in one process, and the faults: strangers, garbage, wrong world size, duplicate rank, a rank
// that never arrives, one that dies, one that leaves early, ranks that disagree.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange without it

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/asio.hpp>

#include "neuronsim/cc/tcp.h"
#include "neuronsim/spec/config.h"
#include "reference.h"

using namespace neuronsim;
using namespace neuronsim::cc;
using isa::DType;
using std::chrono::milliseconds;

namespace {

const spec::InstanceConfig& trn1() {
  static const spec::InstanceConfig inst = spec::load_instance("trn1.32xlarge");
  return inst;
}

uint16_t free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::address_v4::loopback(), 0});
  return a.local_endpoint().port();
}

TcpOptions options(int rank, int R, uint16_t port, milliseconds timeout = milliseconds(10'000)) {
  TcpOptions o;
  o.root = fmt::format("127.0.0.1:{}", port);
  o.rank = rank;
  o.world_size = R;
  o.token = "a secret of this job";
  o.timeout = timeout;
  o.instance = trn1();
  o.warn = [](const std::string&) {};
  return o;
}

// Runs one thread per entry of `opts`, each joining the job and then calling `body`; returns
// what each thread threw ("" when nothing).
std::vector<std::string> run_threads(const std::vector<TcpOptions>& opts,
                                     const std::function<void(size_t, TcpCommunicator&)>& body,
                                     std::vector<CommFault>* faults = nullptr) {
  std::vector<std::string> errors(opts.size());
  std::vector<CommFault> f(opts.size(), CommFault::config);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < opts.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        auto comm = TcpCommunicator::connect(opts[i]);
        body(i, *comm);
      } catch (const CommError& e) {
        errors[i] = e.what();
        f[i] = e.fault();
      } catch (const std::exception& e) {
        errors[i] = std::string("not a CommError: ") + e.what();
      }
    });
  for (auto& t : threads) t.join();
  if (faults) *faults = f;
  return errors;
}

CollectiveSpec small_all_reduce(uint64_t count = 16) {
  return CollectiveSpec{Op::all_reduce, ReduceOp::sum, DType::fp32, count, 0, {}, {}};
}

std::vector<uint8_t> ones(uint64_t count) {
  std::vector<float> v(count, 1.0f);
  std::vector<uint8_t> b(count * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

const Op kOps[] = {Op::all_reduce, Op::all_gather, Op::reduce_scatter,
                   Op::all_to_all, Op::broadcast,  Op::reduce,
                   Op::permute,    Op::barrier,    Op::all_to_all_v};
const Algorithm kAlgorithms[] = {Algorithm::ring, Algorithm::mesh, Algorithm::rdh,
                                 Algorithm::hier2d};

// Rank `rank`'s whole matrix (every op x dtype x reduction x count supported by `alg`) over
// `comm`: values against the reference, times against the in-process run of the same job
// (ranks arriving at staggered times). Returns a description of each mismatch.
std::vector<std::string> run_matrix(TcpCommunicator& comm, int rank, Algorithm alg) {
  const int R = comm.world_size();
  RunOptions ro;
  ro.algorithm = alg;
  FabricCommunicator in_process(trn1(), R, ro);
  std::vector<std::string> bad;
  for (Op op : kOps) {
    if (!algorithm_supported(op, alg, R)) continue;
    int index = 0;
    for (const auto& c : neuronsim::cc::testing::reference_cases(op, R)) {
      const Picos arrival = static_cast<Picos>((rank * 7 + index++) % 5) * 1'000'000;
      const auto out =
          comm.run(c.spec, {{rank, arrival, c.inputs[static_cast<size_t>(rank)]}}, true);
      std::vector<RankCall> all;
      for (int r = 0; r < R; ++r)
        all.push_back(RankCall{r, static_cast<Picos>((r * 7 + index - 1) % 5) * 1'000'000,
                               c.inputs[static_cast<size_t>(r)]});
      const auto ref = in_process.run(c.spec, all, true);
      const std::string where = fmt::format("{} {} {}", op_name(op), algorithm_name(alg), c.name);
      if (out.outputs.size() != 1 || out.outputs[0] != c.expected[static_cast<size_t>(rank)])
        bad.push_back(where + ": wrong values");
      if (out.end_ps != ref.end_ps || out.start_ps != ref.start_ps || out.finish_ps.size() != 1 ||
          out.finish_ps[0] != ref.finish_ps[static_cast<size_t>(rank)])
        bad.push_back(fmt::format("{}: times {}..{} in-process {}..{}", where, out.start_ps,
                                  out.end_ps, ref.start_ps, ref.end_ps));
      if (bad.size() > 10) return bad;
    }
  }
  return bad;
}

class TcpMatrix : public ::testing::TestWithParam<int> {};

TEST_P(TcpMatrix, ThreadsMatchReferenceAndInProcessTimes) {
  const int R = GetParam();
  for (Algorithm alg : kAlgorithms) {
    if (!algorithm_supported(Op::all_reduce, alg, R)) continue;  // hier2d needs 8 ranks or more
    SCOPED_TRACE(std::string(algorithm_name(alg)));
    const uint16_t port = free_port();
    std::vector<TcpOptions> opts;
    for (int r = 0; r < R; ++r) {
      opts.push_back(options(r, R, port));
      opts.back().run.algorithm = alg;
    }
    std::mutex mu;
    std::vector<std::string> bad;
    auto errors = run_threads(opts, [&](size_t i, TcpCommunicator& comm) {
      auto b = run_matrix(comm, static_cast<int>(i), alg);
      std::lock_guard lock(mu);
      bad.insert(bad.end(), b.begin(), b.end());
    });
    for (int r = 0; r < R; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_TRUE(bad.empty()) << fmt::format("{}", fmt::join(bad, "\n"));
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpMatrix, ::testing::Values(2, 4));

// One process per rank, as torchrun starts them: fork before any thread exists.
void run_processes(int R) {
  for (Algorithm alg : kAlgorithms) {
    if (!algorithm_supported(Op::all_reduce, alg, R)) continue;  // hier2d needs 8 ranks or more
    const uint16_t port = free_port();
    std::vector<pid_t> pids;
    for (int r = 0; r < R; ++r) {
      const pid_t pid = fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        int status = 0;
        try {
          TcpOptions o = options(r, R, port);
          o.run.algorithm = alg;
          auto comm = TcpCommunicator::connect(o);
          const auto bad = run_matrix(*comm, r, alg);
          for (const auto& b : bad) std::fprintf(stderr, "rank %d: %s\n", r, b.c_str());
          status = bad.empty() ? 0 : 1;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "rank %d: %s\n", r, e.what());
          status = 2;
        }
        std::fflush(stderr);
        _exit(status);
      }
      pids.push_back(pid);
    }
    for (int r = 0; r < R; ++r) {
      int status = 0;
      ASSERT_EQ(waitpid(pids[static_cast<size_t>(r)], &status, 0), pids[static_cast<size_t>(r)]);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << algorithm_name(alg) << ": rank " << r << " exited with status " << status;
    }
  }
}

TEST(TcpProcesses, TwoProcessesMatchReference) {
  run_processes(2);
}
TEST(TcpProcesses, FourProcessesMatchReference) {
  run_processes(4);
}

// A process answers strangers only while it is inside the communicator (no background thread):
// the ranks keep running tiny all-reduces until rank 0 sees `done()` (or 20 s pass), so that
// a stranger arriving mid-job is answered before the job ends. All ranks stop together: rank 0
// contributes 1 to the sum while it wants to go on.
void keep_running_until(TcpCommunicator& comm, const std::function<bool()>& done) {
  const int me = comm.local_ranks()[0];
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    const bool more = me == 0 && !done() && std::chrono::steady_clock::now() < give_up;
    std::vector<uint8_t> flag(4, 0);
    flag[0] = more ? 1 : 0;
    const auto out =
        comm.run(CollectiveSpec{Op::all_reduce, ReduceOp::sum, DType::int32, 1, 0, {}, {}},
                 {{me, 0, flag}}, true);
    if (out.outputs.at(0)[0] == 0) return;
  }
}

// What rank 0 reports about strangers, collected across threads.
class Warnings {
 public:
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& m) {
      std::lock_guard lock(mu_);
      seen_.push_back(m);
    };
  }
  bool any() const {
    std::lock_guard lock(mu_);
    return !seen_.empty();
  }
  std::vector<std::string> all() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> seen_;
};

TEST(TcpFaults, StrangerWithoutTheTokenIsTurnedAwayAndTheJobGoesOn) {
  const uint16_t port = free_port();
  std::vector<TcpOptions> opts{options(0, 2, port), options(1, 2, port), options(1, 2, port)};
  opts[2].token = "a guess";
  Warnings warnings;
  opts[0].warn = warnings.sink();
  auto warned = [&] { return warnings.any(); };
  std::vector<std::vector<uint8_t>> got(3);
  auto errors = run_threads(opts, [&](size_t i, TcpCommunicator& comm) {
    keep_running_until(comm, warned);
    got[i] =
        comm.run(small_all_reduce(), {{comm.local_ranks()[0], 0, ones(16)}}, true).outputs.at(0);
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_NE(errors[2].find("job token"), std::string::npos) << errors[2];
  ASSERT_EQ(got[0].size(), 64u);
  std::vector<float> sum(16);
  std::memcpy(sum.data(), got[0].data(), 64);
  EXPECT_EQ(sum, std::vector<float>(16, 2.0f));
  const auto seen = warnings.all();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_NE(seen[0].find("job token"), std::string::npos);
}

TEST(TcpFaults, GarbageOnThePortIsIgnored) {
  const uint16_t port = free_port();
  Warnings warnings;
  auto opts = std::vector<TcpOptions>{options(0, 2, port), options(1, 2, port)};
  opts[0].warn = warnings.sink();
  auto warned = [&] { return warnings.any(); };
  std::atomic<bool> sent{false};
  std::thread garbage([port, &sent] {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket s(io);
    boost::system::error_code ec;
    for (int i = 0; i < 500; ++i) {
      s.connect({boost::asio::ip::address_v4::loopback(), port}, ec);
      if (!ec) break;
      s.close();
      std::this_thread::sleep_for(milliseconds(20));
    }
    const std::string junk =
        "GET / HTTP/1.1\r\nHost: neuronsim\r\n\r\nand some more bytes to fill a header";
    boost::asio::write(s, boost::asio::buffer(junk), ec);
    sent = true;
    char c;
    s.read_some(boost::asio::buffer(&c, 1), ec);  // until rank 0 hangs up
  });
  auto errors = run_threads(opts, [&](size_t, TcpCommunicator& comm) {
    keep_running_until(comm, warned);
    comm.run(small_all_reduce(), {{comm.local_ranks()[0], 0, ones(16)}}, true);
  });
  garbage.join();
  EXPECT_TRUE(sent.load());
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  const auto seen = warnings.all();
  ASSERT_FALSE(seen.empty());
  EXPECT_NE(seen[0].find("not a neuronsim hello"), std::string::npos) << seen[0];
}

TEST(TcpFaults, WrongWorldSizeIsRejected) {
  const uint16_t port = free_port();
  std::vector<TcpOptions> opts{options(0, 2, port, milliseconds(1500)),
                               options(1, 3, port, milliseconds(1500))};
  std::vector<CommFault> faults;
  auto errors = run_threads(
      opts, [](size_t, TcpCommunicator&) {}, &faults);
  EXPECT_NE(errors[1].find("world size 3 does not match the job's 2"), std::string::npos)
      << errors[1];
  EXPECT_EQ(faults[1], CommFault::rejected);
  EXPECT_NE(errors[0].find("rank(s) 1 never joined"), std::string::npos) << errors[0];
  EXPECT_EQ(faults[0], CommFault::timeout);
}

TEST(TcpFaults, DuplicateRankIsRejected) {
  const uint16_t port = free_port();
  std::vector<TcpOptions> opts{options(0, 3, port), options(1, 3, port), options(2, 3, port),
                               options(1, 3, port)};
  Warnings warnings;
  opts[0].warn = warnings.sink();
  std::atomic<int> ran{0};
  auto errors = run_threads(opts, [&](size_t, TcpCommunicator& comm) {
    keep_running_until(comm, [&] { return warnings.any(); });
    comm.run(small_all_reduce(), {{comm.local_ranks()[0], 0, ones(16)}}, true);
    ++ran;
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[2], "");
  const std::string& rejected = errors[1].empty() ? errors[3] : errors[1];
  EXPECT_TRUE(errors[1].empty() != errors[3].empty()) << errors[1] << " | " << errors[3];
  EXPECT_NE(rejected.find("rank 1 has already joined the job"), std::string::npos) << rejected;
  EXPECT_EQ(ran.load(), 3);
}

TEST(TcpFaults, RankThatNeverArrivesFailsEveryRankWithinTheTimeout) {
  const uint16_t port = free_port();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<TcpOptions> opts{options(0, 3, port, milliseconds(1000)),
                               options(1, 3, port, milliseconds(1000))};
  std::vector<CommFault> faults;
  auto errors = run_threads(
      opts, [](size_t, TcpCommunicator&) {}, &faults);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_NE(errors[0].find("rank(s) 2 never joined"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank(s) 2 never joined"), std::string::npos) << errors[1];
  EXPECT_EQ(faults[0], CommFault::timeout);
  EXPECT_EQ(faults[1], CommFault::timeout);
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST(TcpFaults, RootThatNeverListensIsATimeout) {
  std::vector<TcpOptions> opts{options(1, 2, free_port(), milliseconds(500))};
  std::vector<CommFault> faults;
  auto errors = run_threads(
      opts, [](size_t, TcpCommunicator&) {}, &faults);
  EXPECT_NE(errors[0].find("could not reach rank 0"), std::string::npos) << errors[0];
  EXPECT_EQ(faults[0], CommFault::timeout);
}

TEST(TcpFaults, RankThatDiesMidJobFailsTheOthers) {
  const uint16_t port = free_port();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // rank 2 joins, then dies without a word
    try {
      auto comm = TcpCommunicator::connect(options(2, 3, port));
      std::fflush(nullptr);
      _exit(0);
    } catch (...) {
      _exit(3);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<CommFault> faults;
  auto errors = run_threads(
      {options(0, 3, port, milliseconds(5000)), options(1, 3, port, milliseconds(5000))},
      [](size_t, TcpCommunicator& comm) {
        comm.run(small_all_reduce(), {{comm.local_ranks()[0], 0, ones(16)}}, true);
      },
      &faults);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("lost rank"), std::string::npos)
        << errors[static_cast<size_t>(r)];
    EXPECT_EQ(faults[static_cast<size_t>(r)], CommFault::peer_lost);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0,
            std::chrono::seconds(4));  // noticed, not timed out
}

TEST(TcpFaults, RankThatLeavesEarlyIsNamed) {
  const uint16_t port = free_port();
  std::vector<CommFault> faults;
  auto errors = run_threads(
      {options(0, 2, port), options(1, 2, port)},
      [](size_t i, TcpCommunicator& comm) {
        if (i == 1) return;  // says goodbye without running the collective
        comm.run(small_all_reduce(), {{0, 0, ones(16)}}, true);
      },
      &faults);
  EXPECT_NE(errors[0].find("left the job"), std::string::npos) << errors[0];
  EXPECT_EQ(faults[0], CommFault::peer_lost);
  EXPECT_EQ(errors[1], "");
}

TEST(TcpFaults, RanksThatDisagreeOnTheCollectiveFail) {
  const uint16_t port = free_port();
  std::vector<CommFault> faults;
  auto errors = run_threads(
      {options(0, 2, port), options(1, 2, port)},
      [](size_t i, TcpCommunicator& comm) {
        const uint64_t n = i == 0 ? 16 : 32;
        comm.run(small_all_reduce(n), {{static_cast<int>(i), 0, ones(n)}}, true);
      },
      &faults);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NE(errors[i].find("all_reduce(sum, float32, 16)"), std::string::npos) << errors[i];
    EXPECT_NE(errors[i].find("all_reduce(sum, float32, 32)"), std::string::npos) << errors[i];
    EXPECT_EQ(faults[i], CommFault::protocol);
  }
}

TEST(TcpFaults, TimesAgreeAndFollowTheLastArrival) {
  const uint16_t port = free_port();
  std::vector<CollectiveOutcome> outs(4);
  auto errors = run_threads(
      {options(0, 4, port), options(1, 4, port), options(2, 4, port), options(3, 4, port)},
      [&](size_t i, TcpCommunicator& comm) {
        // Rank 3 arrives 50 us late; nobody can finish before it arrives.
        const Picos arrival = i == 3 ? 50 * kPicosPerUs : 0;
        outs[i] =
            comm.run(small_all_reduce(1024), {{static_cast<int>(i), arrival, ones(1024)}}, true);
      });
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(errors[i], "");
    EXPECT_EQ(outs[i].end_ps, outs[0].end_ps);
    EXPECT_EQ(outs[i].start_ps, 0u);
    EXPECT_GT(outs[i].finish_ps.at(0), 50 * kPicosPerUs);
  }
  RunOptions ro;
  EXPECT_EQ(
      outs[0].end_ps,
      simulate_timing(trn1(), small_all_reduce(1024), {0, 0, 0, 50 * kPicosPerUs}, ro).end_ps);
}

TEST(TcpRendezvous, RootOnAFreePortTellsItsAddressAndTheJobRuns) {
  // Rank 0 takes any free port (root "127.0.0.1:0") and publishes the address it got, as the
  // c10d backend does through the job's store; rank 1 dials what was published.
  std::promise<std::string> published;
  std::vector<std::string> errors(2);
  std::vector<uint8_t> result;
  std::thread root([&] {
    try {
      TcpOptions o = options(0, 2, 0);
      o.on_listening = [&](const std::string& address) { published.set_value(address); };
      auto comm = TcpCommunicator::connect(o);
      comm->run(small_all_reduce(), {RankCall{0, 0, ones(16)}}, true);
    } catch (const std::exception& e) {
      errors[0] = e.what();
    }
  });
  const std::string address = published.get_future().get();
  EXPECT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;
  EXPECT_NE(address, "127.0.0.1:0");
  try {
    TcpOptions o = options(1, 2, 0);
    o.root = address;
    auto comm = TcpCommunicator::connect(o);
    result = comm->run(small_all_reduce(), {RankCall{1, 0, ones(16)}}, true).outputs.at(0);
  } catch (const std::exception& e) {
    errors[1] = e.what();
  }
  root.join();
  EXPECT_EQ(errors, std::vector<std::string>(2));
  ASSERT_EQ(result.size(), 64u);
  float first = 0;
  std::memcpy(&first, result.data(), 4);
  EXPECT_EQ(first, 2.0f);
}

TEST(TcpEnvironment, MissingOrMalformedSettingsAreNamed) {
  ::unsetenv("NEURON_RT_ROOT_COMM_ID");
  TcpOptions o;
  try {
    read_tcp_environment(o);
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("NEURON_RT_ROOT_COMM_ID is not set"), std::string::npos);
  }
  ::setenv("NEURON_RT_ROOT_COMM_ID", "localhost", 1);
  EXPECT_THROW(read_tcp_environment(o), CommError);
  ::setenv("NEURON_RT_ROOT_COMM_ID", "127.0.0.1:99999", 1);
  EXPECT_THROW(read_tcp_environment(o), CommError);
  ::setenv("NEURON_RT_ROOT_COMM_ID", "127.0.0.1:62182", 1);
  ::unsetenv("NEURONSIM_JOB_TOKEN");
  ::unsetenv("TORCHELASTIC_RUN_ID");
  try {
    read_tcp_environment(o);
    FAIL() << "no error";
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("NEURONSIM_JOB_TOKEN"), std::string::npos);
  }
  ::setenv("NEURONSIM_JOB_TOKEN", "t", 1);
  read_tcp_environment(o);
  EXPECT_EQ(o.root, "127.0.0.1:62182");
  EXPECT_EQ(o.token, "t");
  ::unsetenv("NEURONSIM_JOB_TOKEN");
  ::unsetenv("NEURON_RT_ROOT_COMM_ID");
}

}  // namespace
