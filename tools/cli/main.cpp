// deepinfer: command-line entry point. Errors print as one line on stderr with a non-zero exit.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "cli/command.h"
#include "core/error.h"

namespace deepinfer::cli {
std::vector<Command>& command_registry() {
  static std::vector<Command> commands;
  return commands;
}
}  // namespace deepinfer::cli

int main(int argc, char** argv) {
  using namespace deepinfer::cli;
  CLI::App app{"deepinfer: inference engine for the DeepSeek-V4 model family"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "deepinfer 0.1.0");

  auto commands = command_registry();
  std::sort(commands.begin(), commands.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<CLI::App*, std::function<int()>> actions;
  for (auto& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    actions[sub] = command.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help / --version
    std::fprintf(stderr, "deepinfer: error: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    for (auto* sub : app.get_subcommands()) return actions.at(sub)();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deepinfer: error: %s\n", e.what());
    return 1;
  }
  return 1;
}
