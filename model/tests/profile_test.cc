// Profiles load strictly; bad input names the field and what is valid (acceptance 6).
#include <gtest/gtest.h>

#include "model/analytic.h"
#include "model/point.h"
#include "model/profile.h"

namespace rdmalab::model {
namespace {

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  }
  return "";
}

Profile FromText(const std::string& text) { return LoadProfileFromString(text, "test.yaml", DefaultProfileDir()); }

TEST(Profile, EveryBuiltInProfileLoadsAndEveryFieldItSetsHasASource) {
  std::vector<std::string> names = ListProfiles(DefaultProfileDir());
  for (const char* want : {"cx", "cx3-pcie2", "cx3", "cib", "cx5", "cx6"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  for (const auto& n : names) {
    Profile p = LoadProfile(n, DefaultProfileDir());
    EXPECT_FALSE(p.description.empty()) << n;
    EXPECT_GE(p.sources.size(), 40u) << n;
    for (const auto& [field, src] : p.sources) EXPECT_FALSE(src.empty()) << n << " " << field;
  }
}

TEST(Profile, UnknownFieldIsAnErrorListingTheValidOnes) {
  std::string e = ErrorOf([] { FromText("pcie:\n  lane_mbps: {value: 1, source: x}\n"); });
  EXPECT_NE(e.find("unknown profile field 'pcie.lane_mbps'"), std::string::npos) << e;
  EXPECT_NE(e.find("lane_MBps"), std::string::npos) << e;
  EXPECT_NE(e.find("test.yaml:2"), std::string::npos) << e;
  e = ErrorOf([] { FromText("nics:\n  pus: {value: 1, source: x}\n"); });
  EXPECT_NE(e.find("unknown profile field 'nics'"), std::string::npos) << e;
  EXPECT_NE(e.find("nic"), std::string::npos) << e;
}

TEST(Profile, ValueWithoutSourceOrOutOfRangeIsAnError) {
  EXPECT_NE(ErrorOf([] { FromText("nic:\n  pus: 4\n"); }).find("source"), std::string::npos);
  std::string e = ErrorOf([] { FromText("pcie:\n  lanes: {value: -4, source: x}\n"); });
  EXPECT_NE(e.find("'pcie.lanes' = -4 is out of range"), std::string::npos) << e;
  e = ErrorOf([] { FromText("link:\n  kind: {value: ethernet, source: x}\n"); });
  EXPECT_NE(e.find("valid: ib, roce_v1, roce_v2"), std::string::npos) << e;
  e = ErrorOf([] { FromText("extends: cx9\n"); });
  EXPECT_NE(e.find("unknown profile 'cx9'"), std::string::npos) << e;
}

TEST(Profile, ExtendsInheritsValuesAndSources) {
  Profile p = LoadProfile("cx3-pcie2", DefaultProfileDir());
  EXPECT_EQ(p.pcie.lanes, 8u);
  EXPECT_DOUBLE_EQ(p.pcie.lane_MBps, 500);
  EXPECT_EQ(p.wqe.ud_header_B, 68u);  // from cx3
  EXPECT_TRUE(p.roce.has_value());
  EXPECT_EQ(p.roce->kind, LinkKind::kRoceV1);
  EXPECT_EQ(p.fits.count("nic.send_ns"), 0u);  // cx3's fits are not cx3-pcie2's
}

Point PointOf(const nlohmann::json& params, const std::string& mode = "tput") {
  return PointFromJson({{"mode", mode}, {"params", params}});
}

TEST(Point, NegativeSizeIsAnErrorNamingTheField) {
  std::string e = ErrorOf([] { PointOf({{"size", -8}}); });
  EXPECT_NE(e.find("params.size = -8 is out of range (valid: 0.."), std::string::npos) << e;
}

TEST(Point, ReadOverUdIsImpossible) {
  std::string e = ErrorOf([] { PointOf({{"verb", "read"}, {"connection", "UD"}}); });
  EXPECT_NE(e.find("read over UD is impossible"), std::string::npos) << e;
  EXPECT_NE(e.find("valid connections for read: RC, DC"), std::string::npos) << e;
  e = ErrorOf([] { PointOf({{"verb", "faa"}, {"connection", "UC"}}, "atomics"); });
  EXPECT_NE(e.find("faa over UC is impossible"), std::string::npos) << e;
  e = ErrorOf([] { PointOf({{"verb", "write"}, {"connection", "UD"}}); });
  EXPECT_NE(e.find("valid connections for write: RC, UC, DC"), std::string::npos) << e;
}

TEST(Point, UnknownValuesAndParamsAreErrorsWithTheValidSet) {
  EXPECT_NE(ErrorOf([] { PointOf({{"verb", "rread"}}); }).find("valid: read, write"), std::string::npos);
  EXPECT_NE(ErrorOf([] { PointOf({{"szie", 8}}); }).find("unknown parameter 'szie'"), std::string::npos);
  EXPECT_NE(ErrorOf([] { PointFromJson({{"mode", "bw"}}); }).find("valid: lat, tput"), std::string::npos);
}

TEST(Point, InlineAboveTheProfileLimitIsAnError) {
  Profile cib = LoadProfile("cib", DefaultProfileDir());
  Point p = PointOf({{"verb", "write_inline"}, {"size", 512}});
  std::string e = ErrorOf([&] { Predict(p, cib); });
  EXPECT_NE(e.find("inline limit"), std::string::npos) << e;
  EXPECT_NE(e.find("0 .. 256 bytes"), std::string::npos) << e;
  Point sge = PointOf({{"verb", "send"}, {"sge", 64}});
  EXPECT_NE(ErrorOf([&] { Predict(sge, cib); }).find("params.sge = 64"), std::string::npos);
}

}  // namespace
}  // namespace rdmalab::model
