// Training (see zero3_trainer.h): the options check, the unique id shared through the
// rendezvous store, then the steps of the ZeRO-3 trainer (zero3_trainer_internal.h) or the
// pipeline trainer (pipeline_trainer.h), one line each. Threading: one thread.
#include "trainer/zero3_trainer.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "trainer/comm.h"
#include "trainer/pipeline_trainer.h"
#include "trainer/zero3_trainer_internal.h"

namespace collwatch::trainer {
namespace {

// Settings the model cannot run with, as a message (empty when fine).
std::string CheckOptions(const TrainerOptions& options, int world_size) {
  const ModelOptions& model = options.model;
  if (model.hidden <= 0 || model.heads <= 0 || model.hidden % model.heads != 0) {
    return "--hidden must be a positive multiple of --heads";
  }
  if (model.patch <= 0 || model.image_size % model.patch != 0) {
    return "--image-size must be a multiple of --patch";
  }
  const int64_t side = model.image_size / model.patch;
  if (model.seq < 2 + side * side + model.n_future) {
    return "--seq must exceed the image tokens (" + std::to_string(side * side) + ") + n_future + 1";
  }
  if (model.vocab < kFirstTextToken + 8) return "--vocab must be at least 16";
  if (model.n_future < 1 || model.layers < 0 || model.vision_layers < 0 || model.experts < 0) {
    return "--n-future must be at least 1 and layer counts non-negative";
  }
  if (options.batch < 1 || options.steps < 0) return "--batch must be at least 1";
  if (options.stall_rank < 0 || options.stall_rank >= world_size) {
    if (options.scenario == Scenario::kDtypeMismatch ||
        options.scenario == Scenario::kFirstForwardStall) {
      return "--stall-rank " + std::to_string(options.stall_rank) + " is not a rank of this job";
    }
  }
  if (IsPipelineScenario(options.scenario)) {
    if (world_size < 2) return "a pipeline needs at least 2 ranks, one stage each (--nproc 2)";
    if (options.microbatches < 2) return "--microbatches must be at least 2";
    if (!options.dump_params.empty()) return "--dump-params is for the ZeRO-3 scenarios";
  }
  return "";
}

}  // namespace

int RunTraining(const TrainerOptions& options, const DistEnv& env) {
  if (const std::string problem = CheckOptions(options, env.world_size); !problem.empty()) {
    std::fprintf(stderr, "collwatch-trainer: %s\n", problem.c_str());
    return 2;
  }
  at::Device device(at::kCPU);
  if (options.device == "cuda") {
    SelectCudaDevice(env.local_rank);
    device = at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
  } else if (options.device != "cpu") {
    std::fprintf(stderr, "collwatch-trainer: --device must be cpu or cuda\n");
    return 2;
  } else {
    at::set_num_threads(1);  // ranks share the machine's cores
  }

  std::unique_ptr<RendezvousStore> store;
  ncclUniqueId id{};
  if (env.world_size == 1) {
    id = Communicator::NewUniqueId();
  } else {
    store = std::make_unique<RendezvousStore>(env);
    std::vector<uint8_t> bytes;
    if (env.rank == 0) {
      const ncclUniqueId fresh = Communicator::NewUniqueId();
      bytes.assign(reinterpret_cast<const uint8_t*>(&fresh), reinterpret_cast<const uint8_t*>(&fresh) + sizeof fresh);
    }
    bytes = store->Share("collwatch/nccl_unique_id", bytes);
    if (bytes.size() != sizeof id) {
      std::fprintf(stderr, "collwatch-trainer: rank %d: bad unique id from the store\n", env.rank);
      return 2;
    }
    std::memcpy(&id, bytes.data(), sizeof id);
  }

  Communicator comm(env.rank, env.world_size, id, device);
  std::unique_ptr<StepTrainer> trainer;
  if (IsPipelineScenario(options.scenario)) {
    trainer = std::make_unique<PipelineTrainer>(options, env, comm, device);
  } else {
    trainer = std::make_unique<Zero3Trainer>(options, env, comm, device);
  }
  if (env.rank == 0) {
    std::printf("collwatch-trainer: scenario %s, %d ranks on %s, %lld parameters (%lld trainable)\n",
                std::string(ScenarioToString(options.scenario)).c_str(), env.world_size,
                device.str().c_str(), static_cast<long long>(trainer->ParameterCount(false)),
                static_cast<long long>(trainer->ParameterCount(true)));
    std::fflush(stdout);
  }
  for (int64_t step = 0; step < options.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    const double loss = trainer->Step(step);
    const double millis =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %d step %lld loss %.4f time_ms %.1f\n", env.rank, static_cast<long long>(step),
                loss, millis);
    if (step == 0 && env.rank == 0) {
      if (const std::string note = trainer->FirstStepNote(); !note.empty()) std::printf("rank 0 %s\n", note.c_str());
    }
    std::fflush(stdout);
  }
  if (!options.dump_params.empty() && !trainer->DumpParams(options.dump_params)) return 1;
  return 0;
}

}  // namespace collwatch::trainer
