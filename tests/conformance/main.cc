// The conformance binary: GoogleTest, or one helper process (see process.h).
#include <gtest/gtest.h>

#include "process.h"

int main(int argc, char** argv) {
  if (std::optional<int> helper_exit = conformance::RunHelperIfRequested(argc, argv)) return *helper_exit;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
