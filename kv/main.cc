// rdmalab-kv: the program core (rdma/program.h) over the system table.
#include "kv/core/program.h"

int main(int argc, char** argv) { return rdmalab::RunProgram(rdmalab::kv::kProgram, argc, argv); }
