// The trainer's names for the pipeline schedules, which live in their own libtorch-free library
// (schedule/: tracerun/schedule/*.h, shared with trace/, dot/ and the viewer). gpttrain's code
// says ScheduleKind, PipelineShape, Action, buildSchedule ... in namespace gpttrain as before.
// Names only: no schedule code of its own (executing a list is pipeline_executor.h).
#pragma once

#include <tracerun/schedule/action.h>
#include <tracerun/schedule/action_lists.h>
#include <tracerun/schedule/chimera.h>
#include <tracerun/schedule/closed_form.h>
#include <tracerun/schedule/kind.h>
#include <tracerun/schedule/shape.h>
#include <tracerun/schedule/zb_h1.h>

namespace gpttrain {

using tracerun::schedule::Action;
using tracerun::schedule::ActionKind;
using tracerun::schedule::actionName;
using tracerun::schedule::buildChimeraForwardOnlySchedule;
using tracerun::schedule::buildChimeraSchedule;
using tracerun::schedule::buildForwardOnlySchedule;
using tracerun::schedule::buildSchedule;
using tracerun::schedule::chimeraChunk;
using tracerun::schedule::chimeraComputeOrder;
using tracerun::schedule::chimeraRank;
using tracerun::schedule::chimeraStage;
using tracerun::schedule::computeOrder;
using tracerun::schedule::idealBubbleFraction;
using tracerun::schedule::inFlightBound;
using tracerun::schedule::parseScheduleKind;
using tracerun::schedule::PipelineShape;
using tracerun::schedule::scheduleError;
using tracerun::schedule::ScheduleKind;
using tracerun::schedule::scheduleName;
using tracerun::schedule::warmUpForwards;
using tracerun::schedule::zbH1BubbleFraction;
using tracerun::schedule::zbH1ComputeOrder;

}  // namespace gpttrain
