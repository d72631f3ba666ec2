// A temperature sweep of the Ising TRG example: the β grid of `--sweep START:STOP:STEP` and an SVG plot of the energy
// u and the specific heat c against β, TRG points over Onsager's exact curves (like Fig. 2 of Liao et al., PRX 9,
// 031041). Stage: example code (examples/); depends on Trg.h and Onsager.h only. The SVG is plain text written here
// (no plotting library): two panels, axes with ticks, the points as circles, the exact curves as polylines, the
// critical temperature as a dashed line.
#pragma once

#include "examples/ising/Onsager.h"
#include "examples/ising/Trg.h"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace einstage::ising {

/// Reads "START:STOP:STEP" (e.g. "0.40:0.50:0.002"): START > 0, STOP >= START, STEP > 0, all finite, at most 10001
/// points. Returns START + k STEP for k = 0 .. round((STOP - START) / STEP). Errors name the part that is wrong.
std::vector<double> parse_sweep(std::string_view text);

struct SweepPoint {
  double beta;
  TrgValues trg;
  OnsagerValues exact;
};

/// The plot as an SVG document: u (top) and c (bottom) against β over the sweep's range.
std::string sweep_svg(std::span<const SweepPoint> points, int chi, int steps);

}  // namespace einstage::ising
