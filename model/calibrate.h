// Calibration (README "Profiles"): fit the profile fields marked `fit`
// to the verb-level measurements of calibration.yaml, then compare every measurement with
// the fitted model's prediction. Deterministic: bisection from fixed brackets, fixed order.
#pragma once

#include <nlohmann/json.hpp>

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

// A measured calibration (`run_all.py calibrate`, README "Calibrating a measured NIC"): the
// document rdmalab-calibration-points/1 holds verb-level points measured on one backend, each
// a contract-3 point with its measured value (median of its repeats), the profile field it
// determines (or none: a check) and the stored point files it came from. The fit is the one
// the published rows use (Gauss-Seidel rounds of bisection per field).
struct MeasuredRow {
  std::string id, field, metric;  // metric: mops | lat_us
  double measured = 0, predicted = 0, error = 0, spread = 0;
  std::string bottleneck;
  std::vector<std::string> files;
  bool pass = false;
};
struct MeasuredFit {
  Profile profile;  // the extended profile with the fitted fields and the stated facts set
  std::vector<MeasuredRow> rows;
  std::vector<FitResult> fits;
  bool ok = true;
};
// The wall between fit and validation: a point of an application-level mode (key-value
// systems, sequencers, ECHO) is refused with a ModelError naming it; so is a point file
// outside the verb-level modes.
void RequireVerbLevel(const nlohmann::json& point, const std::string& id);
MeasuredFit FitMeasured(const nlohmann::json& doc, const std::string& profile_dir, double tolerance);

}  // namespace rdmalab::model
