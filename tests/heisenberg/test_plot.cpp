// The energy-error plot (examples/heisenberg/Plot.h): the SVG is well-formed XML (every element closed in order,
// attributes quoted, one root <svg>), holds one circle per point with the point's values in its data- attributes, in
// order, places lower errors lower on the log axis, and escapes the title.
#include "examples/heisenberg/Plot.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace einstage::heisenberg;

namespace {

// A strict check of the XML subset the plot writes: the declaration, elements with quoted attributes, text without
// '<' or bare '&'. Returns "" or what is wrong.
std::string xml_problem(const std::string& s) {
  std::vector<std::string> open;
  size_t i = 0, roots = 0;
  if (s.rfind("<?xml ", 0) == 0) i = s.find("?>") + 2;
  while (i < s.size()) {
    if (s[i] != '<') {
      if (s[i] == '&') {
        size_t semi = s.find(';', i);
        std::string ent = s.substr(i, semi == std::string::npos ? 0 : semi - i + 1);
        if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;") return "a bare '&' in text";
      }
      if (!std::isspace(static_cast<unsigned char>(s[i])) && open.empty()) return "text outside the root";
      ++i;
      continue;
    }
    size_t end = s.find('>', i);
    if (end == std::string::npos) return "an unterminated tag";
    std::string tag = s.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "an empty tag";
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return "a closing </" + tag.substr(1) + "> out of order";
      open.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    if (self_closing) tag.pop_back();
    size_t n = 0;
    while (n < tag.size() && (std::isalnum(static_cast<unsigned char>(tag[n])) || tag[n] == '-')) ++n;
    const std::string name = tag.substr(0, n);
    if (name.empty()) return "a tag without a name";
    // attributes: name="value" pairs
    size_t k = n;
    while (k < tag.size()) {
      while (k < tag.size() && std::isspace(static_cast<unsigned char>(tag[k]))) ++k;
      if (k >= tag.size()) break;
      size_t eq = tag.find('=', k);
      if (eq == std::string::npos || eq + 1 >= tag.size() || tag[eq + 1] != '"') return "an unquoted attribute in <" + name + ">";
      size_t close = tag.find('"', eq + 2);
      if (close == std::string::npos) return "an unterminated attribute in <" + name + ">";
      if (tag.substr(eq + 2, close - eq - 2).find('<') != std::string::npos) return "'<' in an attribute";
      k = close + 1;
    }
    if (open.empty() && ++roots > 1) return "more than one root";
    if (!self_closing) open.push_back(name);
  }
  return open.empty() ? "" : "<" + open.back() + "> not closed";
}

std::vector<double> attribute_values(const std::string& s, const std::string& attr) {
  std::vector<double> v;
  for (size_t p = s.find(attr + "=\""); p != std::string::npos; p = s.find(attr + "=\"", p + 1))
    v.push_back(std::stod(s.substr(p + attr.size() + 2)));
  return v;
}

}  // namespace

TEST_CASE("heisenberg plot: a well-formed SVG holding the points in order") {
  const double ref = -0.66023109348;
  std::vector<PlotPoint> points = {{1, -0.5}, {2, -0.6}, {4, -0.66}, {5, -0.6602310934}, {7, ref - 1e-13}};
  std::string svg = energy_error_svg(points, ref, "D = 2 & chi < 16 \"test\"");
  CHECK(xml_problem(svg) == "");
  CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\"") != std::string::npos);
  CHECK(svg.find("D = 2 &amp; chi &lt; 16 &quot;test&quot;") != std::string::npos);
  std::vector<double> ev = attribute_values(svg, "data-evaluation"), en = attribute_values(svg, "data-energy");
  std::vector<double> err = attribute_values(svg, "data-error"), cy = attribute_values(svg, " cy");
  REQUIRE(ev.size() == points.size());
  REQUIRE(en.size() == points.size());
  REQUIRE(cy.size() == points.size());
  for (size_t i = 0; i < points.size(); ++i) {
    CHECK(ev[i] == points[i].evaluation);
    CHECK(en[i] == points[i].energy);  // %.17g round-trips
    CHECK(err[i] == points[i].energy - ref);
    if (i > 0) CHECK(cy[i] > cy[i - 1]);  // smaller errors are drawn lower (SVG's y grows downwards)
  }
  // The one below the reference sits on the floor of the axis, with its true error kept.
  CHECK(err.back() < 0);
  CHECK(xml_problem(energy_error_svg({}, ref, "empty")) == "");
  CHECK(xml_problem("<svg><g></svg></g>") != "");  // the checker refuses what it should
}
