// The energy error of an iPEPS optimisation against the evaluation number as a small self-contained SVG (issue 37's
// `--plot FILE.svg`): a log-scale y axis of E − E_ref, one circle per accepted evaluation joined by a polyline,
// axes with decade ticks, a title. Written by hand (no dependency); each circle carries its values as data-
// attributes (data-evaluation, data-energy, data-error) so that tests and scripts can read the points back. Stage:
// example code (examples/).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace einstage::heisenberg {

struct PlotPoint {
  int evaluation = 0;
  double energy = 0;
};

/// The SVG document. `reference` is E_ref; errors at or below 1e-16 (or negative: below the reference) are drawn at
/// 1e-16 and keep their true value in data-error. `title` is escaped. An empty `points` gives axes and the title.
std::string energy_error_svg(const std::vector<PlotPoint>& points, double reference, std::string_view title);

}  // namespace einstage::heisenberg
