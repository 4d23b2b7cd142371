#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "benchmarks/bench/modes.h"
#include "benchmarks/bench/options.h"
#include "rdma/error.h"

namespace rdmalab::bench {
namespace {

Options Parse(std::vector<std::string> args) {
  std::vector<char*> argv{const_cast<char*>("rdmalab-bench")};
  for (auto& arg : args) argv.push_back(arg.data());
  return ParseCommandLine(BenchCommandLine(), static_cast<int>(argv.size()), argv.data());
}

TEST(BenchOptions, PerftestSpellingsAndUnderscoresAreOneFlag) {
  const Options a = Parse({"tput", "--tx-depth", "16", "--cq_mod=4", "-l", "8", "--post-list", "2", "-s", "64,128"});
  EXPECT_EQ(a.mode, "tput");
  EXPECT_EQ(a.tx_depth, 16);
  EXPECT_EQ(a.cq_mod, 4);
  EXPECT_EQ(a.post_list, 2);  // the last spelling wins
  EXPECT_EQ(a.sizes, (std::vector<std::uint32_t>{64, 128}));
  const Options b = Parse({"lat", "-x", "-1", "-d", "softnic1", "10.0.0.2"});
  EXPECT_EQ(b.gid_index, -1);
  EXPECT_EQ(b.server_host, "10.0.0.2");
  EXPECT_TRUE(Parse({"tput", "--validate=true"}).validate);
  EXPECT_FALSE(Parse({"tput", "--validate=false"}).validate);
  EXPECT_EQ(Parse({"tput", "--out_json=x.json"}).out_json_file, "x.json");
  EXPECT_TRUE(Parse({"tput", "--out_json"}).out_json);
}

TEST(BenchOptions, ErrorsNameTheValueAndTheChoices) {
  auto message = [](std::vector<std::string> args) {
    try {
      Options options = Parse(args);
      FindMode(options.mode).check(options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({"tput", "-c", "XRC"}), "bad value 'XRC' for --connection: valid values are RC, UC, UD");
  EXPECT_EQ(message({"tput", "-t", "0"}), "bad value '0' for --tx_depth: expected an integer in [1, 65536]");
  EXPECT_EQ(message({"tput", "--size"}), "flag --size needs a value (BYTES[,BYTES...])");
  EXPECT_EQ(message({"tput", "a", "b"}), "unexpected argument 'b': expected MODE [SERVER_HOST]");
  EXPECT_NE(message({"atomics", "--verb", "write"}).find("valid verbs are cas, faa"), std::string::npos);
  EXPECT_NE(message({"tput", "-a", "-s", "8"}).find("choose one"), std::string::npos);
}

TEST(BenchOptions, ConfigJsonHasEveryFlagAndSymmetricSubset) {
  const Options o = Parse({"tput", "-t", "32"});
  const auto config = ConfigJson(BenchCommandLine(), o);
  EXPECT_EQ(config.at("tx_depth"), 32);
  EXPECT_TRUE(config.contains("use_hugepages"));
  const auto symmetric = SymmetricConfigJson(BenchCommandLine(), o);
  EXPECT_TRUE(symmetric.contains("tx_depth"));
  EXPECT_FALSE(symmetric.contains("ib_dev"));  // each side names its own device
  EXPECT_FALSE(symmetric.contains("timeout"));
}

TEST(BenchOptions, HelpListsEveryFlagWithDefaults) {
  const std::string help = HelpText(BenchCommandLine());
  for (const char* flag : {"--ib-dev", "--tx-depth", "--cq-mod", "--post_list", "--inline_size", "--out_json",
                           "--rendezvous", "--validate", "--timeout", "--use_hugepages"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
  EXPECT_NE(help.find("[default 128]"), std::string::npos);
}

}  // namespace
}  // namespace rdmalab::bench
