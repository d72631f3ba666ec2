// The sweep's β grid (parse_sweep: values and the errors naming the part) and its SVG plot (examples/ising/Sweep.h):
// well-formed by Python's XML parser, one circle per TRG value placed on the axes, the exact curves as polylines.
#include "examples/ising/Sweep.h"

#include "support/ErrorOf.h"
#include "support/TempDir.h"
#include "tests/Paths.h"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>

using namespace einstage;
using namespace einstage::ising;

TEST_CASE("parse_sweep: the grid and the errors naming the part") {
  const std::vector<double> b = parse_sweep("0.40:0.50:0.002");
  REQUIRE(b.size() == 51);
  CHECK(b.front() == 0.40);
  CHECK(std::abs(b.back() - 0.50) < 1e-15);
  CHECK(std::abs(b[25] - 0.45) < 1e-15);
  CHECK(parse_sweep("0.3:0.3:0.1") == std::vector<double>{0.3});
  CHECK(test::error_of([] { parse_sweep("0.4:0.5"); }) ==
        "--sweep '0.4:0.5': expected START:STOP:STEP, e.g. 0.40:0.50:0.002");
  CHECK(test::error_of([] { parse_sweep("0.4:0.5:0.1:2"); }) ==
        "--sweep '0.4:0.5:0.1:2': expected START:STOP:STEP, e.g. 0.40:0.50:0.002");
  CHECK(test::error_of([] { parse_sweep("x:0.5:0.1"); }) == "--sweep 'x:0.5:0.1': START 'x' is not a finite number");
  CHECK(test::error_of([] { parse_sweep("0.4:inf:0.1"); }) ==
        "--sweep '0.4:inf:0.1': STOP 'inf' is not a finite number");
  CHECK(test::error_of([] { parse_sweep("0.4:0.5:"); }) == "--sweep '0.4:0.5:': STEP '' is not a finite number");
  CHECK(test::error_of([] { parse_sweep("0:0.5:0.1"); }) ==
        "--sweep '0:0.5:0.1': START must be positive (it is an inverse temperature)");
  CHECK(test::error_of([] { parse_sweep("0.5:0.4:0.1"); }) == "--sweep '0.5:0.4:0.1': STOP is below START");
  CHECK(test::error_of([] { parse_sweep("0.4:0.5:-0.1"); }) == "--sweep '0.4:0.5:-0.1': STEP must be positive");
  CHECK(test::error_of([] { parse_sweep("0.1:10:0.0001"); }) == "--sweep '0.1:10:0.0001': 99001 points; at most 10001");
}

TEST_CASE("sweep_svg: well-formed, one circle per TRG value on the axes, the exact curves as polylines") {
  std::vector<SweepPoint> points;
  for (double b : parse_sweep("0.40:0.50:0.01")) {
    const OnsagerValues e = onsager(b);
    points.push_back({b, {e.lnz, e.energy * 1.001, std::min(e.specific_heat, 3.0)}, e});
  }
  const std::string svg = sweep_svg(points, 16, 20);
  CHECK(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(svg.ends_with("</svg>\n"));
  const std::regex circle("<circle cx=\"([0-9.]+)\" cy=\"([0-9.]+)\"");
  std::vector<double> cx;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), circle); it != std::sregex_iterator(); ++it)
    cx.push_back(std::stod((*it)[1]));
  REQUIRE(cx.size() == 2 * points.size());  // u and c panels
  CHECK(cx.front() == 80.0);                // the first β on the left edge of the frame
  CHECK(cx[points.size() - 1] == 740.0);    // the last on the right edge
  CHECK(std::is_sorted(cx.begin(), cx.begin() + static_cast<long>(points.size())));
  CHECK(svg.find("<polyline") != std::string::npos);
  CHECK(svg.find(">βc</text>") != std::string::npos);
  // Python's XML parser must accept it (the file a browser or an image viewer opens).
  test::TempDir dir;
  const std::string path = dir.file("sweep.svg");
  std::ofstream(path) << svg;
  const std::string command =
      fmt::format("{} -c \"import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
                  "sys.exit(0 if r.tag.endswith('svg') else 1)\" '{}'", EINSTAGE_PYTHON, path);
  CHECK(std::system(command.c_str()) == 0);
}
