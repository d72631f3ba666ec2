// The grouped dialect (docs/behaviour.md §2): the definitional loop oracle over a vocabulary
// of strings x empty / single / multi-axis group shapes, the frozen identifiability table (decided by hand), split
// invariance (bitwise), the error contract and the cache.
#include "Naive.h"

#include "extensions/einsum/notation/Grouped.h"

#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <thread>

using namespace einstage;
using namespace einstage::einsum;
using notation_test::error_of;

namespace {

// The frozen identifiability table, decided by hand before running the solver (the reasoning is in the comments):
// `confounded` is the list the underdetermined error must print ("" = fully determined by the string) and `supply`
// a set of lengths that completes it.
struct Entry {
  const char* text;
  const char* confounded;
  const char* supply;
};
const std::vector<Entry> kTable = {
    {"WCo,WCa->Cao", "W, C", "W"},                // rows W+C, W+C; C stands alone in the output, so no merge
    {"WKCa,Caib,WCi->WKCb", "", ""},              // rows W+K+C, C, W+C: rank 3
    {"WKCi,Cio->WKCo", "", ""},                   // W,K co-travel (run WK); rows WK+C, C
    {"Cio,WCo->WCi", "", ""},                     // rows C, W+C
    {"trs,rWCa,Caib,sWCi->tWCb", "", ""},         // rows 0, W+C, C, W+C
    {"Wab,Wbc->Wac", "", ""},
    {"Wab,Wbc->ac", "", ""},
    {"Wi->W", "", ""},
    {"Wi->i", "", ""},
    {"W->W", "", ""},
    {"W->", "", ""},
    {"WC->CW", "W, C", "W"},                      // the output reorders W and C: no merge, one row W+C
    {"WC->WC", "", ""},                           // run WC: only the total matters
    {"Wa,Ca->WC", "", ""},
    {"WC,C->W", "", ""},                          // rows W+C, C
    {"Ai,Bi->AB", "", ""},
    {"Ai,iB->AB", "", ""},
    {"ABi,Bi->A", "", ""},
    {"ABi,BCi->AC", "A, B, C", "A"},              // rows A+B, B+C: kernel (1,-1,1)
    {"AB,BC,CA->", "", ""},                       // rows A+B, B+C, C+A: determinant 2
    {"Aij,Ajk->Aik", "", ""},
    {"ij,jk->ik", "", ""},
    {"Xab,c->Xabc", "", ""},
    {"WKa,WKb->WKab", "", ""},                    // run WK
    {"WKa,Kb->Wab", "", ""},                      // rows W+K, K
    {"Ea,Fa,Ga->EFG", "", ""},
    {"Pi,Pj,Pk->Pijk", "", ""},
    {"Qi,Qi->Q", "", ""},
    {"aQ,Qb->ab", "", ""},
    {"aQb,bQc->aQc", "", ""},
    {"MN,NO,OM->MNO", "", ""},                    // rank 3
    {"Ai,Bj,ij->AB", "", ""},
    {"ABC,C->AB", "", ""},                        // run AB; rows AB+C, C
    {"ABC,B->AC", "A, C", "A"},                   // rows A+B+C, B: only A+C is fixed
    {"Tab,Tbc,Tcd->Tad", "", ""},
    {"Ua,Va,Wa->a", "", ""},
    {"Ra->aR", "", ""},
    {"ZYi,YZj->ij", "Z, Y", "Z"},                 // rows Z+Y twice
    {"Di,Dj,Dk,Dl->ijkl", "", ""},
    {"Hab,Hbc,Hca->H", "", ""},
    {"Lx,Mx,LMy->y", "", ""},                     // rows L, M, L+M
    {"SGi,SGj->Sij", "S, G", "S"},                // S is followed by i in the output: no merge
    {"ab->ba", "", ""},
    {"Ia,Jb->IJab", "", ""},
    {"JKl,l->JK", "", ""},                        // run JK
    {"WKCo,WKCa->Cao", "WK, C", "C"},             // run WK confounded with C
    {"AbC,CbA->AC", "A, C", "A"},
    {"ABCd,ABCe->ABCde", "", ""},                 // run ABC
    {"Aa,Bb,ABc->c", "", ""},
    {"Vi,Vj->ij", "", ""},
};

bool upper(char c) { return c >= 'A' && c <= 'Z'; }

// Operand shapes for given group lengths: group G's axis i has extent 2 + (G + i) % 2, lower-case x has 2 + x % 2.
struct Instance {
  GroupedNotation g;
  std::map<char, int64_t> len;
  std::map<char, std::vector<int64_t>> group_extents;
  std::vector<Shape> shapes;
  Shape out_shape;
};

Shape term_shape(const Instance& in, const std::string& term) {
  Shape s;
  for (char c : term) {
    if (upper(c))
      s.insert(s.end(), in.group_extents.at(c).begin(), in.group_extents.at(c).end());
    else
      s.push_back(2 + c % 2);
  }
  return s;
}

Instance make_instance(const std::string& text, const std::function<int64_t(char, size_t)>& length_of) {
  Instance in;
  in.g = parse_grouped(text);
  for (size_t i = 0; i < in.g.groups.size(); ++i) {
    char c = in.g.groups[i];
    in.len[c] = length_of(c, i);
    in.group_extents[c] = {};
    for (int64_t a = 0; a < in.len[c]; ++a) in.group_extents[c].push_back(2 + (c + a) % 2);
  }
  for (const auto& t : in.g.inputs) in.shapes.push_back(term_shape(in, t));
  in.out_shape = term_shape(in, in.g.output);
  return in;
}

// The definitional oracle: for every group index tuple, take each operand's slice (the lower-case axes only), run
// the lower-case contraction on the slices, and add the result into the output at that tuple.
std::vector<double> group_oracle(const Instance& in, const std::vector<std::vector<double>>& data) {
  const auto& g = in.g;
  std::vector<std::pair<char, int64_t>> gaxes;  // (group, axis) for every group axis, groups in order
  std::vector<int64_t> gext;
  for (char c : g.groups)
    for (int64_t a = 0; a < in.len.at(c); ++a) gaxes.emplace_back(c, a), gext.push_back(in.group_extents.at(c)[a]);
  std::string lowers;
  for (const auto& t : g.inputs)
    for (char c : t)
      if (!upper(c) && lowers.find(c) == std::string::npos) lowers += c;
  std::vector<double> out(size_t(notation_test::count(in.out_shape)), 0.0);
  auto gvalue = [&](const std::vector<int64_t>& tuple, char c, int64_t a) {
    for (size_t i = 0; i < gaxes.size(); ++i)
      if (gaxes[i] == std::make_pair(c, a)) return tuple[i];
    return int64_t(-1);
  };
  // Full index of a term given the group tuple and lower-case values.
  auto full_index = [&](const std::string& term, const std::vector<int64_t>& tuple, const std::map<char, int64_t>& lv) {
    std::vector<int64_t> idx;
    for (char c : term) {
      if (upper(c))
        for (int64_t a = 0; a < in.len.at(c); ++a) idx.push_back(gvalue(tuple, c, a));
      else
        idx.push_back(lv.at(c));
    }
    return idx;
  };
  for (int64_t e : gext)
    if (e == 0) return out;
  std::vector<int64_t> tuple(gaxes.size(), 0);
  while (true) {
    // Slices: operand k restricted to this tuple, as a function of its lower-case letters.
    std::vector<std::map<std::string, double>> slices(g.inputs.size());
    for (size_t k = 0; k < g.inputs.size(); ++k) {
      std::string lk;
      for (char c : g.inputs[k])
        if (!upper(c)) lk += c;
      std::map<char, int64_t> lv;
      for (char c : lk) lv[c] = 0;
      while (true) {
        std::string key;
        for (char c : lk) key += char('0' + lv[c]);
        slices[k][key] =
            data[k][size_t(notation_test::offset(in.shapes[k], full_index(g.inputs[k], tuple, lv)))];
        size_t i = 0;
        for (; i < lk.size(); ++i) {
          if (++lv[lk[i]] < 2 + lk[i] % 2) break;
          lv[lk[i]] = 0;
        }
        if (i == lk.size()) break;
      }
    }
    // The lower-case contraction on the slices.
    std::map<char, int64_t> lv;
    for (char c : lowers) lv[c] = 0;
    while (true) {
      double p = 1.0;
      for (size_t k = 0; k < g.inputs.size(); ++k) {
        std::string key;
        for (char c : g.inputs[k])
          if (!upper(c)) key += char('0' + lv[c]);
        p *= slices[k].at(key);
      }
      out[size_t(notation_test::offset(in.out_shape, full_index(g.output, tuple, lv)))] += p;
      size_t i = 0;
      for (; i < lowers.size(); ++i) {
        if (++lv[lowers[i]] < 2 + lowers[i] % 2) break;
        lv[lowers[i]] = 0;
      }
      if (i == lowers.size()) break;
    }
    size_t i = 0;
    for (; i < tuple.size(); ++i) {
      if (++tuple[i] < gext[i]) break;
      tuple[i] = 0;
    }
    if (i == tuple.size()) break;
  }
  return out;
}

std::vector<GroupLength> supplied(const Instance& in, const char* groups) {
  std::vector<GroupLength> out;
  for (const char* p = groups; *p; ++p) out.push_back({*p, in.len.at(*p)});
  return out;
}

std::vector<int64_t> ranks_of(const std::vector<Shape>& shapes) {
  std::vector<int64_t> r;
  for (const auto& s : shapes) r.push_back(int64_t(s.size()));
  return r;
}

}  // namespace

TEST_CASE("grouped vocabulary: definitional loop oracle over empty, single and multi-axis groups") {
  CHECK(kTable.size() >= 40);
  // Group lengths per configuration: all empty, all single, all two axes, and mixed 0/1/2 by group position.
  const std::vector<std::pair<const char*, std::function<int64_t(char, size_t)>>> configs = {
      {"empty", [](char, size_t) { return int64_t(0); }},
      {"single", [](char, size_t) { return int64_t(1); }},
      {"multi", [](char, size_t) { return int64_t(2); }},
      {"mixed", [](char, size_t i) { return int64_t(i % 3); }},
      {"mixed2", [](char, size_t i) { return int64_t(2 - i % 3); }},
  };
  int cases = 0;
  for (const Entry& e : kTable) {
    for (const auto& [name, length_of] : configs) {
      CAPTURE(e.text);
      CAPTURE(name);
      Instance in = make_instance(e.text, length_of);
      notation_test::SplitMix64 rng{uint64_t(cases) * 7919 + 1};
      std::vector<std::vector<double>> data;
      for (const Shape& s : in.shapes) {
        data.emplace_back();
        for (int64_t i = 0; i < notation_test::count(s); ++i) data.back().push_back(rng.small_int());
      }
      std::vector<GroupLength> lens = supplied(in, e.supply);
      BoundEinsum b = bind_grouped(e.text, in.shapes, lens, false);
      CHECK(b.output_shape == in.out_shape);
      CHECK(notation_test::naive_einsum(b, data) == group_oracle(in, data));
      ++cases;
    }
  }
  CHECK(cases >= 200);
}

TEST_CASE("grouped identifiability: the frozen table") {
  for (const Entry& e : kTable) {
    CAPTURE(e.text);
    Instance in = make_instance(e.text, [](char, size_t) { return int64_t(1); });
    std::vector<int64_t> ranks = ranks_of(in.shapes);
    std::string err = error_of([&] { expand_grouped(e.text, ranks); });
    if (*e.confounded == 0) {
      CHECK(err == "<no error>");
    } else {
      CHECK(err.find("underdetermined") != std::string::npos);
      CHECK(err.find(std::string("confounded groups ") + e.confounded + ";") != std::string::npos);
      std::vector<GroupLength> lens = supplied(in, e.supply);
      CHECK(error_of([&] { expand_grouped(e.text, ranks, lens); }) == "<no error>");
    }
    // The verdict does not depend on the shapes: the same with every group empty.
    Instance in0 = make_instance(e.text, [](char, size_t) { return int64_t(0); });
    std::vector<int64_t> ranks0 = ranks_of(in0.shapes);
    CHECK((error_of([&] { expand_grouped(e.text, ranks0); }) == "<no error>") == (*e.confounded == 0));
  }
}

TEST_CASE("grouped: co-travelling runs and the symbolic form") {
  struct Row {
    const char* text;
    std::vector<std::string> runs;
    const char* symbolic;
  };
  const std::vector<Row> rows = {
      {"WKCi,Cio->WKCo", {"WK", "C"}, "WCi,Cio->WCo"},
      {"WCo,WCa->Cao", {"W", "C"}, "WCo,WCa->Cao"},  // the output separates W and C
      {"ABCd,ABCe->ABCde", {"ABC"}, "Ad,Ae->Ade"},
      {"ABC,C->AB", {"AB", "C"}, "AC,C->A"},
      {"WKa,WKb->WKab", {"WK"}, "Wa,Wb->Wab"},
      {"ij,jk->ik", {}, "ij,jk->ik"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.text);
    GroupedNotation g = parse_grouped(r.text);
    CHECK(g.runs == r.runs);
    Subscripts want = parse_subscripts(r.symbolic);
    CHECK(g.symbolic == want);
  }
  GroupedNotation g = parse_grouped("WKCi,Cio->WKCo");
  CHECK(label_name(g.symbolic, 'W') == "WK");
  // The symbol -> expanded labels mapping: WK's axes (all of them, whatever the split), C's, and i, o themselves.
  const int64_t ranks[] = {5, 3};  // WK + C = 4, C = 1
  auto e = expand_grouped("WKCi,Cio->WKCo", ranks);
  const Label t = kFreshLabelTop;
  CHECK(e->symbol_labels.at('W') == std::vector<Label>{t, t - 1, t - 2});
  CHECK(e->symbol_labels.at('C') == std::vector<Label>{t - 3});
  CHECK(e->symbol_labels.at('i') == std::vector<Label>{'i'});
  CHECK(e->group_labels.at('W') == std::vector<Label>{t, t - 1, t - 2});
  CHECK(e->group_labels.at('K').empty());
  CHECK(e->group_labels.at('C') == std::vector<Label>{t - 3});
  CHECK(e->lengths == std::map<char, int64_t>{{'C', 1}, {'K', 0}, {'W', 3}});  // remainder on the first free member
  CHECK(e->expanded.inputs[0] == std::vector<Label>{t, t - 1, t - 2, t - 3, 'i'});
  CHECK(e->expanded.inputs[1] == std::vector<Label>{t - 3, 'i', 'o'});
  CHECK(e->expanded.output == std::vector<Label>{t, t - 1, t - 2, t - 3, 'o'});
  CHECK(to_string(e->expanded) == "W[0]W[1]W[2]C[0]i,C[0]io->W[0]W[1]W[2]C[0]o");
}

TEST_CASE("grouped expansion: first-appearance order, empty groups vanish (the reference's examples)") {
  const Label t = kFreshLabelTop;
  {
    const int64_t ranks[] = {4, 5};  // 'Cio,WCo->WCi' with |W| = |C| = 2 -> 'abio,cdabo->cdabi'
    auto e = expand_grouped("Cio,WCo->WCi", ranks, std::vector<GroupLength>{});
    CHECK(e->expanded.inputs[0] == std::vector<Label>{t, t - 1, 'i', 'o'});
    CHECK(e->expanded.inputs[1] == std::vector<Label>{t - 2, t - 3, t, t - 1, 'o'});
    CHECK(e->expanded.output == std::vector<Label>{t - 2, t - 3, t, t - 1, 'i'});
  }
  {
    // 'trs,rWCa,Caib,sWCi->tWCb' with |W| = 1, |C| = 0 -> 'trs,rca,aib,sci->tcb'
    const int64_t ranks[] = {3, 3, 3, 3};
    auto e = expand_grouped("trs,rWCa,Caib,sWCi->tWCb", ranks);
    CHECK(e->lengths == std::map<char, int64_t>{{'C', 0}, {'W', 1}});
    CHECK(to_string(e->expanded) == "trs,rW[0]a,aib,sW[0]i->tW[0]b");
  }
  {
    // No 52-letter ceiling: 26 groups of 3 axes each expand to 78 fresh labels.
    std::string term;
    for (char c = 'A'; c <= 'Z'; ++c) term += c;
    std::string text = term + "x," + term + "->x";
    std::vector<GroupLength> lens;
    for (char c = 'A'; c <= 'Y'; ++c) lens.push_back({c, 3});
    const int64_t ranks[] = {79, 78};
    auto e = expand_grouped(text, ranks, lens);
    CHECK(e->expanded.inputs[0].size() == 79);
    std::set<Label> distinct(e->expanded.inputs[0].begin(), e->expanded.inputs[0].end());
    CHECK(distinct.size() == 79);
  }
}

TEST_CASE("grouped split invariance: every split of a co-travelling run gives bitwise identical results") {
  // Runs: WK in "WKCi,Cio->WKCo", ABC in "ABCd,ABCe->ABCde", WK in "WKa,WKb->WKab", JK in "JKl,l->JK".
  struct Case {
    const char* text;
    std::string run;
    int64_t total;
  };
  for (const Case& c : std::vector<Case>{{"WKCi,Cio->WKCo", "WK", 3},
                                         {"ABCd,ABCe->ABCde", "ABC", 3},
                                         {"WKa,WKb->WKab", "WK", 3},
                                         {"JKl,l->JK", "JK", 4}}) {
    CAPTURE(c.text);
    // Reference instance: the whole total on the first member.
    Instance base = make_instance(c.text, [&](char g, size_t) {
      return g == c.run[0] ? c.total : (c.run.find(g) != std::string::npos ? 0 : 1);
    });
    notation_test::SplitMix64 rng{42};
    std::vector<std::vector<double>> data;
    for (const Shape& s : base.shapes) {
      data.emplace_back();
      for (int64_t i = 0; i < notation_test::count(s); ++i) data.back().push_back(rng.unit());
    }
    BoundEinsum b0 = bind_grouped(c.text, base.shapes);
    std::vector<double> r0 = notation_test::naive_einsum(b0, data);
    int splits = 0;
    // Every split of the total among the run's members, pinned through supplied lengths of all but the last.
    std::vector<int64_t> part(c.run.size(), 0);
    std::function<void(size_t, int64_t)> each = [&](size_t m, int64_t left) {
      if (m + 1 == c.run.size()) {
        part[m] = left;
        std::vector<GroupLength> lens;
        for (size_t i = 0; i + 1 < c.run.size(); ++i) lens.push_back({c.run[i], part[i]});
        BoundEinsum b = bind_grouped(c.text, base.shapes, lens);
        CHECK(b.subs == b0.subs);
        std::vector<double> r = notation_test::naive_einsum(b, data);
        REQUIRE(r.size() == r0.size());
        CHECK(std::memcmp(r.data(), r0.data(), r.size() * sizeof(double)) == 0);
        auto e = expand_grouped(c.text, ranks_of(base.shapes), lens);
        for (size_t i = 0; i < c.run.size(); ++i) CHECK(e->lengths.at(c.run[i]) == part[i]);
        ++splits;
        return;
      }
      for (int64_t v = 0; v <= left; ++v) {
        part[m] = v;
        each(m + 1, left - v);
      }
    };
    each(0, c.total);
    CHECK(splits >= 4);
  }
}

TEST_CASE("grouped parse errors") {
  struct Row {
    const char* text;
    const char* message;
  };
  const std::vector<Row> rows = {
      {"WCo,WCa", "grouped einsum \"WCo,WCa\": the output must be explicit; add '->' and the output term (empty for a "
                  "scalar)\n  WCo,WCa\n         ^"},
      {"Wa->W->a", "grouped einsum \"Wa->W->a\": a second '->'; grouped subscripts have exactly one\n  Wa->W->a\n"
                   "       ^"},
      {"W...a->a", "grouped einsum \"W...a->a\": '...' is not allowed in grouped subscripts; a group (upper-case "
                   "letter) already covers any number of axes\n  W...a->a\n   ^"},
      {"W1,1->W", "grouped einsum \"W1,1->W\": character '1' is not allowed; grouped subscripts use ASCII letters "
                  "only (upper-case = a group of axes, lower-case = one axis), ',' and '->'\n  W1,1->W\n   ^"},
      {"Wα->W", "grouped einsum \"Wα->W\": character 'α' is not allowed; grouped subscripts use ASCII letters only "
                "(upper-case = a group of axes, lower-case = one axis), ',' and '->'\n  Wα->W\n   ^"},
      {"(Wa,a)->W", "grouped einsum \"(Wa,a)->W\": character '(' is not allowed; grouped subscripts use ASCII "
                    "letters only (upper-case = a group of axes, lower-case = one axis), ',' and '->'\n"
                    "  (Wa,a)->W\n  ^"},
      {"Wa,,a->W", "grouped einsum \"Wa,,a->W\": input term 1 is empty; every operand needs at least one symbol (a "
                   "scalar operand is not supported in grouped subscripts)\n  Wa,,a->W\n     ^"},
      {"->", "grouped einsum \"->\": input term 0 is empty; every operand needs at least one symbol (a scalar "
             "operand is not supported in grouped subscripts)\n  ->\n  ^"},
      {"WaW->a", "grouped einsum \"WaW->a\": symbol 'W' is repeated in input term 0; a symbol may occur once per "
                 "term\n  WaW->a\n  ^ ^"},
      {"Wa->aa", "grouped einsum \"Wa->aa\": symbol 'a' is repeated in the output; a symbol may occur once per "
                 "term\n  Wa->aa\n      ^^"},
      {"Wa,Ca->WX", "grouped einsum \"Wa,Ca->WX\": output symbol 'X' appears in no input term\n  Wa,Ca->WX\n"
                    "          ^"},
      {"Wa,a->W,a", "grouped einsum \"Wa,a->W,a\": ',' in the output; the output is a single term\n  Wa,a->W,a\n"
                    "         ^"},
      {"W a , C a -> W X", "grouped einsum \"Wa,Ca->WX\": output symbol 'X' appears in no input term\n"
                           "  Wa,Ca->WX\n          ^"},  // errors show the stripped string
  };
  for (const Row& r : rows) {
    CAPTURE(r.text);
    CHECK(error_of([&] { parse_grouped(r.text); }) == r.message);
  }
}

TEST_CASE("grouped error contract: underdetermined, inconsistent, unknown group") {
  const int64_t r22[] = {3, 3};
  CHECK(error_of([&] { expand_grouped("WCo,WCa->Cao", r22); }) ==
        "grouped einsum \"WCo,WCa->Cao\": the group lengths are underdetermined: the operand ranks fix only sums of "
        "the confounded groups W, C; supply one of len_W, len_C (repeat with another if still underdetermined); "
        "this is decided from the subscripts alone, so every call with these subscripts needs it");
  // Supplying one completes it; the supplied value is honoured.
  auto e = expand_grouped("WCo,WCa->Cao", r22, std::vector<GroupLength>{{'C', 2}});
  CHECK(e->lengths == std::map<char, int64_t>{{'C', 2}, {'W', 0}});
  // A run listed as one confounded unit, with its free members as candidates.
  CHECK(error_of([&] { expand_grouped("WKCo,WKCa->Cao", r22); }) ==
        "grouped einsum \"WKCo,WKCa->Cao\": the group lengths are underdetermined: the operand ranks fix only sums "
        "of the confounded groups WK, C; supply one of len_W, len_K, len_C (repeat with another if still "
        "underdetermined); this is decided from the subscripts alone, so every call with these subscripts needs it");
  // Nullity 2: after one supplement the error names what is still free.
  const int64_t r3[] = {4, 4};
  CHECK(error_of([&] { expand_grouped("ABCi,CBAj->ij", r3, std::vector<GroupLength>{{'A', 1}}); }) ==
        "grouped einsum \"ABCi,CBAj->ij\": the group lengths are underdetermined: the operand ranks fix only sums of "
        "the confounded groups B, C; supply one of len_B, len_C (repeat with another if still underdetermined); this is decided from the subscripts alone, so "
        "every call with these subscripts needs it");
  CHECK(expand_grouped("ABCi,CBAj->ij", r3, std::vector<GroupLength>{{'A', 1}, {'B', 1}})->lengths.at('C') == 1);
  // A co-travelling run needs only its total: ABC always travels together here.
  CHECK(expand_grouped("ABCi,ABCj->ij", r3)->lengths == std::map<char, int64_t>{{'A', 3}, {'B', 0}, {'C', 0}});
  // Inconsistent: negative, fractional, contradictory rows, supplied value too large.
  const int64_t r11[] = {1, 1};
  CHECK(error_of([&] { expand_grouped("Xab,c->Xabc", r11); }) ==
        "grouped einsum \"Xab,c->Xabc\": operand ranks [1, 1] are inconsistent with the subscripts (group X would "
        "have length -1); check that the operands are passed in the order of the terms");
  const int64_t r111[] = {1, 1, 1};
  CHECK(error_of([&] { expand_grouped("AB,BC,CA->", r111); }) ==
        "grouped einsum \"AB,BC,CA->\": operand ranks [1, 1, 1] are inconsistent with the subscripts (group A would "
        "have length 1/2); check that the operands are passed in the order of the terms");
  const int64_t r23[] = {2, 3};
  CHECK(error_of([&] { expand_grouped("Wa,Wa->a", r23); }) ==
        "grouped einsum \"Wa,Wa->a\": operand ranks [2, 3] are inconsistent with the subscripts (no group lengths "
        "satisfy every term); check that the operands are passed in the order of the terms");
  CHECK(error_of([&] { expand_grouped("WCo,WCa->Cao", r22, std::vector<GroupLength>{{'W', 5}}); }) ==
        "grouped einsum \"WCo,WCa->Cao\": operand ranks [3, 3], len_W=5 are inconsistent with the subscripts (group "
        "C would have length -3); check that the operands are passed in the order of the terms");
  const int64_t r5[] = {5, 3};
  CHECK(error_of([&] { expand_grouped("WKCi,Cio->WKCo", r5, std::vector<GroupLength>{{'K', 4}}); }) ==
        "grouped einsum \"WKCi,Cio->WKCo\": operand ranks [5, 3], len_K=4 are inconsistent with the subscripts (group "
        "W would have length -1); check that the operands are passed in the order of the terms");
  CHECK(error_of([&] { expand_grouped("WKJCi,Cio->WKJCo", r5, std::vector<GroupLength>{{'K', 4}}); }) ==
        "grouped einsum \"WKJCi,Cio->WKJCo\": operand ranks [5, 3], len_K=4 are inconsistent with the subscripts (the "
        "run WKJ would need a negative length for its free groups); check that the operands are passed in the order "
        "of the terms");
  // Supplied lengths that name nothing.
  CHECK(error_of([&] { expand_grouped("WCo,WCa->Cao", r22, std::vector<GroupLength>{{'X', 1}}); }) ==
        "grouped einsum \"WCo,WCa->Cao\": len_X=1 was supplied but group X is not in the subscripts; remove it");
  CHECK(error_of([&] { expand_grouped("WCo,WCa->Cao", r22, std::vector<GroupLength>{{'o', 1}}); }) ==
        "grouped einsum \"WCo,WCa->Cao\": len_o names no group; groups are upper-case letters");
  CHECK(error_of([&] { expand_grouped("WCo,WCa->Cao", r22, std::vector<GroupLength>{{'W', -1}}); }) ==
        "grouped einsum \"WCo,WCa->Cao\": len_W=-1 is negative; a group has 0 or more axes");
  CHECK(error_of([&] {
          expand_grouped("WCo,WCa->Cao", r22, std::vector<GroupLength>{{'W', 1}, {'W', 1}});
        }) == "grouped einsum \"WCo,WCa->Cao\": len_W is supplied twice");
  const int64_t r1[] = {3};
  CHECK(error_of([&] { expand_grouped("WCo,WCa->Cao", r1); }) ==
        "grouped einsum \"WCo,WCa->Cao\": 1 operands given but the subscripts have 2 input terms");
  // Extents are checked per expanded axis: a transposed batch (2,3) vs (3,2) is caught.
  std::vector<Shape> shapes{{2, 3, 4}, {3, 2, 4}};
  CHECK(error_of([&] { bind_grouped("Wa,Wa->W", shapes); }) ==
        "einsum \"W[0]W[1]a,W[0]W[1]a->W[0]W[1]\": label 'W[0]' has extent 2 in operand 0 (axis 0) but 3 in operand 1 "
        "(axis 0); the extents of a label must agree (or one of them be 1 with broadcasting allowed)");
  // Group axes are named labels: length 1 broadcasts only with permission.
  std::vector<Shape> b1{{1, 4}, {3, 4}};
  CHECK(error_of([&] { bind_grouped("Wa,Wa->Wa", b1); }).find("broadcasts only under '...'") != std::string::npos);
  CHECK(bind_grouped("Wa,Wa->Wa", b1, {}, true).output_shape == Shape{3, 4});
  // Overflow in the solve is an error, not a wrap-around.
  const int64_t big[] = {0, INT64_MAX};
  CHECK(error_of([&] { expand_grouped("Aab,Aa->a", big); }) ==
        "grouped einsum \"Aab,Aa->a\": integer overflow while solving for the group lengths; the operand ranks or "
        "supplied lengths are too large");
}

TEST_CASE("grouped cache: warm calls hit, spellings share entries, threads agree") {
  GroupedCache cache;
  const int64_t ranks[] = {3, 4};
  auto a = cache.expand("Cio,WCo->WCi", ranks);
  auto b = cache.expand("Cio,WCo->WCi", ranks);
  CHECK(a.get() == b.get());
  auto c = cache.expand(" Cio , WCo -> WCi ", ranks);
  CHECK(c.get() == a.get());  // the stripped string shares the entry
  GroupedCacheStats s = cache.stats();
  CHECK(s.hits == 1);
  CHECK(s.misses == 2);
  CHECK(s.entries == 2);
  CHECK(a->expanded == expand_grouped("Cio,WCo->WCi", ranks)->expanded);  // the uncached answer
  // Two caches share nothing.
  GroupedCache other;
  CHECK(other.expand("Cio,WCo->WCi", ranks).get() != a.get());
  CHECK(other.stats().misses == 1);
  CHECK(cache.stats().misses == 2);
  CHECK(cache.stats().hits == 1);
  // Different ranks or lengths are different entries.
  const int64_t ranks2[] = {4, 6};
  CHECK(cache.expand("Cio,WCo->WCi", ranks2).get() != a.get());
  // The order of supplied lengths does not matter.
  const int64_t r3[] = {4, 4};
  auto x = cache.expand("ABCi,ABCj->ij", r3, std::vector<GroupLength>{{'A', 1}, {'B', 2}});
  auto y = cache.expand("ABCi,ABCj->ij", r3, std::vector<GroupLength>{{'B', 2}, {'A', 1}});
  CHECK(x.get() == y.get());
  // Errors are not cached.
  const int64_t bad[] = {1, 1};
  CHECK(error_of([&] { cache.expand("Xab,c->Xabc", bad); }) != "<no error>");
  CHECK(error_of([&] { cache.expand("Xab,c->Xabc", bad); }) != "<no error>");
  // Many threads, same answers.
  cache.clear();
  std::vector<std::thread> threads;
  std::vector<Subscripts> results(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const int64_t r[] = {3 + i % 3, 4 + i % 3};
        auto e = cache.expand("Cio,WCo->WCi", r);
        if (i == 199) results[size_t(t)] = e->expanded;
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& r : results) CHECK(r == results[0]);
}
