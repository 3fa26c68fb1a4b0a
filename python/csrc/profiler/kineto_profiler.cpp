// torch.profiler's device rows: a Kineto activity profiler for PrivateUse1, registered
// through PyTorch's PrivateUse1 profiler registry. While a profile records ProfilerActivity
// .PrivateUse1, every kernel, copy and collective hold the device runs becomes one device
// activity, linked to the op that launched it, lasting its simulated time.
//
// Placing the simulated clock on the host's: a device event starts when its op launched
// it on the host, or when the previous event of its NeuronCore ends, whichever is later,
// and lasts its simulated duration. So each core's row shows the simulated durations in
// order and back to back, under the ops that launched them; the distance between that row
// and the host rows is the difference between simulated and host time.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include "profiler/profiler.h"

namespace neuronsim::pytorch::profiling {
namespace {

using libkineto::ActivityType;

// A core's row in the trace: resource ids under the device's process id.
constexpr int64_t kDevicePid = 1'000'000;  // clear of host process ids in the viewer

const char* const kEngineNames[] = {"pe", "act", "dve", "pool", "sp"};

class Session : public libkineto::IActivityProfilerSession {
 public:
  void start() override { begin(); }
  void stop() override { events_ = end(); }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_to, int64_t, int64_t) override {
    std::map<std::pair<int, uint32_t>, int64_t> row_end;  // (device, core) -> host ns
    // Kineto keeps the activities through the buffer getTraceBuffer hands over.
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(0, 0, "neuron");
    buffer_->gpuOpCount = static_cast<int>(events_.size());
    for (const DeviceEvent& e : events_) {
      const int64_t duration = static_cast<int64_t>((e.end_ps - e.start_ps + 500) / 1000);
      int64_t& free_at = row_end[{e.device, e.core}];
      const int64_t start = std::max(e.launched_ns, free_at);
      free_at = start + duration;
      buffer_->emplace_activity(
          buffer_->span,
          e.kind == "copy" ? ActivityType::GPU_MEMCPY : ActivityType::CONCURRENT_KERNEL, e.name);
      libkineto::GenericTraceActivity* a = buffer_->activities.back().get();
      a->startTime = start;
      a->endTime = start + duration;
      a->id = static_cast<int32_t>(e.correlation);
      a->device = static_cast<int32_t>(kDevicePid + e.device);
      a->resource = static_cast<int32_t>(e.core);
      a->linked =
          (linked_to && e.correlation) ? linked_to(static_cast<int32_t>(e.correlation)) : nullptr;
      a->flow.id = static_cast<uint32_t>(e.correlation);
      a->flow.type = libkineto::kLinkAsyncCpuGpu;
      a->flow.start = false;
      a->addMetadataQuoted("device", "neuron:" + std::to_string(e.device));
      a->addMetadata("core", e.core);
      a->addMetadataQuoted("kind", e.kind);
      a->addMetadata("simulated_start_us", static_cast<double>(e.start_ps) / 1e6);
      a->addMetadata("simulated_us", static_cast<double>(e.end_ps - e.start_ps) / 1e6);
      for (size_t k = 0; k < e.engine_busy_ps.size(); ++k)
        if (e.engine_busy_ps[k])
          a->addMetadata(std::string(kEngineNames[k]) + "_busy_us",
                         static_cast<double>(e.engine_busy_ps[k]) / 1e6);
      if (e.dma_bytes) a->addMetadata("dma_bytes", e.dma_bytes);
      if (e.flops) a->addMetadata("flops", e.flops);
      logger.handleActivity(*a);
    }
  }

  // The trace's process for the device, and a row per NeuronCore.
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const int device = events_.empty() ? 0 : events_.front().device;
    const std::string name = "neuron:" + std::to_string(device);
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        kDevicePid + device, kDevicePid + device, name, name + " (simulated)"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::set<std::pair<int, uint32_t>> rows;
    for (const DeviceEvent& e : events_) rows.emplace(e.device, e.core);
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [device, core] : rows)
      out.push_back(libkineto::ResourceInfo{static_cast<int64_t>(core), static_cast<int64_t>(core),
                                            kDevicePid + device,
                                            "NeuronCore " + std::to_string(core)});
    return out;
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override { push_correlation(id); }
  void popCorrelationId() override { pop_correlation(); }

 private:
  std::vector<DeviceEvent> events_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

class NeuronProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& activity_types, const libkineto::Config&) override {
    for (ActivityType t : activity_types)
      if (activities_.count(t)) return std::make_unique<Session>();
    return nullptr;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  std::string name_ = "neuronsim";
  std::set<ActivityType> activities_ = {ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY};
};

// Registered when the module loads; PyTorch hands it to Kineto.
const torch::profiler::impl::RegisterPrivateUse1Profiler<NeuronProfiler> registration;

}  // namespace
}  // namespace neuronsim::pytorch::profiling
