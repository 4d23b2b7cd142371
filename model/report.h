// Output of predictions: the contract-3 JSON document (rdmalab-bench/1 shape, tagged as a
// prediction) and human-readable tables and per-operation breakdowns (`explain`).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "model/analytic.h"
#include "model/calibrate.h"
#include "model/formulas.h"
#include "model/point.h"
#include "model/profile.h"

namespace rdmalab::model {

inline constexpr const char* kToolVersion = "0.1.0";

// One results row (contract 1's fields + bottleneck, utilization, per-op PCIe/wire bytes).
nlohmann::json ResultRow(const Point& pt, const Prediction& p);
// The results row of a pcie-mode point: the formula's value under its metric name.
nlohmann::json FormulaRow(const Point& pt, const FormulaValue& f);
// The whole document for one point; `point_doc` is echoed as the config.
nlohmann::json PredictionDocument(const nlohmann::json& point_doc, const Point& pt, const Profile& prof,
                                  const std::vector<Prediction>& rows, const std::vector<Point>& row_points);

std::string FormatFormula(const Point& pt, const Profile& prof, const FormulaValue& f);
std::string FormatPrediction(const Point& pt, const Profile& prof, const Prediction& p);
// Per-op PCIe/wire breakdown and the resource table, like guide16's Figure 5/6 diagrams.
std::string Explain(const Point& pt, const Profile& prof, const Prediction& p);
// Each NIC mechanism's share (model/profile.h Mechanism): the point predicted with it switched
// off, and the one that costs the most at the rate-setting resource.
std::string MechanismShares(const Point& pt, const Profile& prof, const Prediction& p);
std::string FormatCalibration(const CalibrationResult& r);

}  // namespace rdmalab::model
