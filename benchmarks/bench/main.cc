// rdmalab-bench: the program core (rdma/program.h) over the mode table.
#include "benchmarks/bench/program.h"

int main(int argc, char** argv) { return rdmalab::RunProgram(rdmalab::bench::kProgram, argc, argv); }
