// Application-level experiments the model predicts from verb costs (acceptance 3): each is a
// table of (label, point) rows evaluated on the paper's profile unless one is given.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "model/analytic.h"
#include "model/point.h"
#include "model/profile.h"

namespace rdmalab::model {

struct ExperimentRow {
  std::string label;
  std::string profile;
  Point point;
  Prediction prediction;
};

struct ExperimentTable {
  std::string id, title, note;
  std::vector<ExperimentRow> rows;
};

const std::vector<std::string>& ExperimentIds();
// `profile`: empty = the profile(s) of the paper's hardware.
ExperimentTable RunExperiment(const std::string& id, const std::string& profile, const std::string& profile_dir);
std::string FormatExperiment(const ExperimentTable& t);
nlohmann::json ExperimentJson(const ExperimentTable& t);

}  // namespace rdmalab::model
