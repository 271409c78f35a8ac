// `collwatch`: the one command-line tool. Parses flags (CLI11) and calls the libraries.
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "cli/ring_dump.h"

int main(int argc, char** argv) {
  CLI::App app{"collwatch: catches collective-ordering bugs and hangs in NCCL jobs"};
  app.require_subcommand(1);

  std::string dump_path;
  bool dump_json = false;
  CLI::App* dump = app.add_subcommand("dump", "print the records of a ring file, or of every "
                                              "ring file in a folder");
  dump->add_option("path", dump_path, "ring file or folder (e.g. /dev/shm/collwatch-$UID)")
      ->required();
  dump->add_flag("--json", dump_json, "JSON lines: one 'ring' object, then its 'record' objects");

  CLI11_PARSE(app, argc, argv);

  if (dump->parsed()) {
    const auto format = dump_json ? collwatch::DumpFormat::kJsonLines : collwatch::DumpFormat::kText;
    const absl::Status status = collwatch::DumpRings(dump_path, format, std::cout, std::cerr);
    if (!status.ok()) {
      std::cerr << "collwatch dump: " << status.message() << "\n";
      return 1;
    }
  }
  return 0;
}
