// Chip generations and instances as data: spec/configs/<generation>.json and
// spec/configs/instances.json, built into the library (or read from a directory:
// NEURONSIM_CONFIG_DIR). Every figure in those files carries its source
// (a document section or a measurement); loading refuses inconsistent configs
// with a message naming the file and the field.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "neuronsim/isa/instruction.h"
#include "neuronsim/isa/target.h"

namespace neuronsim::spec {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One NeuronCore generation (NeuronCore-v2 = trn1/inf2, v3 = trn2, v4 = trn3).
struct GenerationConfig {
  std::string name;  // trn1, trn2, trn3
  int core_version = 0;
  const isa::Target* target = nullptr;  // ISA limits of this generation

  // Engine clocks (GHz), §2.1.
  double pe_ghz = 0, act_ghz = 0, dve_ghz = 0, pool_ghz = 0, sp_ghz = 0;

  // On-chip memories, §2.2.
  uint32_t partitions = 128;
  uint32_t sbuf_partition_bytes = 0;
  uint32_t psum_partition_bytes = 0;
  uint32_t psum_banks = 8;

  // TensorE, §4.1-4.2.
  uint32_t pe_min_interval = 64;  // MM_INIT_LATENCY: minimum initiation interval (PE cycles)
  uint32_t pe_fp32_factor = 4;    // FP32 matmul passes
  uint32_t pe_fp32_transpose_factor = 4;  // FP32 PE transpose (2 with v3's transpose mode)
  uint32_t pe_weight_load_speedup = 4;    // fast weight load vs a moving pass of the same size

  // ACT/DVE/POOL, §4.1-4.2.
  uint32_t min_interval = 64;         // MIN_II (engine cycles)
  uint32_t access_overhead = 60;      // fixed cycles to start a tensor access
  uint32_t dependent_overhead = 100;  // static overhead when an instruction waited on a semaphore
  uint32_t pool_startup = 150;        // GpSimd library start-up
  uint32_t dve_elems_per_cycle_16bit =
      1;  // DVE lanes multiplier for BF16/FP16 (v3: 512/128 = 4 modes)

  // DMA, §3.
  uint32_t dma_engines = 16;  // per core
  uint32_t dma_queues_per_engine = 16;
  double dma_engine_bytes_per_ns = 0;  // sustained per engine
  // What all of a core's DMA engines move together at most (a limit shared by its engines,
  // beyond each engine's own rate); dma_engines * dma_engine_bytes_per_ns where none is known.
  double dma_core_bytes_per_ns = 0;
  double dma_fixed_ns = 0;  // per transfer (descriptor processing)
  double dma_issue_ns = 0;  // trigger to first byte (DGE / cross-engine latency)
  // What one dma_copy keeps its triggering engine's hardware DGE busy (dma_copy hwdge=true;
  // 0 where the generation has none).
  double dma_hwdge_ns = 0;
  // Per descriptor, a contiguous piece of at most dma_descriptor_max_bytes: why small rows run
  // below the sustained rate.
  double dma_descriptor_ns = 0;
  uint64_t dma_descriptor_max_bytes = 65536;
  // A DMA transpose (dma_copy transpose=true) streams at this fraction of a copy's bandwidth,
  // from HBM and from SBUF.
  double dma_transpose_hbm_efficiency = 1;
  double dma_transpose_sbuf_efficiency = 1;
  // A DMA that adds into its destination (dma_copy add=true, read-add-write) streams at this
  // fraction of a copy's bandwidth.
  double dma_add_efficiency = 1;

  // The runtime's cost of one execution on a core (nrt_execute) before its first instruction:
  // a fixed part and a part per input and output tensor (docs/cost-model.md §6).
  double launch_fixed_ns = 0;
  double launch_per_tensor_ns = 0;
  // The host's cost of dispatching one op of a framework to the device (PyTorch's dispatcher
  // and autograd, from Python): host time that overlaps the device's work (docs/cost-model.md
  // §6.1).
  double host_op_ns = 0;

  // HBM, §1, §2.3.
  uint32_t cores_per_chip = 0;
  uint32_t hbm_stacks = 0;
  double hbm_bytes_per_ns = 0;  // per chip
  uint64_t hbm_bytes = 0;       // per chip

  // Links, §5: one hop between chips over NeuronLink, and core to core inside a chip (through
  // HBM, at hbm_bytes_per_ns).
  double neuronlink_latency_ns = 0;
  double intra_chip_latency_ns = 0;

  // Collectives, §5: the automatic algorithm choice by message size (mesh below the first,
  // recursive halving-doubling below the second, ring above).
  uint64_t cc_mesh_below_bytes = 0;
  uint64_t cc_rdh_below_bytes = 0;

  // Peak dense BF16 FLOP/s of one core, for MFU: 2 * 128 * 128 * pe_ghz * 1e9.
  double peak_bf16_flops() const;
  // The clock of an engine (GHz).
  double ghz(isa::Engine engine) const;
};

// One instance type: how many chips of which generation. An entry may join several instances
// by NeuronLink (a Trn2 UltraServer: 4 trn2u.48xlarge); `chips` then counts all of them.
struct InstanceConfig {
  std::string name;        // trn2.3xlarge
  std::string generation;  // trn2
  uint32_t chips = 1;
  uint32_t cores_per_chip = 0;         // physical NeuronCores per chip
  std::string topology;                // inside one instance: none, ring, torus-4x4
  uint32_t instances = 1;              // instances joined by NeuronLink in this entry
  std::string instance_link = "none";  // none; ring: same-position chips of the instances in a ring
  // nrt_get_instance_info's classification (libnrt-api.md §6.4, §6.5).
  std::string family;  // trn1, trn1n, inf2, trn2, trn2u, ...
  std::string size;    // xlarge, 2xlarge, ..., 48xlarge
  // Links, one direction of one link each, §1, §5; 0 where the instance has none.
  uint64_t neuronlink_bytes_per_s =
      0;  // chip to chip inside an instance (topology ring, torus-4x4)
  uint64_t instance_link_bytes_per_s =
      0;  // between the instances of this entry (instance_link ring)
  double instance_link_latency_ns = 0;
  uint64_t efa_gbps =
      0;  // EFA of one instance, all its NICs (10^9 bit/s); 0: none, a job fits one entry
  double efa_latency_ns = 0;  // instance to instance over EFA
  // The figures of `generation`, read by load_instance from the same place as the instance, so
  // that whoever holds the instance (the fabric, the collectives' algorithm choice) has the whole
  // spec without loading it again. Empty (no name) in an InstanceConfig not made by load_instance.
  GenerationConfig generation_config;
  uint32_t total_cores() const { return chips * cores_per_chip; }
  uint32_t chips_per_instance() const { return chips / instances; }
  uint32_t cores_per_instance() const { return chips_per_instance() * cores_per_chip; }
};

// One release of the Neuron runtime and its collectives library, as far as it shows in the time
// of a collective (spec/configs/runtime-releases.json; docs/collectives.md, "Runtime releases"):
// what every collective costs besides moving its data, and which algorithms the library's
// automatic choice has. Named by its Neuron SDK release ("2.24").
struct RuntimeRelease {
  std::string name;
  double collective_fixed_ns = 0;    // every collective, from its start
  double across_hosts_fixed_ns = 0;  // more, where its ranks span hosts joined only by EFA
  // Of ring, mesh, rdh, hierarchical (ring always): what the automatic choice picks from.
  std::vector<std::string> algorithms;
  bool has_algorithm(std::string_view algorithm) const;
};

// Where the configs come from: a directory, or the empty path for the files built into the
// library (spec/configs/*.json as they were at build time; builtin_configs).
// config_dir() is $NEURONSIM_CONFIG_DIR when it is set, else the empty path.
std::filesystem::path config_dir();

// Loads and validates <dir>/<name>.json. Throws ConfigError.
GenerationConfig load_generation(const std::string& name,
                                 const std::filesystem::path& dir = config_dir());
// Loads <dir>/instances.json and returns one instance, with the figures of its generation from
// the same place (generation_config). Throws ConfigError (unknown names list the known ones).
InstanceConfig load_instance(const std::string& name,
                             const std::filesystem::path& dir = config_dir());
std::vector<std::string> instance_names(const std::filesystem::path& dir = config_dir());
// The generations in `dir` (its *.json files but instances.json and runtime-releases.json),
// sorted.
std::vector<std::string> generation_names(const std::filesystem::path& dir = config_dir());

// Loads one release of <dir>/runtime-releases.json; the empty name is the newest. A directory
// without that file uses the built-in one (the releases are not hardware). Throws ConfigError
// (an unknown release lists the known ones).
RuntimeRelease load_runtime_release(const std::string& name = "",
                                    const std::filesystem::path& dir = config_dir());
// The releases in that file, oldest first.
std::vector<std::string> runtime_release_names(const std::filesystem::path& dir = config_dir());

// The files built into the library: file name -> contents.
const std::map<std::string, std::string_view>& builtin_configs();

}  // namespace neuronsim::spec
