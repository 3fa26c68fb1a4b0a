// The explicit async API of runtime 2.31 (nrta_*, symbol version NRT_3.0.0; spec §8.10), over
// the device's queues. Every request goes on the queue of its logical core's physical core
// (sim::Device::enqueue): tensor reads, writes and copies as copies between HBM places (the host
// buffer, and a host tensor, mapped into the core's chip for the request), executions as
// executions. One queue per core keeps every request of a core in submission order, whatever
// its XU and queue; the device orders work of different cores by what it reads and writes.
//
// A request's sequence number is its XU in the top 16 bits and the device's sequence number in
// the low 48 (increasing on every queue). One thread per session completes the requests in
// that order: it takes each completion from the device, unmaps what the request mapped,
// counts output completions, writes the request's final status to *exec_ret, and signals the
// eventfds registered for it and for its (core, XU, queue).
#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <thread>

#include "nrt/nrt_async.h"
#include "runtime.h"

namespace neuronsim::rt {
namespace {

// Queues per XU of a core: tensor op 2, compute 1, collectives 3 (spec §8.10).
constexpr int kQueues[NRTA_XU_TYPE_NUM] = {2, 1, 3};
constexpr const char* kXuNames[NRTA_XU_TYPE_NUM] = {"tensor-op", "compute", "collectives"};

struct QueueKey {
  uint32_t lnc = 0;
  int xu = 0;
  int queue = 0;
  auto operator<=>(const QueueKey&) const = default;
};

nrta_seq_t seq_id(int xu, uint64_t num) {
  return (static_cast<nrta_seq_t>(xu) << 48) | num;
}

void signal(int fd) {
  const uint64_t one = 1;
  if (write(fd, &one, sizeof one) < 0) {
  }  // a closed or full eventfd: nothing to tell
}

// One request on the device.
struct AsyncOp {
  uint64_t num = 0;  // the device's sequence number
  QueueKey key;
  const char* api = "";  // the nrta_* call, for log lines
  std::string what;      // the model, for log lines
  NRT_STATUS* exec_ret = nullptr;
  bool execution = false;
  std::vector<std::shared_ptr<Storage>> keep;            // alive until done
  std::vector<std::pair<uint32_t, uint64_t>> temp_maps;  // unmapped when done
  std::vector<const nrt_tensor*> outputs;                // completions counted when done
};

}  // namespace
}  // namespace neuronsim::rt

// An error tracker: the failures of its core's requests, collected and handed out in turn.
struct nrta_error_tracker {
  std::weak_ptr<neuronsim::rt::AsyncQueues> queues;  // gone once the runtime closed
  uint32_t lnc = 0;
  std::vector<nrta_error_t> collected;  // since the last get_list
  std::vector<nrta_error_t> handed;     // what the last get_list returned
};

namespace neuronsim::rt {

struct AsyncQueues {
  Session* session = nullptr;
  std::mutex mu;  // taken after Runtime::mu, never before it
  std::condition_variable cv;
  std::deque<AsyncOp> pending;  // in sequence order
  uint64_t issued = 0;          // the last device sequence number of a request
  std::map<QueueKey, nrta_seq_t> last_done;
  std::map<QueueKey, int> queue_fds;
  std::multimap<uint64_t, int> seq_fds;  // device sequence number -> eventfd
  bool stop = false;
  std::thread thread;
  std::set<nrta_error_tracker*> trackers;

  void complete_in_order();
  // The request's final status, with what it mapped unmapped and its completions counted.
  NRT_STATUS complete(AsyncOp& op, const sim::Completion& c);
};

NRT_STATUS AsyncQueues::complete(AsyncOp& op, const sim::Completion& c) {
  NRT_STATUS status = NRT_SUCCESS;
  if (c.error) {
    const auto [s, message] = fault_of(c.error);
    status = s;
    log(kError, op.api, "{}{}{} failed (status {}): {}", op.what, op.what.empty() ? "" : ": ",
        seq_id(op.key.xu, op.num), static_cast<int>(status), message);
  } else if (op.execution) {
    status = check_timeout(session->config, c);
  }
  unmap(*session->device, op.temp_maps);
  if (op.execution) {
    std::lock_guard<std::mutex> lock(rt().mu);
    if (status == NRT_SUCCESS)
      for (const nrt_tensor* t : op.outputs)
        if (live(t)) const_cast<nrt_tensor*>(t)->completions++;
    --session->async_executions;
    rt().completions.notify_all();
  }
  return status;
}

void AsyncQueues::complete_in_order() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    cv.wait(lock, [&] { return stop || !pending.empty(); });
    if (pending.empty()) return;    // stopping, and every request is complete
    AsyncOp& op = pending.front();  // only this thread pops; pushes keep references valid
    lock.unlock();
    const NRT_STATUS status = complete(op, session->device->wait(op.num));
    lock.lock();
    if (op.exec_ret != nullptr) *op.exec_ret = status;
    const nrta_seq_t id = seq_id(op.key.xu, op.num);
    if (status != NRT_SUCCESS)
      for (nrta_error_tracker* t : trackers)
        if (t->lnc == op.key.lnc) t->collected.push_back({id, static_cast<uint64_t>(status)});
    last_done[op.key] = id;
    if (auto fd = queue_fds.find(op.key); fd != queue_fds.end()) signal(fd->second);
    const auto [from, to] = seq_fds.equal_range(op.num);
    for (auto it = from; it != to; ++it) signal(it->second);
    seq_fds.erase(from, to);
    pending.pop_front();
    cv.notify_all();
  }
}

void finish_async(Session& s) {
  if (!s.async) return;
  {
    std::lock_guard<std::mutex> lock(s.async->mu);
    s.async->stop = true;
  }
  s.async->cv.notify_all();
  if (s.async->thread.joinable()) s.async->thread.join();
}

namespace {

// The session's async queues, created with their thread by the first request (rt().mu held).
AsyncQueues& async_of(Session& s) {
  if (!s.async) {
    s.async = std::make_shared<AsyncQueues>();
    s.async->session = &s;
    s.async->thread = std::thread([a = s.async.get()] { a->complete_in_order(); });
  }
  return *s.async;
}

bool valid_fd(int fd) {
  return fd >= 0 && fcntl(fd, F_GETFD) != -1;
}

// Checks a (logical core, XU, queue) of the visible cores (rt().mu held); logs when invalid.
NRT_STATUS check_queue(const char* fn, int64_t lnc, int xu, int queue) {
  const size_t visible = rt().session->config.visible.size();
  if (lnc < 0 || static_cast<uint64_t>(lnc) >= visible) {
    log(kError, fn, "core {} is not one of the {} visible cores", lnc, visible);
    return NRT_INVALID;
  }
  if (xu < 0 || xu >= NRTA_XU_TYPE_NUM) {
    log(kError, fn, "{} is not an XU (0 tensor-op, 1 compute, 2 collectives)", xu);
    return NRT_INVALID;
  }
  if (queue < 0 || queue >= kQueues[xu]) {
    log(kError, fn, "queue {} does not exist: the {} XU of a core has queue{} 0{}", queue,
        kXuNames[xu], kQueues[xu] > 1 ? "s" : "",
        kQueues[xu] > 1 ? fmt::format("-{}", kQueues[xu] - 1) : "");
    return NRT_INVALID;
  }
  return NRT_SUCCESS;
}

// Queues `op` with `enqueue` (which returns the device's sequence number) and hands out its
// sequence number (rt().mu held). On failure, unmaps what the request mapped.
template <class Enqueue>
NRT_STATUS schedule(const char* fn, Session& s, AsyncOp op, Enqueue&& enqueue, nrta_seq_t* out) {
  AsyncQueues& a = async_of(s);
  std::lock_guard<std::mutex> lock(a.mu);  // requests join `pending` in sequence order
  try {
    op.num = enqueue(*s.device);
  } catch (const std::exception& e) {
    log(kError, fn, "cannot queue the request: {}", e.what());
    unmap(*s.device, op.temp_maps);
    return NRT_INVALID;
  }
  a.issued = op.num;
  *out = seq_id(op.key.xu, op.num);
  if (op.execution) ++s.async_executions;
  a.pending.push_back(std::move(op));
  a.cv.notify_all();
  return NRT_SUCCESS;
}

// Where [offset, offset + size) of a tensor is in HBM for a request on `chip` (rt().mu held):
// a device tensor of this session where it is, anything else mapped there for the request.
std::optional<std::pair<uint32_t, uint64_t>> place(const char* fn, Session& s, const nrt_tensor* t,
                                                   uint64_t offset, uint64_t size, uint32_t chip,
                                                   AsyncOp& op) {
  const Storage& st = *t->storage;
  op.keep.push_back(t->storage);
  if (st.on(s.device))
    return std::pair{static_cast<uint32_t>(st.chip), st.hbm_addr + t->offset + offset};
  const auto addr =
      map_host(fn, *s.device, chip, st.data + t->offset + offset, size, t->name.c_str());
  if (!addr) return std::nullopt;
  op.temp_maps.emplace_back(chip, *addr);
  return std::pair{chip, *addr};
}

enum class TensorOp { write, read, copy };

// A tensor write, read or copy: a copy between two HBM places on the core's queue. `host` is the
// host buffer of a write (the source) or a read (the destination).
NRT_STATUS tensor_op(const char* fn, TensorOp kind, const nrt_tensor* src, uint64_t src_offset,
                     const nrt_tensor* dst, uint64_t dst_offset, void* host, uint64_t size, int lnc,
                     int queue, NRT_STATUS* exec_ret, nrta_seq_t* req_sequence) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  const bool reads_tensor = kind != TensorOp::write, writes_tensor = kind != TensorOp::read;
  if ((reads_tensor && !live(src)) || (writes_tensor && !live(dst))) {
    log(kError, fn, "{} is NULL or not a live tensor",
        kind == TensorOp::copy ? "src or dst" : "tensor");
    return NRT_INVALID;
  }
  if (kind != TensorOp::copy && host == nullptr) {
    log(kError, fn, "buf is NULL");
    return NRT_INVALID;
  }
  if (req_sequence == nullptr) {
    log(kError, fn, "req_sequence is NULL");
    return NRT_INVALID;
  }
  if (size == 0) {
    log(kError, fn, "size is 0");
    return NRT_INVALID;
  }
  if (reads_tensor)
    if (NRT_STATUS r = check_range(fn, src, src_offset, size)) return r;
  if (writes_tensor)
    if (NRT_STATUS r = check_range(fn, dst, dst_offset, size)) return r;
  if (NRT_STATUS r = check_queue(fn, lnc, NRTA_XU_TENSOR_OP, queue)) return r;
  Session& s = *rt().session;
  const uint32_t core = s.config.physical_core(static_cast<uint32_t>(lnc));
  const uint32_t chip = s.config.chip_of(static_cast<uint32_t>(lnc));
  AsyncOp op;
  op.key = {static_cast<uint32_t>(lnc), NRTA_XU_TENSOR_OP, queue};
  op.api = fn;
  op.exec_ret = exec_ret;
  auto host_place = [&]() -> std::optional<std::pair<uint32_t, uint64_t>> {
    const auto addr = map_host(fn, *s.device, chip, static_cast<uint8_t*>(host), size, "buf");
    if (!addr) return std::nullopt;
    op.temp_maps.emplace_back(chip, *addr);
    return std::pair{chip, *addr};
  };
  const auto from = reads_tensor ? place(fn, s, src, src_offset, size, chip, op) : host_place();
  const auto to = !from           ? std::nullopt
                  : writes_tensor ? place(fn, s, dst, dst_offset, size, chip, op)
                                  : host_place();
  if (!from || !to) {
    log(kError, fn, "no device memory left to map {} bytes for the request", size);
    unmap(*s.device, op.temp_maps);
    return NRT_RESOURCE;
  }
  const sim::Copy copy{from->first, to->first, from->second, to->second, size, fn, s.config.lnc};
  return schedule(
      fn, s, std::move(op), [&](sim::Device& d) { return d.enqueue(core, copy); }, req_sequence);
}

}  // namespace
}  // namespace neuronsim::rt

using namespace neuronsim::rt;

extern "C" {

NRT_STATUS nrta_tensor_write(nrt_tensor_t* tensor, const void* buf, uint64_t offset, uint64_t size,
                             int lnc_idx, int queue, NRT_STATUS* exec_ret,
                             nrta_seq_t* req_sequence) {
  // The device only reads the host buffer of a write.
  return tensor_op(__func__, TensorOp::write, nullptr, 0, tensor, offset, const_cast<void*>(buf),
                   size, lnc_idx, queue, exec_ret, req_sequence);
}

NRT_STATUS nrta_tensor_read(void* buf, nrt_tensor_t* tensor, uint64_t offset, uint64_t size,
                            int lnc_idx, int queue, NRT_STATUS* exec_ret,
                            nrta_seq_t* req_sequence) {
  return tensor_op(__func__, TensorOp::read, tensor, offset, nullptr, 0, buf, size, lnc_idx, queue,
                   exec_ret, req_sequence);
}

NRT_STATUS nrta_tensor_copy(nrt_tensor_t* src, uint64_t src_offset, nrt_tensor_t* dst,
                            uint64_t dst_offset, uint64_t size, int lnc_idx, int queue,
                            NRT_STATUS* exec_ret, nrta_seq_t* req_sequence) {
  return tensor_op(__func__, TensorOp::copy, src, src_offset, dst, dst_offset, nullptr, size,
                   lnc_idx, queue, exec_ret, req_sequence);
}

NRT_STATUS nrta_execute_schedule(nrt_model_t* model, const nrt_tensor_set_t* input,
                                 nrt_tensor_set_t* output, int queue, NRT_STATUS* exec_ret,
                                 nrta_seq_t* req_sequence) {
  NRT_GATE();
  ExecRequest req;
  std::lock_guard<std::mutex> lock(rt().mu);
  if (req_sequence == nullptr) {
    log(kError, __func__, "req_sequence is NULL");
    return NRT_INVALID;
  }
  if (live(model) && model->data->job) {
    log(kError, __func__,
        "'{}' is a rank of a collective job (nrt_load_collectives); neuronsim runs collective "
        "models with "
        "nrt_execute only",
        model->data->name);
    return NRT_INVALID;
  }
  if (NRT_STATUS s = prepare(__func__, model, input, output, req); s != NRT_SUCCESS) {
    if (req.session) unmap(*req.session->device, req.temp_maps);
    return s;
  }
  Session& s = *req.session;
  const ModelData& m = *req.model;
  if (NRT_STATUS bad = check_queue(__func__, static_cast<int>(m.vnc), NRTA_XU_COMPUTE, queue)) {
    unmap(*s.device, req.temp_maps);
    return bad;
  }
  AsyncOp op;
  op.key = {m.vnc, NRTA_XU_COMPUTE, queue};
  op.api = __func__;
  op.what = m.name;
  op.exec_ret = exec_ret;
  op.execution = true;
  op.keep = std::move(req.keep);
  op.temp_maps = std::move(req.temp_maps);
  op.outputs = std::move(req.outputs);
  return schedule(
      __func__, s, std::move(op),
      [&](sim::Device& d) { return d.enqueue(std::move(req.execution)); }, req_sequence);
}

NRT_STATUS nrta_is_completed(nrta_seq_t seq, bool* is_completed) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (is_completed == nullptr) {
    log(kError, __func__, "is_completed is NULL");
    return NRT_INVALID;
  }
  const uint64_t xu = NRTA_SEQ_GET_XU_ID(seq), num = NRTA_SEQ_GET_SEQ_NUM(seq);
  AsyncQueues& a = async_of(*rt().session);
  std::lock_guard<std::mutex> async_lock(a.mu);
  if (xu >= NRTA_XU_TYPE_NUM || num == 0 || num > a.issued) {
    log(kError, __func__, "{:#x} is not the sequence number of a request", seq);
    return NRT_INVALID;
  }
  *is_completed = a.pending.empty() || num < a.pending.front().num;
  return NRT_SUCCESS;
}

NRT_STATUS nrta_get_sequence(uint32_t lnc_idx, nrta_xu_t xu_type, int queue, nrta_seq_t* seq) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (seq == nullptr) {
    log(kError, __func__, "seq is NULL");
    return NRT_INVALID;
  }
  if (NRT_STATUS r = check_queue(__func__, lnc_idx, xu_type, queue)) return r;
  *seq = seq_id(xu_type, 0);  // nothing has finished there yet
  if (const auto& a = rt().session->async) {
    std::lock_guard<std::mutex> async_lock(a->mu);
    if (auto it = a->last_done.find({lnc_idx, xu_type, queue}); it != a->last_done.end())
      *seq = it->second;
  }
  return NRT_SUCCESS;
}

NRT_STATUS nrta_event_register_xu_completion(int lnc_idx, nrta_xu_t xu_type, int queue,
                                             int eventfd) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (NRT_STATUS r = check_queue(__func__, lnc_idx, xu_type, queue)) return r;
  if (eventfd != -1 && !valid_fd(eventfd)) {
    log(kError, __func__, "{} is not an open file descriptor", eventfd);
    return NRT_INVALID;
  }
  AsyncQueues& a = async_of(*rt().session);
  std::lock_guard<std::mutex> async_lock(a.mu);
  const QueueKey key{static_cast<uint32_t>(lnc_idx), xu_type, queue};
  if (eventfd == -1)
    a.queue_fds.erase(key);
  else
    a.queue_fds[key] = eventfd;
  return NRT_SUCCESS;
}

NRT_STATUS nrta_event_register_seq_id_completion(nrta_seq_t seq, int eventfd) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  const uint64_t xu = NRTA_SEQ_GET_XU_ID(seq), num = NRTA_SEQ_GET_SEQ_NUM(seq);
  if (eventfd != -1 && !valid_fd(eventfd)) {
    log(kError, __func__, "{} is not an open file descriptor", eventfd);
    return NRT_INVALID;
  }
  AsyncQueues& a = async_of(*rt().session);
  std::lock_guard<std::mutex> async_lock(a.mu);
  if (xu >= NRTA_XU_TYPE_NUM || num == 0 || num > a.issued) {
    log(kError, __func__, "{:#x} is not the sequence number of a request", seq);
    return NRT_INVALID;
  }
  if (eventfd == -1) {
    a.seq_fds.erase(num);
    return NRT_SUCCESS;
  }
  if (a.pending.empty() || num < a.pending.front().num)
    signal(eventfd);  // already complete
  else
    a.seq_fds.emplace(num, eventfd);
  return NRT_SUCCESS;
}

NRT_STATUS nrta_error_tracker_create(uint32_t lnc_idx, nrta_error_tracker_t** error_tracker) {
  NRT_GATE();
  std::lock_guard<std::mutex> lock(rt().mu);
  if (error_tracker == nullptr) {
    log(kError, __func__, "error_tracker is NULL");
    return NRT_INVALID;
  }
  if (const NRT_STATUS s = check_queue(__func__, lnc_idx, NRTA_XU_COMPUTE, 0); s != NRT_SUCCESS)
    return s;
  AsyncQueues& a = async_of(*rt().session);
  auto tracker = std::make_unique<nrta_error_tracker>();
  tracker->queues = rt().session->async;
  tracker->lnc = lnc_idx;
  std::lock_guard<std::mutex> async_lock(a.mu);
  a.trackers.insert(tracker.get());
  *error_tracker = tracker.release();
  return NRT_SUCCESS;
}

void nrta_error_tracker_destroy(nrta_error_tracker_t* error_tracker) {
  if (error_tracker == nullptr) return;
  if (const std::shared_ptr<AsyncQueues> a = error_tracker->queues.lock()) {
    std::lock_guard<std::mutex> lock(a->mu);
    a->trackers.erase(error_tracker);
  }
  delete error_tracker;
}

NRT_STATUS nrta_error_tracker_get_list(nrta_error_tracker_t* error_tracker,
                                       const nrta_error_t** list, size_t* error_count) {
  if (error_tracker == nullptr || list == nullptr || error_count == nullptr) {
    log(kError, __func__, "{} is NULL",
        error_tracker == nullptr ? "error_tracker"
        : list == nullptr        ? "list"
                                 : "error_count");
    return NRT_INVALID;
  }
  const std::shared_ptr<AsyncQueues> a = error_tracker->queues.lock();
  std::unique_lock<std::mutex> lock;
  if (a) lock = std::unique_lock<std::mutex>(a->mu);  // the completing thread appends under it
  error_tracker->handed = std::move(error_tracker->collected);
  error_tracker->collected.clear();
  *list = error_tracker->handed.data();
  *error_count = error_tracker->handed.size();
  return NRT_SUCCESS;
}

}  // extern "C"
