// Calibration (README "Profiles"): fit the profile fields marked `fit`
// to the verb-level measurements of calibration.yaml, then compare every measurement with
// the fitted model's prediction. Deterministic: bisection from fixed brackets, fixed order.
#pragma once

#include <string>
#include <vector>

#include "model/profile.h"

namespace rdmalab::model {

struct CalibrationRow {
  std::string profile, what, source;
  std::string unit;          // mops, MBps, payload_B, cores, us, ns, check
  double published = 0;
  double predicted = 0;
  double error = 0;          // relative, (predicted - published) / published
  std::string published_bottleneck, predicted_bottleneck;
  bool fitted = false;       // a profile field was fitted to this row
  bool pass = false;
  std::string note;
};

struct FitResult {
  std::string profile, field, target;
  double stored = 0, fitted = 0;
};

struct CalibrationResult {
  std::vector<CalibrationRow> rows;
  std::vector<FitResult> fits;
  std::vector<std::string> unmapped;  // measurements the model has no configuration for
  bool ok = true;
};

std::string DefaultCalibrationPath();
// `tolerance`: allowed relative error (0.10 = +-10%).
CalibrationResult Calibrate(const std::string& calibration_path, const std::string& profile_dir, double tolerance);
// True when a paper's bottleneck name and the model's resource label mean the same thing.
bool SameBottleneck(const std::string& published, const std::string& label);

}  // namespace rdmalab::model
