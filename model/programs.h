// The programs' own descriptions (rdmalab-describe/1), as `rdmalab-bench --describe` and
// `rdmalab-kv --describe` printed them when this build ran them (describe_programs.cmake).
// They are the model's one source of each program parameter's type, unit, range or choices,
// default and help, of each mode's and system's parameters: the model adds only its effect
// (params.cc), and says where it departs from a program (docs/architecture.md).
#pragma once

namespace rdmalab::model {

extern const char* const kBenchDescription;
extern const char* const kKvDescription;

}  // namespace rdmalab::model
