#include "examples/heisenberg/Plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace einstage::heisenberg {
namespace {

constexpr double kWidth = 640, kHeight = 400, kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;
constexpr double kFloor = 1e-16;

std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string energy_error_svg(const std::vector<PlotPoint>& points, double reference, std::string_view title) {
  // Decades spanned by the errors (at least one), evaluations from 1 to the last.
  double lo = 0, hi = 0;
  bool first = true;
  for (const PlotPoint& p : points) {
    const double e = std::log10(std::max(p.energy - reference, kFloor));
    lo = first ? e : std::min(lo, e);
    hi = first ? e : std::max(hi, e);
    first = false;
  }
  int dlo = int(std::floor(lo)), dhi = int(std::ceil(hi));
  if (dhi <= dlo) dhi = dlo + 1;
  int xmax = 1;
  for (const PlotPoint& p : points) xmax = std::max(xmax, p.evaluation);
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double ev) { return kLeft + pw * (xmax > 1 ? (ev - 1) / (xmax - 1) : 0.5); };
  auto py = [&](double err) {
    return kTop + ph * (1 - (std::log10(std::max(err, kFloor)) - dlo) / double(dhi - dlo));
  };

  std::string s = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{3}</text>\n",
      kWidth, kHeight, kWidth / 2, escaped(title));
  // Axes, decade ticks with grid lines, labels.
  s += fmt::format("<g stroke=\"black\" fill=\"none\"><line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>"
                   "<line x1=\"{0}\" y1=\"{2}\" x2=\"{3}\" y2=\"{2}\"/></g>\n",
                   kLeft, kTop, kTop + ph, kLeft + pw);
  const int step = std::max(1, (dhi - dlo) / 8);
  for (int d = dlo; d <= dhi; d += step) {
    const double y = py(std::pow(10.0, d));
    s += fmt::format("<line x1=\"{0}\" y1=\"{1:.2f}\" x2=\"{2}\" y2=\"{1:.2f}\" stroke=\"#dddddd\"/>"
                     "<text x=\"{3}\" y=\"{4:.2f}\" text-anchor=\"end\">1e{5}</text>\n",
                     kLeft, y, kLeft + pw, kLeft - 6, y + 4, d);
  }
  for (int k = 0; k <= 4; ++k) {
    const double ev = 1 + (xmax - 1) * k / 4.0;
    s += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">{}</text>\n", px(ev), kTop + ph + 18,
                     int(std::lround(ev)));
  }
  s += fmt::format("<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\">evaluation</text>\n", kLeft + pw / 2,
                   kHeight - 10);
  s += fmt::format("<text x=\"16\" y=\"{0:.2f}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0:.2f})\">"
                   "E - E_ref</text>\n", kTop + ph / 2);
  if (!points.empty()) {
    s += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"";
    for (const PlotPoint& p : points) s += fmt::format("{:.2f},{:.2f} ", px(p.evaluation), py(p.energy - reference));
    s += "\"/>\n<g fill=\"#1f77b4\">\n";
    for (const PlotPoint& p : points)
      s += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"2.5\" data-evaluation=\"{}\" data-energy=\"{:.17g}\" "
                       "data-error=\"{:.17g}\"/>\n",
                       px(p.evaluation), py(p.energy - reference), p.evaluation, p.energy, p.energy - reference);
    s += "</g>\n";
  }
  s += "</svg>\n";
  return s;
}

}  // namespace einstage::heisenberg
