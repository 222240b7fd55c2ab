// Registers the launcher mode on tracerun's top-level CLI11 app (see trace/tools/commands.h):
// `tracerun [-o run.db] [--capture LIST] [--no-shapes] [--nproc-per-node N ...] -- PROGRAM ARGS`.
#pragma once

#include "commands.h"

namespace tracerun::tools {

Command addLaunchCommand(CLI::App& app);

}  // namespace tracerun::tools
