#include "examples/ising/Sweep.h"

#include "ir/Error.h"
#include "ir/Quote.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace einstage::ising {
namespace {

// The user's text as messages echo it between single quotes (escaped, shortened: ir/Quote.h).
std::string shown(std::string_view text) { return escape_for_message(text, '\''); }

double parse_part(std::string_view text, std::string_view part, std::string_view whole) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
    fail(ErrorKind::invalid_argument, "--sweep '{}': {} '{}' is not a finite number", shown(whole), part, shown(text));
  return v;
}

// Panel geometry (SVG user units).
constexpr double kWidth = 760, kPanel = 300, kLeft = 80, kRight = 20, kTop = 40, kBottom = 45;

struct Axis {
  double lo, hi;
  double map(double v, double a, double b) const { return a + (v - lo) / (hi - lo) * (b - a); }
};

// About five round tick values inside [lo, hi].
std::vector<double> ticks(double lo, double hi) {
  const double raw = (hi - lo) / 5, mag = std::pow(10, std::floor(std::log10(raw)));
  const double step = raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag;
  std::vector<double> out;
  for (double t = std::ceil(lo / step) * step; t <= hi + 1e-9 * step; t += step) out.push_back(std::abs(t) < 1e-12 * step ? 0 : t);
  return out;
}

// One panel at vertical offset y0: frame, ticks, labels, the exact curve (clipped to the panel), the TRG points.
void panel(std::string& svg, double y0, const Axis& x, const std::vector<std::pair<double, double>>& exact,
           const std::vector<std::pair<double, double>>& trg, std::string_view ylabel, double beta_c) {
  double lo = trg.front().second, hi = lo;
  for (const auto& [b, v] : trg) lo = std::min(lo, v), hi = std::max(hi, v);
  for (const auto& [b, v] : exact)
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  // The exact c diverges at βc: cap the panel at twice the TRG points' range above their top.
  double trg_hi = trg.front().second, trg_lo = trg_hi;
  for (const auto& [b, v] : trg) trg_lo = std::min(trg_lo, v), trg_hi = std::max(trg_hi, v);
  hi = std::min(hi, trg_hi + 2 * std::max(trg_hi - trg_lo, 1e-3 * std::abs(trg_hi) + 1e-12));
  const double pad = (hi - lo) * 0.05 + 1e-12;
  const Axis y{lo - pad, hi + pad};
  const double px0 = kLeft, px1 = kWidth - kRight, py0 = y0 + kTop, py1 = y0 + kPanel - kBottom;
  auto X = [&](double b) { return x.map(b, px0, px1); };
  auto Y = [&](double v) { return y.map(v, py1, py0); };
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", px0, py0,
                     px1 - px0, py1 - py0);
  for (double t : ticks(x.lo, x.hi))
    svg += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"black\"/>"
                       "<text x=\"{0:.2f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
                       X(t), py1, py1 + 5, py1 + 20, t);
  for (double t : ticks(y.lo, y.hi))
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1:.2f}\" x2=\"{2}\" y2=\"{1:.2f}\" stroke=\"black\"/>"
                       "<text x=\"{3}\" y=\"{1:.2f}\" text-anchor=\"end\" dominant-baseline=\"middle\">{4:g}</text>\n",
                       px0 - 5, Y(t), px0, px0 - 8, t);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">β</text>\n", (px0 + px1) / 2, py1 + 38);
  svg += fmt::format("<text x=\"20\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 20 {})\">{}</text>\n",
                     (py0 + py1) / 2, (py0 + py1) / 2, ylabel);
  if (beta_c > x.lo && beta_c < x.hi)
    svg += fmt::format("<line x1=\"{0:.2f}\" y1=\"{1}\" x2=\"{0:.2f}\" y2=\"{2}\" stroke=\"gray\" "
                       "stroke-dasharray=\"4 4\"/><text x=\"{0:.2f}\" y=\"{3}\" fill=\"gray\" text-anchor=\"middle\">"
                       "βc</text>\n", X(beta_c), py0, py1, py0 - 6);
  // The exact curve, split where it leaves the panel (so the divergence of c is drawn as going off the top).
  std::string path;
  for (const auto& [b, v] : exact) {
    if (!std::isfinite(v) || v > y.hi || v < y.lo) {
      if (!path.empty()) svg += fmt::format("<polyline fill=\"none\" stroke=\"#1f77b4\" points=\"{}\"/>\n", path);
      path.clear();
      continue;
    }
    path += fmt::format("{}{:.2f},{:.2f}", path.empty() ? "" : " ", X(b), Y(v));
  }
  if (!path.empty()) svg += fmt::format("<polyline fill=\"none\" stroke=\"#1f77b4\" points=\"{}\"/>\n", path);
  for (const auto& [b, v] : trg)
    svg += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3\" fill=\"none\" stroke=\"#d62728\"/>\n", X(b), Y(v));
}

}  // namespace

std::vector<double> parse_sweep(std::string_view text) {
  const size_t a = text.find(':'), b = a == std::string_view::npos ? a : text.find(':', a + 1);
  if (b == std::string_view::npos || text.find(':', b + 1) != std::string_view::npos)
    fail(ErrorKind::invalid_argument, "--sweep '{}': expected START:STOP:STEP, e.g. 0.40:0.50:0.002", shown(text));
  const double start = parse_part(text.substr(0, a), "START", text);
  const double stop = parse_part(text.substr(a + 1, b - a - 1), "STOP", text);
  const double step = parse_part(text.substr(b + 1), "STEP", text);
  if (start <= 0) fail(ErrorKind::invalid_argument, "--sweep '{}': START must be positive (it is an inverse temperature)", shown(text));
  if (stop < start) fail(ErrorKind::invalid_argument, "--sweep '{}': STOP is below START", shown(text));
  if (step <= 0) fail(ErrorKind::invalid_argument, "--sweep '{}': STEP must be positive", shown(text));
  const double count = std::round((stop - start) / step) + 1;
  if (count > 10001) fail(ErrorKind::invalid_argument, "--sweep '{}': {} points; at most 10001", shown(text), count);
  std::vector<double> betas;
  for (int64_t k = 0; k < static_cast<int64_t>(count); ++k) betas.push_back(start + static_cast<double>(k) * step);
  return betas;
}

std::string sweep_svg(std::span<const SweepPoint> points, int chi, int steps) {
  if (points.empty()) fail(ErrorKind::invalid_argument, "sweep_svg: no points to plot");
  double lo = points.front().beta, hi = points.back().beta;
  if (hi <= lo) lo -= 0.01, hi += 0.01;
  const Axis x{lo, hi};
  std::vector<std::pair<double, double>> u_exact, c_exact, u_trg, c_trg;
  for (int k = 0; k <= 600; ++k) {
    const double b = lo + (hi - lo) * k / 600;
    const OnsagerValues e = onsager(b);
    u_exact.push_back({b, e.energy});
    c_exact.push_back({b, e.specific_heat});
  }
  for (const SweepPoint& p : points) {
    u_trg.push_back({p.beta, p.trg.energy});
    c_trg.push_back({p.beta, p.trg.specific_heat});
  }
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">2D Ising model: TRG (χ = {3}, {4} steps, "
      "derivatives by AD, circles) and Onsager's exact solution (line)</text>\n",
      kWidth, 2 * kPanel, kWidth / 2, chi, steps);
  panel(svg, 0, x, u_exact, u_trg, "energy per site u", critical_beta());
  panel(svg, kPanel, x, c_exact, c_trg, "specific heat c", critical_beta());
  svg += "</svg>\n";
  return svg;
}

}  // namespace einstage::ising
