// `collwatch`: the one command-line tool. Parses flags (CLI11) and calls the libraries.
#include <signal.h>

#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "cli/analyze_command.h"
#include "cli/command_output.h"
#include "cli/daemon_commands.h"
#include "cli/dump_command.h"
#include "cli/env_command.h"
#include "cli/export_command.h"
#include "cli/exit_codes.h"
#include "cli/gc_command.h"
#include "cli/import_command.h"
#include "cli/option_checks.h"
#include "cli/run_command.h"
#include "cli/schedule_commands.h"
#include "cli/stacks_command.h"
#include "cli/top_command.h"
#include "cli/secrets.h"
#include "files/version.h"
#include "process/log_line.h"
#include "ring/settings.h"

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f) a write fails with EFBIG, which collwatch reports
  // and survives (the rings stay), instead of SIGXFSZ killing it without a word.
  signal(SIGXFSZ, SIG_IGN);
  using collwatch::NumberFrom;
  using collwatch::SecretKind;
  CLI::App app{"collwatch: catches collective-ordering bugs and hangs in NCCL jobs"};
  // A stall threshold of a millisecond to 11 days; waits of zero ("never") to 11 days.
  const CLI::Validator kStallSeconds = NumberFrom(0.001, 1e6);
  const CLI::Validator kWaitSeconds = NumberFrom(0, 1e6);
  app.require_subcommand(1);
  // "collwatch 0.1.0 (commit abc1234)": what a bug report should quote (files/version.h).
  app.set_version_flag("--version", "collwatch " + std::string(collwatch::CollwatchVersionText()),
                       "print the version and the commit it was built from, and exit");

  std::string dump_path, dump_job;
  bool dump_json = false;
  CLI::App* dump = app.add_subcommand("dump", "print the records of rings or of a trace store, in the "
                                              "words analyze uses");
  dump->add_option("path", dump_path, "a ring file or folder of rings (e.g. /dev/shm/collwatch-$UID), a "
                                      "collwatch run --out folder, a job folder or one rank trace")
      ->required();
  dump->add_flag("--json", dump_json, "JSON lines: per process one 'ring' or 'trace' object, then its "
                                      "'record' objects (docs/schema/dump.schema.json)");
  dump->add_option("--job", dump_job, "the job to dump, where the folder holds several");

  collwatch::GcOptions gc_options;
  CLI::App* gc = app.add_subcommand("gc", "remove the rings whose process ended and whose records were shipped "
                                          "(all ended ones with --force); print what was kept and why");
  gc->add_option("dir", gc_options.dir, "ring folder (default COLLWATCH_RING_DIR or /dev/shm/collwatch-$UID)");
  gc->add_flag("--force", gc_options.force, "also rings whose records nothing says were shipped");

  bool env_markdown = false;
  CLI::App* env = app.add_subcommand("env", "every environment variable collwatch reads, with the value in "
                                            "force here");
  env->add_flag("--markdown", env_markdown, "the table of docs/environment.md instead");

  // The collector's monitoring outputs, alike for `collector` and `run` (docs/monitoring.md).
  const auto add_monitoring = [](CLI::App* command, collwatch::MonitoringOptions& monitoring) {
    command->add_option("--metrics", monitoring.metrics_listen,
                        "serve Prometheus metrics over HTTP at HOST:PORT/metrics (e.g. 127.0.0.1:9464; off by default)");
    command->add_option("--on-finding", monitoring.on_finding,
                        "run this shell command (/bin/sh -c) once per new finding, the finding's JSON on its stdin");
    command->add_option("--on-finding-timeout", monitoring.on_finding_timeout_s,
                        "seconds each --on-finding command may run before it is killed")
        ->capture_default_str()
        ->check(collwatch::NumberFrom(0.1, 1e6));
    command->add_option("--event-log", monitoring.event_log,
                        "append findings and process state changes to this file as JSON lines");
  };
  bool quiet = false;
  const char* const kQuietHelp = "on stderr only findings and errors";

  collwatch::CollectorOptions collector_options;
  std::string token_file, tls_cert_file, tls_key_file;
  CLI::App* collector = app.add_subcommand("collector", "the collector service: trace store and live state");
  collector->add_option("--listen", collector_options.listen, "host:port or unix:PATH (loopback unless a token is set)")
      ->capture_default_str();
  collector->add_option("--out", collector_options.out_dir, "trace folder")->capture_default_str();
  collector->add_option("--token-file", token_file, "shared secret agents must send");
  collector->add_option("--tls-cert", tls_cert_file, "TLS certificate chain (PEM)");
  collector->add_option("--tls-key", tls_key_file, "TLS private key (PEM)");
  collector->add_option("--job", collector_options.job, "serve only this job (default: the first that connects)");
  collector->add_flag("--fsync", collector_options.fsync, "fdatasync every batch before acknowledging it");
  bool no_analyze = false;
  collector->add_flag("--no-analyze", no_analyze, "store only: no online analysis (collwatch analyze later)");
  collector->add_option("--stall-after", collector_options.analyzer.stall_after_s,
                        "stall threshold floor in seconds (online analysis)")
      ->capture_default_str()
      ->check(kStallSeconds);
  collector->add_option("--max-message-bytes", collector_options.max_message_bytes, "largest accepted message")
      ->capture_default_str()
      ->check(NumberFrom(4096, 1 << 30));  // a batch must fit; gRPC's own ceiling is 2 GiB
  collector->add_option("--max-stream-rate", collector_options.max_events_per_second,
                        "events per second one stream may send")
      ->capture_default_str()
      ->check(NumberFrom(1, 1e9));
  add_monitoring(collector, collector_options.monitoring);
  collector->add_flag("--quiet", quiet, kQuietHelp);

  collwatch::AgentOptions agent_options;
  std::string agent_token_file, agent_ca_file;
  CLI::App* agent = app.add_subcommand("agent", "the node agent: ships this node's rings to a collector");
  agent->add_option("--collector", agent_options.collector, "collector address: HOST:PORT or unix:PATH")
      ->capture_default_str()
      ->check(collwatch::CollectorAddress());
  agent->add_option("--ring-dir", agent_options.ring_dir, "ring folder (default COLLWATCH_RING_DIR or /dev/shm/collwatch-$UID)");
  agent->add_option("--job", agent_options.job, "ship only this job's rings");
  agent->add_option("--token-file", agent_token_file, "shared secret of the collector");
  agent->add_option("--tls-ca", agent_ca_file, "root certificates (PEM): connect with TLS");
  agent->add_option("--idle-exit", agent_options.idle_exit_s,
                    "exit after this many seconds without a live ring (0: never)")
      ->check(kWaitSeconds);
  agent->add_option("--give-up-after", agent_options.give_up_after_s,
                    "with --idle-exit: a ring whose writer ended stops keeping the agent up once the collector "
                    "stored none of its records this many seconds, unreachable or ending every stream (its records "
                    "stay in the ring; 0: never)")
      ->check(kWaitSeconds);
  agent->add_flag("--keep-rings", agent_options.keep_rings,
                  "leave shipped rings of ended processes in place, marked for collwatch gc (default: remove "
                  "them; COLLWATCH_KEEP_RINGS=1 does the same)");
  agent->add_flag("--quiet", quiet, kQuietHelp);

  collwatch::RunOptions run_options;
  std::string run_token_file, run_ca_file;
  CLI::App* run = app.add_subcommand("run", "run CMD with collwatch: preload, agent and collector");
  run->add_option("--out", run_options.out_dir, "trace folder")->capture_default_str();
  run->add_option("--collector", run_options.collector,
                  "stream to this collector (HOST:PORT or unix:PATH) instead of an embedded one")
      ->check(collwatch::CollectorAddress());
  run->add_option("--token-file", run_token_file, "shared secret of --collector");
  run->add_option("--tls-ca", run_ca_file, "root certificates (PEM) of --collector: connect with TLS");
  run->add_option("--ring-dir", run_options.ring_dir, "keep the rings in this folder (default: a private temporary one)");
  run->add_option("--stall-after", run_options.stall_after_s,
                  "seconds a collective may wait before it is a stall (floor; the analyzer raises it for "
                  "large ops from this job's own timings; default 30)")
      ->check(kStallSeconds);
  run->add_flag("--kill-on-hang", run_options.kill_on_hang,
                "at the first finding, write the report and stop the job (exit 124)");
  run->add_flag("--fail-on-findings", run_options.fail_on_findings,
                "exit 123 when the command exited 0 but the run is not healthy (a finding, a rank that failed, "
                "no NCCL call recorded, data missing): real NCCL often completes mismatched collectives on garbage "
                "without hanging");
  run->add_flag("--one-gpu", run_options.one_gpu,
                "run every rank on the one visible GPU, through the CPU NCCL backend's CUDA mode (NCCL "
                "refuses two ranks on one GPU); LOCAL_RANK reads 0 in each rank (docs/one-gpu.md)");
  run->add_flag("--mps", run_options.mps,
                "with --one-gpu: start an MPS server private to the job, so the ranks' kernels share the GPU "
                "at once, not in time slices (a small collective then takes tens of µs instead of milliseconds; needs "
                "nvidia-cuda-mps-control)")
      ->needs(run->get_option("--one-gpu"));
  run->add_flag("--profiler-plugin", run_options.profiler_plugin,
                "libcollwatch.so is NCCL's profiler plugin too (NCCL_PROFILER_PLUGIN): completions from "
                "NCCL's own events, and calls NCCL linked statically makes (docs/profiler-plugin.md)");
  bool run_no_dashboard = false;
  run->add_flag("--no-dashboard", run_no_dashboard,
                "print findings and status lines instead of the full-screen dashboard on a terminal");
  add_monitoring(run, run_options.monitoring);
  run->add_flag("--quiet", quiet, kQuietHelp);
  run->add_option("command", run_options.command, "CMD and its arguments, after --")->required();

  collwatch::TopCommandOptions top_options;
  top_options.top.watch.address = "127.0.0.1:7777";
  CLI::App* top = app.add_subcommand("top", "live terminal dashboard of a collector's job");
  CLI::Option* top_dir = top->add_option("dir", top_options.run_dir,
                                         "the --out folder of a running collwatch run: its collector and token");
  top->add_option("--collector", top_options.top.watch.address,
                  "collector address, HOST:PORT or unix:PATH (collwatch run prints its own)")
      ->capture_default_str()
      ->check(collwatch::CollectorAddress())
      ->excludes(top_dir);
  top->add_option("--token-file", top_options.token_file, "shared secret of the collector")->excludes(top_dir);
  top->add_option("--tls-ca", top_options.tls_ca_file, "root certificates (PEM): connect with TLS")->excludes(top_dir);
  top->add_option("--job", top_options.top.watch.job, "job id (default: the collector's only job)");
  top->add_flag("--plain", top_options.top.plain, "no colours, ASCII only (NO_COLOR=1: no colours only)");
  top->add_option("--refresh", top_options.top.refresh_s, "seconds between redraws")
      ->capture_default_str()
      ->check(NumberFrom(0.02, 3600));
  CLI::Option* top_once = top->add_flag("--once", top_options.top.once,
                                        "print one frame to standard output and exit (no terminal needed)");
  top->add_flag("--json", top_options.top.json, "with --once: the frame as JSON (docs/schema/top.schema.json)")
      ->needs(top_once);
  top->add_option("--size", top_options.size, "with --once: the frame's COLUMNSxROWS (default: the terminal's, "
                                              "else 80x24)")
      ->needs(top_once);
  top->add_option("--connect-timeout", top_options.top.connect_timeout_s,
                  "seconds to wait for the collector's first state before giving up")
      ->capture_default_str()
      ->check(NumberFrom(0.1, 3600));

  collwatch::StacksCommandOptions stacks_options;
  CLI::App* stacks = app.add_subcommand("stacks", "what processes are doing now: the stacks of PIDs, or of the rank "
                                                  "processes under them (a launcher's pid), merged across ranks");
  stacks->add_option("pid", stacks_options.pids, "process ids")->required();
  stacks->add_flag("--json", stacks_options.json, "every thread's stacks as JSON (docs/schema/stacks.schema.json)");
  stacks->add_flag("--python-only", stacks_options.no_native,
                   "Python call paths only, read from memory: no thread is stopped");

  collwatch::AnalyzeOptions analyze_options;
  CLI::App* analyze = app.add_subcommand("analyze", "post-mortem report of a trace folder (or of rings alone)");
  analyze->add_option("dir", analyze_options.path, "collwatch run --out folder, a job or rank trace folder, "
                                                   "a ring folder or a ring file")->required();
  analyze->add_flag("--json", analyze_options.json, "report.json on stdout (docs/schema/report.schema.json)");
  analyze->add_option("--job", analyze_options.job, "the job to analyse, where the folder holds several");
  analyze->add_option("--source-root", analyze_options.source_root,
                      "read the source lines a call path names only from files under DIR (imported Flight Recorder "
                      "dumps: never read without it)");
  analyze->add_option("--stall-after", analyze_options.stall_after_s,
                      "stall threshold floor in seconds (default: run.json's, else 30)")
      ->check(kStallSeconds);
  analyze->add_flag("--keep-every-call", analyze_options.keep_every_call,
                    "keep every rank's calls in memory rather than fold the ranks that agree into their class "
                    "(the same report, for more memory: a check of the folding)");

  collwatch::DiffCommandOptions diff_options;
  CLI::App* diff = app.add_subcommand("diff", "first difference between two runs' collective schedules, per "
                                              "communicator (exit 0 same, 1 different, 2 bad input)");
  diff->add_option("dir_a", diff_options.dir_a, "trace folder of the first run (collwatch run --out)")->required();
  diff->add_option("dir_b", diff_options.dir_b, "trace folder of the second run")->required();
  diff->add_flag("--ignore-regions", diff_options.ignore_regions, "compare op, count, dtype, reduce op and root only");
  diff->add_flag("--code-lines", diff_options.code_lines,
                 "regions taken from Python call paths name their lines (left out by default: edits move lines)");
  diff->add_flag("--json", diff_options.json, "the differences as JSON (docs/schema/diff.schema.json)");

  collwatch::BaselineCommandOptions baseline_options;
  CLI::App* baseline = app.add_subcommand("baseline", "write a run's collective schedule as a baseline file for "
                                                      "collwatch check (docs/ci-regression.md)");
  baseline->add_option("dir", baseline_options.dir, "trace folder of the reference run")->required();
  baseline->add_option("-o,--out", baseline_options.file, "baseline file to write (- for standard output)")->required();
  baseline->add_flag("--code-lines", baseline_options.code_lines,
                     "regions taken from Python call paths name their lines; check follows the baseline (left "
                     "out by default: edits move lines)");

  collwatch::CheckCommandOptions check_options;
  CLI::App* check = app.add_subcommand("check", "compare a run's collective schedule with a baseline (exit 0 "
                                                "same, 1 changed, 2 bad input)");
  check->add_option("--baseline", check_options.baseline_file, "baseline file (collwatch baseline)")->required();
  check->add_option("dir", check_options.dir, "trace folder of the run to check")->required();
  check->add_option("--junit", check_options.junit_file,
                    "also write a JUnit XML report here (with an error case when the input is bad)");
  check->add_flag("--json", check_options.json, "the result as JSON (docs/schema/check.schema.json)");
  check->add_flag("--ignore-regions", check_options.ignore_regions,
                  "compare op, count, dtype, reduce op and root only, not the NVTX regions");

  // `export [--format chrome] DIR -o FILE`; `--chrome DIR` and `DIR --chrome` are the
  // spellings of before (--chrome took the folder as its value).
  collwatch::ExportOptions export_options;
  std::string export_format = "chrome", export_chrome_dir;
  double export_since = 0, export_until = 0;
  int64_t export_time_base = 0;
  CLI::App* export_command = app.add_subcommand(
      "export", "a run's NCCL calls as a timeline for Perfetto or chrome://tracing, its findings marked");
  export_command->add_option("dir", export_options.dir, "trace folder: a collwatch run --out folder, a job folder, "
                                                        "rank traces or rings");
  export_command->add_option("--format", export_format, "chrome: Chrome trace-event JSON (the one format)")
      ->check(CLI::IsMember({"chrome"}));
  export_command->add_option("--chrome", export_chrome_dir, "--format chrome; the trace folder may follow it")
      ->expected(0, 1);
  export_command->add_option("-o,--out", export_options.file, "JSON file to write (- for standard output)");
  export_command->add_option("--job", export_options.job, "the job to export, where the folder holds several");
  export_command->add_flag("--absolute-time", export_options.absolute_time,
                           "ts in microseconds of CLOCK_REALTIME since the Unix epoch (each rank's host clock), to lay "
                           "the trace over a Kineto or Nsight Systems one");
  CLI::Option* export_base = export_command->add_option(
      "--time-base", export_time_base,
      "ts in microseconds since this CLOCK_REALTIME nanosecond: a Kineto trace's baseTimeNanoseconds, an Nsight "
      "Systems session's start (implies --absolute-time)");
  export_command->add_option("--ranks", export_options.ranks, "only the processes of these job ranks, e.g. 0,3-5");
  CLI::Option* export_since_option = export_command->add_option(
      "--since", export_since, "only the calls that overlap the window from this many seconds after the first call");
  CLI::Option* export_until_option =
      export_command->add_option("--until", export_until, "... up to this many seconds after it");
  export_command->add_option("--findings", export_options.findings_file,
                             "report.json whose findings to mark (default: DIR/report.json, else the analysis of DIR)");
  export_command->add_flag("--no-findings", export_options.no_findings, "mark no findings (and analyse nothing)");

  collwatch::ImportCommandOptions import_options;
  CLI::App* import = app.add_subcommand("import", "PyTorch Flight Recorder dumps of a hung job into a trace folder "
                                                  "for analyze, diff and export (docs/flight-recorder.md)");
  import->add_option("--flight-recorder", import_options.flight_recorder,
                     "dump files (PREFIX<rank>, pickle or JSON) or folders of them")
      ->required()
      ->expected(1, -1);
  import->add_option("--out", import_options.out_dir, "trace folder to create (must not exist, or be empty)")
      ->required();
  import->add_option("--job", import_options.job, "job name for the traces (default: flight-recorder)");

  // Every command's --help ends with its exit statuses (cli/exit_codes.h).
  for (CLI::App* command : app.get_subcommands({})) command->footer(collwatch::kAnalysisExitHelp);
  for (CLI::App* command : {dump, gc, env, export_command, import, baseline, stacks, top}) {
    command->footer(collwatch::kToolExitHelp);
  }
  collector->footer("Exit status: 0 stopped by a signal with every record stored, 1 records lost, 2 bad usage or "
                    "it could not start.");
  agent->footer("Exit status: 0 every ring shipped, 1 some were not (their records stay in the rings), 2 bad usage "
                "or it could not start.");
  run->footer(collwatch::kRunExitHelp);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help exits 0; a usage error is bad input: 2, and collwatch run's own failure for run.
    if (app.exit(e) == 0) return collwatch::kExitOk;
    return run->parsed() ? collwatch::kExitRunFailed : collwatch::kExitBadInput;
  }

  collwatch::SetQuietLog(quiet);

  // A command that writes to standard output ends here: a write that failed is an error.
  const auto finish = [](const char* command, int status) {
    return collwatch::FinishStandardOutput(command, status, std::cout, std::cerr);
  };
  if (dump->parsed()) {
    const auto format = dump_json ? collwatch::DumpFormat::kJsonLines : collwatch::DumpFormat::kText;
    const absl::Status status = collwatch::DumpTraces(dump_path, dump_job, format, std::cout, std::cerr);
    if (!status.ok()) {
      std::cerr << "collwatch dump: " << status.message() << "\n";
      return finish("dump", collwatch::kExitBadInput);
    }
    return finish("dump", collwatch::kExitOk);
  } else if (gc->parsed()) {
    return finish("gc", collwatch::RunGcCommand(gc_options, std::cout, std::cerr));
  } else if (env->parsed()) {
    if (env_markdown) {
      std::cout << collwatch::SettingsMarkdownTable();
    } else {
      collwatch::PrintSettings(std::cout);
    }
    return finish("env", collwatch::kExitOk);
  } else if (collector->parsed()) {
    if (const absl::Status read = collwatch::ReadSecretFiles({{token_file, &collector_options.token, SecretKind::kToken},
                                                              {tls_cert_file, &collector_options.tls_cert_pem},
                                                              {tls_key_file, &collector_options.tls_key_pem}});
        !read.ok()) {
      collwatch::LogLine(collwatch::LogLevel::kError, "collwatch collector") << read.message();
      return 2;
    }
    collector_options.analyze = !no_analyze;
    return collwatch::RunCollectorCommand(collector_options);
  } else if (agent->parsed()) {
    if (const absl::Status read = collwatch::ReadSecretFiles({{agent_token_file, &agent_options.token, SecretKind::kToken},
                                                              {agent_ca_file, &agent_options.tls_ca_pem}});
        !read.ok()) {
      collwatch::LogLine(collwatch::LogLevel::kError, "collwatch agent") << read.message();
      return 2;
    }
    agent_options.keep_rings =
        agent_options.keep_rings || std::string(collwatch::SettingValue(collwatch::Setting::kKeepRings)) == "1";
    return collwatch::RunAgentCommand(agent_options);
  } else if (analyze->parsed()) {
    return finish("analyze", collwatch::RunAnalyzeCommand(analyze_options, std::cout, std::cerr));
  } else if (run->parsed()) {
    if (const absl::Status read = collwatch::ReadSecretFiles({{run_token_file, &run_options.token, SecretKind::kToken},
                                                              {run_ca_file, &run_options.tls_ca_pem}});
        !read.ok()) {
      collwatch::LogLine(collwatch::LogLevel::kError, "collwatch run") << read.message();
      return collwatch::kExitRunFailed;
    }
    run_options.dashboard = !run_no_dashboard;
    run_options.token_file = run_token_file;
    run_options.tls_ca_file = run_ca_file;
    return collwatch::RunJobCommand(run_options);
  } else if (top->parsed()) {
    return top_options.top.once ? finish("top", collwatch::RunTopCommand(top_options, std::cout, std::cerr))
                                : collwatch::RunTopCommand(top_options, std::cout, std::cerr);
  } else if (stacks->parsed()) {
    return finish("stacks", collwatch::RunStacksCommand(stacks_options, std::cout, std::cerr));
  } else if (diff->parsed()) {
    return finish("diff", collwatch::RunDiffCommand(diff_options, std::cout, std::cerr));
  } else if (baseline->parsed()) {
    return finish("baseline", collwatch::RunBaselineCommand(baseline_options, std::cout, std::cerr));
  } else if (check->parsed()) {
    return finish("check", collwatch::RunCheckCommand(check_options, std::cout, std::cerr));
  } else if (import->parsed()) {
    return finish("import", collwatch::RunImportCommand(import_options, std::cout, std::cerr));
  } else if (export_command->parsed()) {
    if (!export_chrome_dir.empty()) {
      if (!export_options.dir.empty() && export_options.dir != export_chrome_dir) {
        std::cerr << "collwatch export: two trace folders given (" << export_options.dir << " and " << export_chrome_dir
                  << "); export one at a time\n";
        return collwatch::kExitBadInput;
      }
      export_options.dir = export_chrome_dir;
    }
    if (export_options.dir.empty()) {
      std::cerr << "collwatch export: which trace folder? collwatch export DIR -o FILE\n";
      return collwatch::kExitBadInput;
    }
    if (export_options.file.empty()) {
      std::cerr << "collwatch export: where to? -o FILE (- for standard output)\n";
      return collwatch::kExitBadInput;
    }
    if (export_base->count() > 0) export_options.time_base_ns = export_time_base;
    if (export_since_option->count() > 0) export_options.since_s = export_since;
    if (export_until_option->count() > 0) export_options.until_s = export_until;
    return finish("export", collwatch::RunExportCommand(export_options, std::cout, std::cerr));
  }
  return 0;
}
