// libnrt.so.1: the explicit async API (nrta_*, NRT_3.0.0): requests in queue order, sequence
// numbers, completion polling, output completion counts, eventfds, faults and bad input.
#include <poll.h>
#include <sys/eventfd.h>

#include <chrono>
#include <thread>

#include "nrt/nrt_async.h"

#include "nrt_test_util.h"

using namespace nrt_test;

namespace {

using NrtAsync = NrtTest;

constexpr size_t kAddElems = 128 * 512;
constexpr size_t kAddBytes = kAddElems * 4;

// Polls until the request is complete; false after 60 s.
bool wait_for(nrta_seq_t seq) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool done = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (nrta_is_completed(seq, &done) != NRT_SUCCESS) return false;
    if (done) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return false;
}

// The eventfd's count after waiting up to `ms` for it to become readable (0 when it did not).
uint64_t take_events(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return 0;
  uint64_t n = 0;
  return read(fd, &n, sizeof n) == sizeof n ? n : 0;
}

TEST_F(NrtAsync, WritesExecutionsAndReadsRunInQueueOrder) {
  Loaded m;
  ASSERT_EQ(m.load("add.neff", 0), NRT_SUCCESS);
  const auto a = iota(kAddElems, 0.5f), b = iota(kAddElems, -0.25f, 3.0f);
  std::vector<float> out(kAddElems, -1.0f);
  NRT_STATUS ret[4] = {NRT_FAILURE, NRT_FAILURE, NRT_FAILURE, NRT_FAILURE};
  nrta_seq_t seq[4] = {};
  ASSERT_EQ(nrta_tensor_write(m.tensors["a"], a.data(), 0, kAddBytes, 0, 0, &ret[0], &seq[0]),
            NRT_SUCCESS);
  ASSERT_EQ(nrta_tensor_write(m.tensors["b"], b.data(), 0, kAddBytes, 0, 1, &ret[1], &seq[1]),
            NRT_SUCCESS);
  ASSERT_EQ(nrta_execute_schedule(m.model, m.in, m.out, 0, &ret[2], &seq[2]), NRT_SUCCESS);
  ASSERT_EQ(nrta_tensor_read(out.data(), m.tensors["out"], 0, kAddBytes, 0, 0, &ret[3], &seq[3]),
            NRT_SUCCESS);
  // XU in the top 16 bits, an increasing counter below.
  EXPECT_EQ(NRTA_SEQ_GET_XU_ID(seq[0]), static_cast<uint64_t>(NRTA_XU_TENSOR_OP));
  EXPECT_EQ(NRTA_SEQ_GET_XU_ID(seq[2]), static_cast<uint64_t>(NRTA_XU_COMPUTE));
  EXPECT_EQ(NRTA_SEQ_GET_XU_ID(seq[3]), static_cast<uint64_t>(NRTA_XU_TENSOR_OP));
  for (int i = 1; i < 4; ++i)
    EXPECT_GT(NRTA_SEQ_GET_SEQ_NUM(seq[i]), NRTA_SEQ_GET_SEQ_NUM(seq[i - 1]));

  ASSERT_TRUE(wait_for(seq[3]));
  for (int i = 0; i < 4; ++i) {
    bool done = false;
    EXPECT_EQ(nrta_is_completed(seq[i], &done), NRT_SUCCESS);
    EXPECT_TRUE(done) << "request " << i << " completes before the later ones";
    EXPECT_EQ(ret[i], NRT_SUCCESS) << "request " << i;
  }
  std::vector<float> want(kAddElems);
  for (size_t i = 0; i < kAddElems; ++i) want[i] = a[i] + b[i];
  EXPECT_EQ(out, want) << "the read ran after the execution, which ran after both writes";
  EXPECT_EQ(nrt_tensor_check_output_completion(m.tensors["out"], 0, 1), NRT_SUCCESS);

  // The last request that finished on each (core, XU, queue).
  nrta_seq_t last = 0;
  ASSERT_EQ(nrta_get_sequence(0, NRTA_XU_TENSOR_OP, 0, &last), NRT_SUCCESS);
  EXPECT_EQ(last, seq[3]);
  ASSERT_EQ(nrta_get_sequence(0, NRTA_XU_TENSOR_OP, 1, &last), NRT_SUCCESS);
  EXPECT_EQ(last, seq[1]);
  ASSERT_EQ(nrta_get_sequence(0, NRTA_XU_COMPUTE, 0, &last), NRT_SUCCESS);
  EXPECT_EQ(last, seq[2]);
  ASSERT_EQ(nrta_get_sequence(3, NRTA_XU_COMPUTE, 0, &last), NRT_SUCCESS);
  EXPECT_EQ(last, static_cast<nrta_seq_t>(NRTA_XU_COMPUTE) << 48) << "nothing finished on core 3";
}

TEST_F(NrtAsync, CopiesBetweenDeviceAndHostTensorsAtOffsets) {
  nrt_tensor_t *dev = nullptr, *host = nullptr, *other = nullptr;
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 1, 4096, "dev", &dev), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, -1, 4096, "host", &host), NRT_SUCCESS);
  ASSERT_EQ(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 2, 4096, "other", &other),
            NRT_SUCCESS);
  std::vector<uint8_t> bytes(1024);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  NRT_STATUS ret[3] = {NRT_FAILURE, NRT_FAILURE, NRT_FAILURE};
  nrta_seq_t seq[3] = {};
  ASSERT_EQ(nrta_tensor_write(dev, bytes.data(), 100, bytes.size(), 1, 0, &ret[0], &seq[0]),
            NRT_SUCCESS);
  ASSERT_EQ(nrta_tensor_copy(dev, 100, host, 2000, bytes.size(), 1, 0, &ret[1], &seq[1]),
            NRT_SUCCESS);
  ASSERT_EQ(nrta_tensor_copy(host, 2000, other, 8, bytes.size(), 1, 1, &ret[2], &seq[2]),
            NRT_SUCCESS);
  ASSERT_TRUE(wait_for(seq[2]));
  for (NRT_STATUS r : ret) EXPECT_EQ(r, NRT_SUCCESS);
  std::vector<uint8_t> got(bytes.size());
  ASSERT_EQ(nrt_tensor_read(host, got.data(), 2000, got.size()), NRT_SUCCESS);
  EXPECT_EQ(got, bytes);
  ASSERT_EQ(nrt_tensor_read(other, got.data(), 8, got.size()), NRT_SUCCESS);
  EXPECT_EQ(got, bytes);
  uint8_t edge[2] = {9, 9};
  ASSERT_EQ(nrt_tensor_read(other, edge, 7, 1), NRT_SUCCESS);
  EXPECT_EQ(edge[0], 0) << "nothing outside the copied range";
  nrt_tensor_free(&dev);
  nrt_tensor_free(&host);
  nrt_tensor_free(&other);
}

TEST_F(NrtAsync, OutputCompletionCountsFollowAsyncExecutions) {
  Loaded m;
  ASSERT_EQ(m.load("add.neff", 4), NRT_SUCCESS);
  std::vector<NRT_STATUS> ret(10, NRT_FAILURE);
  std::vector<nrta_seq_t> seq(10);
  for (size_t i = 0; i < seq.size(); ++i)
    ASSERT_EQ(nrta_execute_schedule(m.model, m.in, m.out, 0, &ret[i], &seq[i]), NRT_SUCCESS);
  // Waits (no timeout) until the ten executions have counted.
  EXPECT_EQ(nrt_tensor_check_output_completion(m.tensors["out"], -1, 10), NRT_SUCCESS);
  EXPECT_TRUE(wait_for(seq.back()));
  EXPECT_EQ(ret, std::vector<NRT_STATUS>(10, NRT_SUCCESS));
  // Nothing pending: an eleventh never comes.
  EXPECT_EQ(nrt_tensor_check_output_completion(m.tensors["out"], 1000000, 11), NRT_TIMEOUT);
}

TEST_F(NrtAsync, EventFdsSignalCompletions) {
  Loaded m;
  ASSERT_EQ(m.load("add.neff", 0), NRT_SUCCESS);
  const int per_queue = eventfd(0, 0), per_seq = eventfd(0, 0);
  ASSERT_GE(per_queue, 0);
  ASSERT_GE(per_seq, 0);
  ASSERT_EQ(nrta_event_register_xu_completion(0, NRTA_XU_COMPUTE, 0, per_queue), NRT_SUCCESS);
  NRT_STATUS ret = NRT_FAILURE;
  nrta_seq_t seq = 0;
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(nrta_execute_schedule(m.model, m.in, m.out, 0, &ret, &seq), NRT_SUCCESS);
  uint64_t events = 0;
  for (int tries = 0; tries < 100 && events < 3; ++tries) events += take_events(per_queue, 600);
  EXPECT_EQ(events, 3u) << "one signal per completed request on (core 0, compute, queue 0)";

  // One request by its sequence number: signalled when it completes...
  std::vector<float> host(kAddElems, 1.0f);
  nrta_seq_t write = 0;
  ASSERT_EQ(nrta_tensor_write(m.tensors["a"], host.data(), 0, kAddBytes, 0, 0, &ret, &write),
            NRT_SUCCESS);
  ASSERT_EQ(nrta_event_register_seq_id_completion(write, per_seq), NRT_SUCCESS);
  EXPECT_EQ(take_events(per_seq, 60000), 1u);
  // ...and at once when it already has.
  ASSERT_TRUE(wait_for(write));
  ASSERT_EQ(nrta_event_register_seq_id_completion(write, per_seq), NRT_SUCCESS);
  EXPECT_EQ(take_events(per_seq, 0), 1u);

  // -1 removes the registration of the queue.
  ASSERT_EQ(nrta_event_register_xu_completion(0, NRTA_XU_COMPUTE, 0, -1), NRT_SUCCESS);
  ASSERT_EQ(nrta_execute_schedule(m.model, m.in, m.out, 0, &ret, &seq), NRT_SUCCESS);
  ASSERT_TRUE(wait_for(seq));
  EXPECT_EQ(take_events(per_queue, 50), 0u);
  // -1 for a sequence number removes its registration: once removed before the request
  // completed, it is never signalled.
  bool removed_in_time = false;
  for (int attempt = 0; attempt < 10 && !removed_in_time; ++attempt) {
    nrta_seq_t later = 0;
    for (int i = 0; i < 10; ++i)
      ASSERT_EQ(nrta_execute_schedule(m.model, m.in, m.out, 0, &ret, &later), NRT_SUCCESS);
    ASSERT_EQ(nrta_event_register_seq_id_completion(later, per_seq), NRT_SUCCESS);
    ASSERT_EQ(nrta_event_register_seq_id_completion(later, -1), NRT_SUCCESS);
    bool done = true;
    ASSERT_EQ(nrta_is_completed(later, &done), NRT_SUCCESS);
    removed_in_time = !done;
    ASSERT_TRUE(wait_for(later));
    const uint64_t n = take_events(per_seq, 50);
    if (removed_in_time) {
      EXPECT_EQ(n, 0u);
    }
  }
  EXPECT_TRUE(removed_in_time);
  close(per_queue);
  close(per_seq);
}

TEST_F(NrtAsync, AFaultArrivesInExecRetAndLaterRequestsStillRun) {
  const auto neff = assemble("async_gather", kGather);
  if (neff.empty())
    GTEST_SKIP() << "neuron-sim (NEURON_SIM) not available to assemble the test NEFF";
  nrt_model_t* model = nullptr;
  std::map<std::string, nrt_tensor_t*> t;
  nrt_tensor_set_t *in = nullptr, *out = nullptr;
  ASSERT_NO_FATAL_FAILURE(load_gather(neff, &model, t, &in, &out));
  const std::vector<int32_t> bad = {1, 9, 0, 0}, good = {2, 2, 2, 2};
  // Error trackers of core 0 (where the requests go) and of core 1.
  nrta_error_tracker_t *here = nullptr, *there = nullptr;
  ASSERT_EQ(nrta_error_tracker_create(0, &here), NRT_SUCCESS);
  ASSERT_EQ(nrta_error_tracker_create(1, &there), NRT_SUCCESS);
  NRT_STATUS ret[4] = {NRT_FAILURE, NRT_SUCCESS, NRT_FAILURE, NRT_FAILURE};
  nrta_seq_t seq[4] = {};
  ASSERT_EQ(nrta_tensor_write(t["idx"], bad.data(), 0, 16, 0, 0, &ret[0], &seq[0]), NRT_SUCCESS);
  ASSERT_EQ(nrta_execute_schedule(model, in, out, 0, &ret[1], &seq[1]), NRT_SUCCESS);
  ASSERT_EQ(nrta_tensor_write(t["idx"], good.data(), 0, 16, 0, 0, &ret[2], &seq[2]), NRT_SUCCESS);
  ASSERT_EQ(nrta_execute_schedule(model, in, out, 0, &ret[3], &seq[3]), NRT_SUCCESS);
  ASSERT_TRUE(wait_for(seq[3]));
  EXPECT_EQ(ret[0], NRT_SUCCESS);
  EXPECT_EQ(ret[1], NRT_EXEC_OOB);
  EXPECT_EQ(ret[2], NRT_SUCCESS);
  EXPECT_EQ(ret[3], NRT_SUCCESS);
  EXPECT_EQ(nrt_tensor_check_output_completion(t["y"], 0, 1), NRT_SUCCESS)
      << "only the good one counts";
  EXPECT_EQ(nrt_tensor_check_output_completion(t["y"], 0, 2), NRT_TIMEOUT);
  // The failed execution, once, in the tracker of its core; nothing in the other.
  const nrta_error_t* errors = nullptr;
  size_t count = 99;
  ASSERT_EQ(nrta_error_tracker_get_list(here, &errors, &count), NRT_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(errors[0].seq_id, seq[1]);
  EXPECT_EQ(errors[0].error_code, static_cast<uint64_t>(NRT_EXEC_OOB));
  ASSERT_EQ(nrta_error_tracker_get_list(here, &errors, &count), NRT_SUCCESS);
  EXPECT_EQ(count, 0u) << "a list is handed out once";
  ASSERT_EQ(nrta_error_tracker_get_list(there, &errors, &count), NRT_SUCCESS);
  EXPECT_EQ(count, 0u);
  nrta_error_tracker_destroy(here);
  nrta_error_tracker_destroy(there);
  nrta_error_tracker_destroy(nullptr);  // nothing to free
  nrt_unload(model);
  for (auto& [name, tensor] : t) nrt_tensor_free(&tensor);
  nrt_destroy_tensor_set(&in);
  nrt_destroy_tensor_set(&out);
}

TEST_F(NrtAsync, BadInputIsRefused) {
  Loaded m;
  ASSERT_EQ(m.load("add.neff", 0), NRT_SUCCESS);
  nrt_tensor_t* a = m.tensors["a"];
  std::vector<uint8_t> buf(kAddBytes);
  NRT_STATUS ret = NRT_SUCCESS;
  nrta_seq_t seq = 0;
  EXPECT_EQ(nrta_tensor_write(nullptr, buf.data(), 0, 16, 0, 0, &ret, &seq), NRT_INVALID);
  EXPECT_EQ(nrta_tensor_write(a, nullptr, 0, 16, 0, 0, &ret, &seq), NRT_INVALID);
  EXPECT_EQ(nrta_tensor_write(a, buf.data(), 0, 16, 0, 0, &ret, nullptr), NRT_INVALID);
  EXPECT_EQ(nrta_tensor_write(a, buf.data(), 0, 0, 0, 0, &ret, &seq), NRT_INVALID);
  EXPECT_EQ(nrta_tensor_write(a, buf.data(), kAddBytes - 8, 16, 0, 0, &ret, &seq), NRT_INVALID);
  EXPECT_EQ(nrta_tensor_read(buf.data(), a, 0, 16, 8, 0, &ret, &seq), NRT_INVALID);  // core 8 of 8
  EXPECT_EQ(nrta_tensor_read(buf.data(), a, 0, 16, -1, 0, &ret, &seq), NRT_INVALID);
  EXPECT_EQ(nrta_tensor_read(buf.data(), a, 0, 16, 0, 2, &ret, &seq),
            NRT_INVALID);  // tensor-op queues 0-1
  EXPECT_EQ(nrta_tensor_copy(a, 0, nullptr, 0, 16, 0, 0, &ret, &seq), NRT_INVALID);
  EXPECT_EQ(nrta_execute_schedule(m.model, m.in, m.out, 1, &ret, &seq),
            NRT_INVALID);  // compute queue 0
  EXPECT_EQ(nrta_execute_schedule(nullptr, m.in, m.out, 0, &ret, &seq), NRT_INVALID_HANDLE);
  EXPECT_EQ(nrta_execute_schedule(m.model, nullptr, m.out, 0, &ret, &seq), NRT_INVALID);
  EXPECT_EQ(ret, NRT_SUCCESS) << "refused requests leave exec_ret alone";

  bool done = false;
  EXPECT_EQ(nrta_is_completed(0, &done), NRT_INVALID);
  ASSERT_EQ(nrta_tensor_write(a, buf.data(), 0, 16, 0, 0, &ret, &seq), NRT_SUCCESS);
  EXPECT_EQ(nrta_is_completed(seq, nullptr), NRT_INVALID);
  EXPECT_EQ(nrta_is_completed(seq + 1000, &done), NRT_INVALID) << "not issued yet";
  EXPECT_EQ(nrta_is_completed((nrta_seq_t{7} << 48) | NRTA_SEQ_GET_SEQ_NUM(seq), &done),
            NRT_INVALID);
  nrta_seq_t last = 0;
  EXPECT_EQ(nrta_get_sequence(0, NRTA_XU_TYPE_NUM, 0, &last), NRT_INVALID);
  EXPECT_EQ(nrta_get_sequence(0, NRTA_XU_COLLECTIVES, 3, &last), NRT_INVALID);  // queues 0-2
  EXPECT_EQ(nrta_get_sequence(0, NRTA_XU_COMPUTE, 0, nullptr), NRT_INVALID);
  const int closed = eventfd(0, 0);
  close(closed);
  EXPECT_EQ(nrta_event_register_xu_completion(0, NRTA_XU_COMPUTE, 0, closed), NRT_INVALID);
  EXPECT_EQ(nrta_event_register_xu_completion(9, NRTA_XU_COMPUTE, 0, -1), NRT_INVALID);
  EXPECT_EQ(nrta_event_register_seq_id_completion(seq, closed), NRT_INVALID);
  EXPECT_EQ(nrta_event_register_seq_id_completion(seq + 1000, -1), NRT_INVALID);
  EXPECT_EQ(nrta_cc_schedule(nullptr, 0, &ret, &seq), NRT_FAILURE);  // collectives stay unsupported
  nrta_error_tracker_t* tracker = nullptr;
  EXPECT_EQ(nrta_error_tracker_create(8, &tracker), NRT_INVALID);  // core 8 of 8
  EXPECT_EQ(nrta_error_tracker_create(0, nullptr), NRT_INVALID);
  const nrta_error_t* errors = nullptr;
  size_t count = 0;
  EXPECT_EQ(nrta_error_tracker_get_list(nullptr, &errors, &count), NRT_INVALID);
  ASSERT_TRUE(wait_for(seq));
  // A rank of a collective job runs with nrt_execute only.
  const auto cc = read_file(example("all_reduce.neff"));
  ASSERT_FALSE(cc.empty());
  nrt_model_t* rank = nullptr;
  ASSERT_EQ(nrt_load_collectives(cc.data(), cc.size(), 1, 1, 0, 1, &rank), NRT_SUCCESS);
  EXPECT_EQ(nrta_execute_schedule(rank, m.in, m.out, 0, &ret, &seq), NRT_INVALID);
  nrt_unload(rank);
}

TEST(NrtAsyncLifecycle, CallsBeforeInitAreUninitializedAndCloseCompletesPendingRequests) {
  setenv("NEURON_RT_LOG_LEVEL", "QUIET", 0);
  bool done = false;
  nrta_seq_t seq = 0;
  EXPECT_EQ(nrta_is_completed(1, &done), NRT_UNINITIALIZED);
  EXPECT_EQ(nrta_get_sequence(0, NRTA_XU_COMPUTE, 0, &seq), NRT_UNINITIALIZED);
  EXPECT_EQ(nrta_tensor_write(nullptr, nullptr, 0, 0, 0, 0, nullptr, &seq), NRT_UNINITIALIZED);
  ASSERT_EQ(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), NRT_SUCCESS);
  std::vector<NRT_STATUS> ret(20, NRT_FAILURE);
  {
    Loaded m;
    ASSERT_EQ(m.load("add.neff", 0), NRT_SUCCESS);
    for (NRT_STATUS& r : ret)
      ASSERT_EQ(nrta_execute_schedule(m.model, m.in, m.out, 0, &r, &seq), NRT_SUCCESS);
    nrt_close();  // with requests in flight: it completes them
  }
  EXPECT_EQ(ret, std::vector<NRT_STATUS>(20, NRT_SUCCESS));
}

}  // namespace
