// The plain einsum notation (docs/behaviour.md §1): every rule and every error of Notation.h, with the messages pinned.
#include "Naive.h"

#include "extensions/einsum/notation/Notation.h"

#include <doctest/doctest.h>

using namespace einstage;
using namespace einstage::einsum;
using notation_test::error_of;

namespace {
std::vector<Label> L(std::u32string_view s) {
  std::vector<Label> out;
  for (char32_t c : s) out.push_back(Label(c));
  return out;
}
}  // namespace

TEST_CASE("plain strings parse to code-point labels") {
  struct Row {
    const char* text;
    std::vector<std::vector<Label>> inputs;
    std::vector<Label> output;
    bool explicit_output;
  };
  const std::vector<Row> rows = {
      {"ij,jk->ik", {L(U"ij"), L(U"jk")}, L(U"ik"), true},
      {"ij,jk", {L(U"ij"), L(U"jk")}, L(U"ik"), false},              // implicit: labels seen once, sorted
      {"ba", {L(U"ba")}, L(U"ab"), false},                           // implicit output sorts by code point
      {"ii", {L(U"ii")}, {}, false},                                 // trace: i occurs twice
      {"ii->i", {L(U"ii")}, L(U"i"), true},                          // diagonal
      {"i->ii", {L(U"i")}, L(U"ii"), true},                          // embedding on a diagonal
      {"i,i,i->ii", {L(U"i"), L(U"i"), L(U"i")}, L(U"ii"), true},
      {"ij->", {L(U"ij")}, {}, true},                                // full sum
      {",ij->ij", {{}, L(U"ij")}, L(U"ij"), true},                   // scalar operand
      {"", {{}}, {}, false},
      {"->", {{}}, {}, true},
      {" ij , jk -> ik ", {L(U"ij"), L(U"jk")}, L(U"ik"), true},     // spaces are skipped
      {"Ab,bC->AC", {L(U"Ab"), L(U"bC")}, L(U"AC"), true},          // upper-case letters are plain labels here
      {"甲乙,乙丙->甲丙", {L(U"甲乙"), L(U"乙丙")}, L(U"甲丙"), true},
      {"αβ,βγ", {L(U"αβ"), L(U"βγ")}, L(U"αγ"), false},
      {"😀x,x😀->", {L(U"😀x"), L(U"x😀")}, {}, true},
      {"i1,1j->ij", {L(U"i1"), L(U"1j")}, L(U"ij"), true},          // digits are labels too
  };
  for (const Row& r : rows) {
    CAPTURE(r.text);
    Notation n = parse_notation(r.text);
    CHECK(n.inputs == r.inputs);
    CHECK(n.output == r.output);
    CHECK(n.explicit_output == r.explicit_output);
    CHECK_FALSE(n.nested);
    CHECK(n.order.empty());
    Subscripts s = parse_subscripts(r.text);
    CHECK(s.inputs == r.inputs);
    CHECK(s.output == r.output);
    CHECK(s.ellipsis.empty());
  }
}

TEST_CASE("parse errors point a caret at the offending character") {
  struct Row {
    const char* text;
    const char* message;
  };
  const std::vector<Row> rows = {
      {"ij,jk->ix",
       "einsum \"ij,jk->ix\": output label 'x' appears in no input term; add it to an input term or remove it from "
       "the output\n  ij,jk->ix\n          ^"},
      {"ij->i->j", "einsum \"ij->i->j\": a second '->'; the subscripts may have only one\n  ij->i->j\n       ^"},
      {"i...j...,jk->ik",
       "einsum \"i...j...,jk->ik\": '...' appears twice in one term; a term may have at most one\n"
       "  i...j...,jk->ik\n       ^"},
      {"ij,jk->...i...", "einsum \"ij,jk->...i...\": '...' appears twice in one term; a term may have at most one\n"
                         "  ij,jk->...i...\n             ^"},
      {"ij-jk", "einsum \"ij-jk\": '-' must be followed by '>' (the arrow '->')\n  ij-jk\n    ^"},
      {"ij>jk", "einsum \"ij>jk\": '>' without '-' before it (the arrow is '->')\n  ij>jk\n    ^"},
      {"i.j", "einsum \"i.j\": '.' is only valid as part of '...'\n  i.j\n   ^"},
      {"i..j", "einsum \"i..j\": '.' is only valid as part of '...'\n  i..j\n   ^"},
      {"ij,jk->i,k",
       "einsum \"ij,jk->i,k\": ',' in the output; the output is a single term (did you mean to put this before "
       "'->'?)\n  ij,jk->i,k\n          ^"},
      // Control characters and bytes that are not UTF-8 are echoed escaped, the caret under the escape.
      {"ij\tk", "einsum \"ij\\tk\": character U+0009 cannot be a label (control or white-space character)\n  "
                "ij\\tk\n    ^"},
      {"ij,\xff", "einsum \"ij,\\xff\": invalid UTF-8 at byte 3\n  ij,\\xff\n     ^"},
      {"甲乙,乙丙->甲丁",
       "einsum \"甲乙,乙丙->甲丁\": output label '丁' appears in no input term; add it to an input term or remove "
       "it from the output\n  甲乙,乙丙->甲丁\n               ^"},
      // nested-form errors
      {"(ij,jk),kl->(il)",
       "einsum \"(ij,jk),kl->(il)\": parentheses are not allowed in the output\n  (ij,jk),kl->(il)\n              ^"},
      {"(ij,jk,kl->il", "einsum \"(ij,jk,kl->il\": '(' is not closed before '->'; add ')'\n  (ij,jk,kl->il\n"
                        "  ^        ^"},
      {"(ij,jk", "einsum \"(ij,jk\": '(' is never closed; add ')'\n  (ij,jk\n  ^"},
      {"ij),jk", "einsum \"ij),jk\": ')' has no matching '('\n  ij),jk\n    ^"},
      {"ij,(),jk", "einsum \"ij,(),jk\": empty parentheses; put operands inside\n  ij,(),jk\n     ^^"},
      {"ij(jk)", "einsum \"ij(jk)\": '(' must start an operand; put ',' before it\n  ij(jk)\n    ^"},
      {"(ij)k,kl", "einsum \"(ij)k,kl\": a label follows ')'; separate operands with ',' or start the output with "
                   "'->'\n  (ij)k,kl\n      ^"},
      {"(ij)...,kl", "einsum \"(ij)...,kl\": '...' follows ')'; separate operands with ',' or start the output with "
                     "'->'\n  (ij)...,kl\n      ^"},
      {"(...ij,jk),kl->il",
       "einsum \"(...ij,jk),kl->il\": parentheses and '...' cannot be used together; write the ellipsis axes out "
       "as labels or drop the parentheses\n  (...ij,jk),kl->il\n  ^^"},
      {"(ij,jk),...kl",
       "einsum \"(ij,jk),...kl\": parentheses and '...' cannot be used together; write the ellipsis axes out as "
       "labels or drop the parentheses\n  (ij,jk),...kl\n  ^       ^"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.text);
    CHECK(error_of([&] { parse_notation(r.text); }) == r.message);
  }
  try {
    parse_notation("ij->i->j");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::parse);
  }
}

TEST_CASE("nested strings fix the order as ContractionTree steps") {
  struct Row {
    const char* text;
    std::vector<std::pair<int, int>> order;
  };
  const std::vector<Row> rows = {
      {"(ij,jk),kl->il", {{0, 1}, {3, 2}}},
      {"ij,(jk,kl)->il", {{1, 2}, {0, 3}}},
      {"((ab,bc),(cd,de)),ef->af", {{0, 1}, {2, 3}, {5, 6}, {7, 4}}},
      {"(ab,bc,cd),de->ae", {{0, 1}, {4, 2}, {5, 3}}},  // a group of three combines left to right
      {"(ab,bc),cd,de->ae", {{0, 1}, {4, 2}, {5, 3}}},  // so does the top level
      {"((ab,bc)),cd->ad", {{0, 1}, {3, 2}}},           // a group of one item is transparent
      {"(ab),bc->ac", {{0, 1}}},
      {"(ij)->ij", {}},
      {"(,ij),jk->ik", {{0, 1}, {3, 2}}},               // an empty term is a scalar operand
      {"(甲乙,乙丙),丙丁->甲丁", {{0, 1}, {3, 2}}},
  };
  for (const Row& r : rows) {
    CAPTURE(r.text);
    Notation n = parse_notation(r.text);
    CHECK(n.nested);
    CHECK(n.order == r.order);
  }
  Notation n = parse_notation("(ij,jk),kl->il");
  CHECK(n.inputs == std::vector<std::vector<Label>>{L(U"ij"), L(U"jk"), L(U"kl")});
  CHECK(n.output == L(U"il"));
  CHECK(parse_subscripts("(ij,jk),kl") == parse_subscripts("ij,jk,kl->il"));  // implicit output works nested too
}

TEST_CASE("round trip: parse -> print -> parse gives the same notation and subscripts") {
  const char* texts[] = {"ij,jk->ik",       "ij,jk",          "ii->i",        "i->ii",          ",ij->ij",
                         "",                "甲乙,乙丙->甲丙", "αβ,βγ",        "(ij,jk),kl->il", "ij,(jk,kl)->il",
                         "((ab,bc),(cd,de)),ef->af",          "(ab,bc,cd),de", "(ij)->ij",     "...ij,...jk->...ik",
                         "...ij,jk",        "i...->...",      "...->...",     " a b , b c ",    "😀x,x😀->",
                         "(ij),jk",         "(ij,jk)",        "((ij)),(jk)->ik"};
  for (const char* t : texts) {
    CAPTURE(t);
    Notation a = parse_notation(t);
    std::string printed = to_string(a);
    CAPTURE(printed);
    Notation b = parse_notation(printed);
    CHECK(b.inputs == a.inputs);
    CHECK(b.output == a.output);
    CHECK(b.order == a.order);
    CHECK(b.nested == a.nested);
    CHECK(to_string(b) == printed);
  }
  CHECK(to_string(parse_notation("甲乙,乙丙->甲丙")) == "甲乙,乙丙->甲丙");
  CHECK(to_string(parse_subscripts("甲乙,乙丙->甲丙")) == "甲乙,乙丙->甲丙");
  CHECK(to_string(parse_notation("ij,jk")) == "ij,jk->ik");
  CHECK(to_string(parse_notation("(ab,bc,cd),de")) == "((ab,bc),cd),de->ae");
  CHECK(to_string(parse_notation(" (ij , jk) , kl ")) == "(ij,jk),kl->il");
  CHECK(to_string(parse_notation("(ij),jk")) == "(ij,jk)->ik");  // one step keeps its parentheses (found by fuzzing)
  // Subscripts print back and re-parse to the same labels, ellipsis included.
  for (const char* t : {"ij,jk->ik", "i->ii", "甲乙,乙丙->甲丙", "ab,b->"}) {
    Subscripts s = parse_subscripts(t);
    CHECK(parse_subscripts(to_string(s)) == s);
  }
  Notation n = parse_notation("...ij,jk->...ik");
  const int64_t ranks[] = {4, 2};
  Subscripts s = expand(n, ranks);
  CHECK(to_string(s) == "...ij,jk->...ik");
  CHECK(expand(parse_notation(to_string(s)), ranks) == s);
}

TEST_CASE("label names: written characters, fresh labels and integers") {
  Subscripts s = make_subscripts({{0, 105}, {105, 0x7532}}, {0, 0x7532});
  CHECK(label_name(s, 105) == "i");
  CHECK(label_name(s, 0x7532) == "甲");
  CHECK(label_name(s, 0) == "#0");       // a control character cannot print as itself
  CHECK(label_name(s, ',') == "#44");    // nor can a reserved one
  CHECK(label_name(s, kFreshLabelTop) == "#2147483647");
  CHECK(to_string(s) == "#0i,i甲->#0甲");
}

TEST_CASE("integer labels are the same canonical form") {
  Subscripts s = make_subscripts({{0, 1}, {1, 2}}, {0, 2});
  CHECK(s.inputs == std::vector<std::vector<Label>>{{0, 1}, {1, 2}});
  CHECK(s.output == std::vector<Label>{0, 2});
  CHECK(make_subscripts({{'i', 'j'}, {'j', 'k'}}, {'i', 'k'}) == parse_subscripts("ij,jk->ik"));
  CHECK(make_subscripts({{5, 3}, {3, 7}}).output == std::vector<Label>{5, 7});  // implicit output
  CHECK(make_subscripts({{1}}, {1, 1}).output == std::vector<Label>{1, 1});
  CHECK(error_of([] { make_subscripts({{0, 1}, {1, 2}}, {0, 3}); }) ==
        "einsum integer subscripts: output label 3 (output axis 1) appears in no input; add it to an input or "
        "remove it from the output");
  CHECK(error_of([] { make_subscripts({{0, -4}}, {0}); }) ==
        "einsum integer subscripts: label -4 (operand 0, axis 1) is negative; integer labels must be >= 0");
}

TEST_CASE("ellipsis: right-aligned fresh labels, NumPy's implicit output") {
  const Label e0 = kFreshLabelTop, e1 = kFreshLabelTop - 1, e2 = kFreshLabelTop - 2;
  {
    Notation n = parse_notation("...ij,...jk->...ik");
    CHECK(n.has_ellipsis());
    const int64_t ranks[] = {5, 3};  // ... covers 3 axes of operand 0 and 1 of operand 1
    Subscripts s = expand(n, ranks);
    CHECK(s.ellipsis == std::vector<Label>{e0, e1, e2});
    CHECK(s.inputs[0] == std::vector<Label>{e0, e1, e2, 'i', 'j'});
    CHECK(s.inputs[1] == std::vector<Label>{e2, 'j', 'k'});  // right-aligned: the last ellipsis axis
    CHECK(s.output == std::vector<Label>{e0, e1, e2, 'i', 'k'});
    CHECK(label_name(s, e0) == "...[0]");
  }
  {
    Notation n = parse_notation("i...j,jk");  // implicit output: ellipsis axes first, then labels seen once
    CHECK(n.output == std::vector<Label>{kEllipsisMarker, 'i', 'k'});
    const int64_t ranks[] = {4, 2};
    Subscripts s = expand(n, ranks);
    CHECK(s.inputs[0] == std::vector<Label>{'i', e0, e1, 'j'});
    CHECK(s.output == std::vector<Label>{e0, e1, 'i', 'k'});
  }
  {
    const int64_t ranks[] = {2, 2};  // ... covering zero axes
    Subscripts s = expand(parse_notation("...ij,...jk->...ik"), ranks);
    CHECK(s.ellipsis.empty());
    CHECK(s == parse_subscripts("ij,jk->ik"));
  }
  {
    const int64_t ranks[] = {3};  // explicit output without ...: the ellipsis axes are summed (as NumPy)
    Subscripts s = expand(parse_notation("...i->i"), ranks);
    CHECK(s.inputs[0] == std::vector<Label>{e0, e1, 'i'});
    CHECK(s.output == std::vector<Label>{'i'});
  }
  CHECK(error_of([] {
          const int64_t ranks[] = {1, 2};
          expand(parse_notation("...ij,jk->ik"), ranks);
        }) == "einsum \"...ij,jk->ik\": operand 0 has rank 1 but its term \"...ij\" names 2 labels besides '...'; "
              "pass an operand of rank at least 2 or remove labels from the term\n  ...ij,jk->ik\n      ^");
  CHECK(error_of([] {
          to_subscripts(parse_notation("ij,...jk->ik"));
        }) == "einsum \"ij,...jk->ik\": '...' needs the operand ranks to expand; use expand() or bind_einsum() with the "
              "shapes\n  ij,...jk->ik\n     ^");
}

TEST_CASE("rank and operand-count errors") {
  const Shape a{2, 3}, b{3, 4}, c{3, 4, 5};
  CHECK(error_of([&] {
          std::vector<Shape> shapes{a, c};
          bind_einsum(parse_notation("ij,jk->ik"), shapes, false);
        }) == "einsum \"ij,jk->ik\": operand 1 has rank 3 but its term \"jk\" names 2 labels; pass an operand of rank "
              "2 or fix the term\n  ij,jk->ik\n     ^");
  CHECK(error_of([&] {
          std::vector<Shape> shapes{a, b};
          bind_einsum(parse_notation("ij,jkl->ik"), shapes, false);
        }) == "einsum \"ij,jkl->ik\": operand 1 has rank 2 but its term \"jkl\" names 3 labels; pass an operand of "
              "rank 3 or fix the term\n  ij,jkl->ik\n       ^");
  CHECK(error_of([&] {
          std::vector<Shape> shapes{a};
          bind_einsum(parse_notation("ij,jk->ik"), shapes, false);
        }) == "einsum \"ij,jk->ik\": 1 operands given but the subscripts have 2 input terms");
  // The same rule through the integer form (no source text: the subscripts are printed instead).
  CHECK(error_of([&] {
          std::vector<Shape> shapes{a, c};
          bind_einsum(make_subscripts({{0, 1}, {1, 2}}, {0, 2}), shapes, false);
        }) == "einsum \"#0#1,#1#2->#0#2\": operand 1 has rank 3 but its term \"#1#2\" names 2 labels; pass an "
              "operand of rank 2 or fix the term");
}

TEST_CASE("bind: extents per label and the length-1 broadcast rule") {
  {
    std::vector<Shape> shapes{{2, 3}, {3, 4}};
    BoundEinsum b = bind_einsum(parse_notation("ij,jk->ik"), shapes, false);
    CHECK(b.extents == std::map<Label, int64_t>{{'i', 2}, {'j', 3}, {'k', 4}});
    CHECK(b.output_shape == Shape{2, 4});
    CHECK_FALSE(b.broadcasts);
    CHECK(b.broadcast_axes == std::vector<std::vector<bool>>{{false, false}, {false, false}});
  }
  {
    std::vector<Shape> shapes{{3}};
    CHECK(bind_einsum(parse_notation("i->ii"), shapes, false).output_shape == Shape{3, 3});
  }
  // A named label with extents 1 vs 3 broadcasts only with permission.
  std::vector<Shape> shapes{{2, 1}, {3, 2}};
  CHECK(error_of([&] { bind_einsum(parse_notation("ij,jk->ik"), shapes, false); }) ==
        "einsum \"ij,jk->ik\": label 'j' has extent 1 in operand 0 (axis 1) but 3 in operand 1 (axis 0); a length-1 "
        "axis broadcasts only under '...' or when the caller allows broadcasting (allow_broadcast)\n  ij,jk->ik\n"
        "   ^ ^");
  {
    BoundEinsum b = bind_einsum(parse_notation("ij,jk->ik"), shapes, true);
    CHECK(b.extents.at('j') == 3);
    CHECK(b.broadcasts);
    CHECK(b.broadcast_axes == std::vector<std::vector<bool>>{{false, true}, {false, false}});
  }
  // The same rule for many operands: the error names the operand the larger extent came from.
  {
    std::vector<Shape> s3{{1}, {4}, {1}, {5}};
    CHECK(error_of([&] { bind_einsum(parse_notation("i,i,i,i->i"), s3, true); }) ==
          "einsum \"i,i,i,i->i\": label 'i' has extent 4 in operand 1 (axis 0) but 5 in operand 3 (axis 0); the "
          "extents of a label must agree (or one of them be 1 with broadcasting allowed)\n  i,i,i,i->i\n    ^   ^");
    std::vector<Shape> s4{{1}, {4}, {1}, {4}, {1}};
    BoundEinsum b = bind_einsum(parse_notation("i,i,i,i,i->i"), s4, true);
    CHECK(b.extents.at('i') == 4);
    CHECK(b.broadcast_axes == std::vector<std::vector<bool>>{{true}, {false}, {true}, {false}, {true}});
  }
  // Axes under ... broadcast without permission; named ones next to them still need it.
  {
    std::vector<Shape> s{{4, 2, 3}, {1, 3, 5}};
    BoundEinsum b = bind_einsum(parse_notation("...ij,...jk->...ik"), s, false);
    CHECK(b.output_shape == Shape{4, 2, 5});
    CHECK(b.broadcast_axes[1] == std::vector<bool>{true, false, false});
    std::vector<Shape> s2{{4, 2, 1}, {1, 3, 5}};
    CHECK(error_of([&] { bind_einsum(parse_notation("...ij,...jk->...ik"), s2, false); }) ==
          "einsum \"...ij,...jk->...ik\": label 'j' has extent 1 in operand 0 (axis 2) but 3 in operand 1 (axis 1); "
          "a length-1 axis broadcasts only under '...' or when the caller allows broadcasting (allow_broadcast)\n"
          "  ...ij,...jk->...ik\n      ^    ^");
  }
  // Ellipsis axes that differ and are not 1.
  {
    std::vector<Shape> s{{4, 2, 3}, {5, 3, 5}};
    CHECK(error_of([&] { bind_einsum(parse_notation("...ij,...jk->...ik"), s, true); }) ==
          "einsum \"...ij,...jk->...ik\": label '...[0]' has extent 4 in operand 0 (axis 0) but 5 in operand 1 (axis "
          "0); the extents of a label must agree (or one of them be 1 with broadcasting allowed)\n"
          "  ...ij,...jk->...ik\n  ^     ^");
  }
  // Extent 0 against 1 broadcasts to 0.
  {
    std::vector<Shape> s{{0, 2}, {1, 2}};
    BoundEinsum b = bind_einsum(parse_notation("...i,...i->..."), s, false);
    CHECK(b.output_shape == Shape{0});
  }
  // A label repeated in one operand needs equal extents, even with permission.
  {
    std::vector<Shape> s{{2, 3}};
    CHECK(error_of([&] { bind_einsum(parse_notation("ii->i"), s, true); }) ==
          "einsum \"ii->i\": label 'i' is repeated in operand 0 with extents 2 (axis 0) and 3 (axis 1); a repeated "
          "label takes a diagonal and needs equal extents\n  ii->i\n  ^^");
    std::vector<Shape> s1{{1, 3}};
    CHECK(error_of([&] { bind_einsum(parse_notation("ii->i"), s1, true); }).find("is repeated in operand 0") !=
          std::string::npos);
  }
  // Unicode labels are named as written; carets account for wide characters.
  {
    std::vector<Shape> s{{2, 3}, {4, 5}};
    CHECK(error_of([&] { bind_einsum(parse_notation("甲乙,乙丙->甲丙"), s, false); }) ==
          "einsum \"甲乙,乙丙->甲丙\": label '乙' has extent 3 in operand 0 (axis 1) but 4 in operand 1 (axis 0); the "
          "extents of a label must agree (or one of them be 1 with broadcasting allowed)\n  甲乙,乙丙->甲丙\n"
          "    ^  ^");
  }
  // The integer entry point applies the same rule.
  {
    Subscripts s = make_subscripts({{0, 1}, {1, 2}}, {0, 2});
    std::vector<Shape> sh{{2, 1}, {3, 2}};
    CHECK(error_of([&] { bind_einsum(s, sh, false); }) ==
          "einsum \"#0#1,#1#2->#0#2\": label '#1' has extent 1 in operand 0 (axis 1) but 3 in operand 1 (axis 0); a "
          "length-1 axis broadcasts only under '...' or when the caller allows broadcasting (allow_broadcast)");
    CHECK(bind_einsum(s, sh, true).extents.at(1) == 3);
  }
  // Subscripts assembled by hand (not through make_subscripts) are still checked when bound.
  {
    Subscripts raw;
    raw.inputs = {{'i'}};
    raw.output = {'j'};
    std::vector<Shape> s{{2}};
    CHECK(error_of([&] { bind_einsum(raw, s, false); }) ==
          "einsum \"i->j\": output label 'j' appears in no input; add it to an input or remove it from the output");
  }
  CHECK(error_of([&] {
          std::vector<Shape> s{{2, -1}};
          bind_einsum(parse_notation("ij->i"), s, false);
        }) == "einsum \"ij->i\": operand 0 has a negative extent -1 on axis 1\n  ij->i\n   ^");
}

TEST_CASE("broadcasting evaluated by the naive loop: 1 vs n") {
  // ...i,...i->...i with batch 1 vs 3: every batch row of b meets the single row of a.
  std::vector<Shape> shapes{{1, 2}, {3, 2}};
  BoundEinsum b = bind_einsum(parse_notation("...i,...i->...i"), shapes, false);
  std::vector<double> a{1, 2}, c{1, 2, 3, 4, 5, 6};  // column-major [3,2]: rows (1,4) (2,5) (3,6)
  std::vector<double> out = notation_test::naive_einsum(b, {a, c});
  CHECK(out == std::vector<double>{1, 2, 3, 8, 10, 12});
}

TEST_CASE("property: the ASCII fast path and the general parser agree on random strings") {
  // A leading space sends the same string through the general tokenizer; results (or the fact of an error) must
  // match, and every accepted string must survive print -> parse.
  const char alphabet[] = "abcijkAB1abcijk,,-";
  int accepted = 0;
  for (uint64_t seed = 1; seed <= 3000; ++seed) {
    notation_test::SplitMix64 rng{seed};
    std::string s;
    size_t len = rng.next() % 12;
    for (size_t i = 0; i < len; ++i) {
      char c = alphabet[rng.next() % (sizeof(alphabet) - 1)];
      s += c;
      if (c == '-' && rng.next() % 4 != 0) s += '>';  // mostly arrows, sometimes a lone '-'
    }
    CAPTURE(seed);
    CAPTURE(s);
    std::string fast_err, slow_err;
    Subscripts fast, slow;
    try {
      fast = parse_subscripts(s);
    } catch (const Error& e) {
      fast_err = e.what();
    }
    try {
      slow = parse_subscripts(" " + s);
    } catch (const Error& e) {
      slow_err = e.what();
    }
    CHECK(fast_err.empty() == slow_err.empty());
    if (!fast_err.empty()) continue;
    ++accepted;
    CHECK(fast == slow);
    CHECK(parse_subscripts(to_string(fast)) == fast);
    Notation n = parse_notation(s);
    CHECK(n.inputs == fast.inputs);
    CHECK(n.output == fast.output);
  }
  CHECK(accepted > 500);
}
