#pragma once
// Subcommand registry for the `deepinfer` CLI. Each tools/cli/cmd_<name>.cpp defines one
// command and registers it with a static CommandRegistration; main.cpp knows none of them.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace deepinfer::cli {

struct Command {
  std::string name;
  std::string description;
  // Adds the subcommand's options to `sub` and returns the action to run when it is chosen.
  // The action returns the process exit code.
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

std::vector<Command>& command_registry();

struct CommandRegistration {
  explicit CommandRegistration(Command command) { command_registry().push_back(std::move(command)); }
};

}  // namespace deepinfer::cli
