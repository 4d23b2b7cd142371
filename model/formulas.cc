#include "model/formulas.h"

namespace rdmalab::model {
namespace {

std::string N(uint64_t v) { return std::to_string(v); }

}  // namespace

FormulaValue EvaluateFormula(const Point& pt, const Profile& prof) {
  const PcieParams& p = prof.pcie;
  FormulaValue f;
  if (pt.formula == "transfer") {
    f.metric = "pcie_h2d_bytes";
    uint64_t x = static_cast<uint64_t>(pt.size_B);
    if (pt.method == "mmio") {
      f.value = static_cast<double>(Mmio(x, p).mmio_B);
      f.derivation = "ceil(" + N(x) + "/64) x (64 + Pr " + N(p.req_hdr_B) + ")";
    } else {
      f.value = static_cast<double>(DmaRead(x, p).dma_cpl_B);
      f.derivation = N(x) + " + ceil(" + N(x) + "/Crc " + N(p.rcb_B) + ") x Pc " + N(p.cpl_hdr_B);
    }
  } else if (pt.formula == "wqe_header") {
    f.metric = "wqe_bytes";
    f.value = pt.wqe_type == "ud" ? prof.wqe.ud_header_B : pt.wqe_type == "recv" ? prof.wqe.recv_B
                                                                                 : prof.wqe.rc_uc_header_B;
    f.derivation = "profile " + prof.name + " wqe." + (pt.wqe_type == "ud" ? "ud_header_B" : pt.wqe_type == "recv"
                                                                                        ? "recv_B"
                                                                                        : "rc_uc_header_B");
  } else {
    f.metric = "pcie_h2d_bytes";
    if (pt.method == "mmio") {
      f.value = static_cast<double>(CpuToNicBytesMmio(pt.wqes, pt.wqe_B, p));
      f.derivation = N(pt.wqes) + " x ceil(" + N(pt.wqe_B) + "/64) x (64 + Pr " + N(p.req_hdr_B) + ")";
    } else {
      f.value = static_cast<double>(CpuToNicBytesDoorbell(pt.wqes, pt.wqe_B, p));
      f.derivation = "(d 8 + Pr " + N(p.req_hdr_B) + ") + DMA completions of " + N(pt.wqes) + " x " +
                     N(PadToLine(pt.wqe_B)) + " B (Crc " + N(p.rcb_B) + ", Pc " + N(p.cpl_hdr_B) + ")";
    }
  }
  return f;
}

}  // namespace rdmalab::model
