// guide16's PCIe formula tables (Fig. 2b, Table 1, Appendix A), evaluated with the same
// per-transaction accounting (cost.h) that every prediction sums: the model's analytic basis
// as figures of their own.
#pragma once

#include <string>

#include "model/point.h"
#include "model/profile.h"

namespace rdmalab::model {

struct FormulaValue {
  std::string metric;      // the results-row field it fills: pcie_h2d_bytes or wqe_bytes
  double value = 0;
  std::string derivation;  // the formula with the profile's numbers, for people
};

// Point of mode pcie: `formula` transfer (x = size bytes by `method` dma|mmio), wqe_header
// (`wqe_type` rc_uc|ud|recv), or wqe_batch (`wqes` N WQEs of `wqe_size` D bytes by
// `method` mmio|doorbell). Only the CPU-to-device direction is counted, as the paper does.
FormulaValue EvaluateFormula(const Point& pt, const Profile& prof);

}  // namespace rdmalab::model
