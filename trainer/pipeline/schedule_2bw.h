// PipeDream-2BW in the trainer: the flags it cannot combine with, and the trainer's names for its
// action lists and fill formula (tracerun/schedule/two_bw.h, closed_form.h). The weight versions
// themselves live in weight_versions.h; running the list is trainer_2bw.cpp.
#pragma once

#include "config.h"
#include "pipeline/schedule.h"

#include <tracerun/schedule/two_bw.h>

#include <string>

namespace gpttrain {

using tracerun::schedule::buildTwoBwSchedule;
using tracerun::schedule::twoBwFillFraction;
using tracerun::schedule::twoBwShapeError;
using tracerun::schedule::twoBwTiedTag;

// The flags 2bw (and --delayed-update) cannot combine with, as one line; empty when fine.
std::string twoBwConfigError(const TrainConfig& config, int world);

}  // namespace gpttrain
