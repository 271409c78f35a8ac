// collwatch-trainer: parses the flags (CLI11), then either starts --nproc local ranks of
// itself or trains as the rank its environment names. Threading: main thread only.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "trainer/launch.h"
#include "trainer/options.h"
#include "trainer/zero3_trainer.h"

int main(int argc, char** argv) {
  using collwatch::trainer::Scenario;
  collwatch::trainer::TrainerOptions options;
  collwatch::trainer::ModelOptions& model = options.model;
  std::string scenario = "clean";
  int nproc = 0;

  CLI::App app{"collwatch-trainer: a ZeRO-3 VLM/MTP trainer on the NCCL C API, with scenarios "
               "that reproduce collective-ordering bugs and their fixes"};
  std::string scenario_help = "one of:";
  for (const auto& entry : collwatch::trainer::kScenarioNames) {
    scenario_help += " " + std::string(entry.name);
  }
  app.add_option("--scenario", scenario, scenario_help)->capture_default_str();
  app.add_option("--nproc", nproc,
                 "start this many local ranks (else RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT "
                 "from torchrun/srun, or a single process)");
  app.add_option("--device", options.device, "cpu or cuda (GPU LOCAL_RANK)")->capture_default_str();
  app.add_option("--steps", options.steps, "training steps")->capture_default_str();
  app.add_option("--batch", options.batch, "samples per rank per step")->capture_default_str();
  app.add_option("--lr", options.lr, "AdamW learning rate")->capture_default_str();
  app.add_option("--weight-decay", options.weight_decay, "AdamW weight decay")->capture_default_str();
  app.add_option("--seed", options.seed, "seed of the data and the initial weights")->capture_default_str();
  app.add_option("--hidden", model.hidden, "hidden size (vision and text)")->capture_default_str();
  app.add_option("--heads", model.heads, "attention heads per block")->capture_default_str();
  app.add_option("--layers", model.layers, "trunk transformer blocks")->capture_default_str();
  app.add_option("--vision-layers", model.vision_layers, "frozen vision blocks")->capture_default_str();
  app.add_option("--experts", model.experts, "domain experts after the trunk")->capture_default_str();
  app.add_option("--n-future", model.n_future, "multi-token prediction heads")->capture_default_str();
  app.add_option("--vocab", model.vocab, "vocabulary size")->capture_default_str();
  app.add_option("--seq", model.seq, "tokens per sample")->capture_default_str();
  app.add_option("--image-size", model.image_size, "image side in pixels")->capture_default_str();
  app.add_option("--patch", model.patch, "patch side in pixels")->capture_default_str();
  app.add_option("--image-fraction", options.image_fraction,
                 "image-text scenarios: chance of an image batch")->capture_default_str();
  app.add_option("--image-skew", options.image_skew,
                 "image-text scenarios: added to the chance on even ranks, taken off on odd ranks")
      ->capture_default_str();
  app.add_option("--mixed-from-step", options.mixed_from_step,
                 "image-text scenarios: every rank gets image batches before this step, so the ranks "
                 "part only after clean steps")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--stall-seconds", options.stall_seconds,
                 "first-forward-stall: how late the stalled rank is")->capture_default_str();
  app.add_option("--stall-rank", options.stall_rank,
                 "the misbehaving rank of dtype-mismatch and first-forward-stall")->capture_default_str();
  app.add_option("--microbatches", options.microbatches,
                 "pipeline scenarios: microbatches a step, of --batch samples each")
      ->capture_default_str();
  app.add_option("--fewer-from-step", options.fewer_from_step,
                 "pipeline-fewer-microbatches, pipeline-skip-empty-microbatch: the step from which a stage "
                 "runs one microbatch fewer")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--dump-params", options.dump_params,
                 "after training, rank 0 writes every unit's parameters and last gradients here");
  CLI11_PARSE(app, argc, argv);

  const auto parsed = collwatch::trainer::ParseScenario(scenario);
  if (!parsed) {
    std::fprintf(stderr, "collwatch-trainer: unknown --scenario '%s' (%s)\n", scenario.c_str(),
                 scenario_help.c_str());
    return 2;
  }
  options.scenario = *parsed;
  if (nproc > 0 && !collwatch::trainer::IsLaunchedRank()) {
    return collwatch::trainer::LaunchLocalRanks(nproc, argv);
  }
  return collwatch::trainer::RunTraining(options, collwatch::trainer::ReadDistEnv());
}
