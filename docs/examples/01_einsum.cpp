// Guide story (a): run an einsum on concrete tensors. Quoted in docs/guide.md between the "[example]" markers.
#include "docs/examples/Check.h"
#include "extensions/einsum/exec/Einsum.h"
#include "ir/Error.h"

#include <string>
#include <vector>

using namespace einstage;
using example::check;
using example::check_close;

int main() {
  // [one-shot]
  // Row-major data for readability: a = [[1, 2, 3], [4, 5, 6]], b = [[7, 8], [9, 10], [11, 12]].
  Tensor a = Tensor::from_row_major<double>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::from_row_major<double>({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor c = einsum::einsum("ij,jk->ik", {a, b});   // f64[2,2]: [[58, 64], [139, 154]]
  // [one-shot]
  // Independent oracle: the definitional loop.
  std::vector<double> want(4, 0.0);  // column-major [2,2]
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 2; ++k)
      for (int64_t j = 0; j < 3; ++j) want[i + 2 * k] += a.at<double>({i, j}) * b.at<double>({j, k});
  check_close(c, want, "ij,jk->ik");
  check_close(c, {58, 139, 64, 154}, "ij,jk->ik literal");

  // [prepare]
  Tensor v = Tensor::from_col_major<double>({2}, {1, -1});
  std::vector<Tensor> operands = {a, b, v};
  std::vector<einsum::TensorMeta> metas;
  for (const Tensor& t : operands) metas.push_back(einsum::TensorMeta::of(t));
  einsum::EinsumPlan plan = einsum::EinsumPlan::prepare("ij,jk,k->i", metas);  // parse, bind, plan once
  Tensor r = plan.execute(operands);               // f64[2]: a·b·v = [-6, -15]
  fmt::print("{}\n", plan.to_string());            // the steps and the intermediate arena
  // [prepare]
  check_close(r, {58.0 - 64.0, 139.0 - 154.0}, "ij,jk,k->i");
  check(plan.output_shape() == Shape{2}, "plan output shape");
  check(plan.steps().size() == 2, "three operands contract in two steps");

  // [options]
  einsum::EinsumOptions options;
  options.plan = einsum::PlanSpec::parse("left_to_right");  // or "auto", "greedy", "optimal", "tree[(1,2),(0,3)]"
  options.threads = 1;                                        // the calling thread only (default: every CPU)
  Tensor r2 = einsum::einsum("ij,jk,k->i", {a, b, v}, options);
  Tensor r3 = einsum::einsum("ij,(jk,k)->i", {a, b, v});      // parentheses fix the order: b·v first

  Tensor row = Tensor::from_col_major<double>({1, 3}, {10, 20, 30});
  einsum::EinsumOptions broadcast;
  broadcast.allow_broadcast = true;                           // a length-1 'i' stretches to 2
  Tensor s = einsum::einsum("ij,ij->ij", {a, row}, broadcast); // [[10, 40, 90], [40, 100, 180]]
  std::string message;
  try {
    einsum::einsum("ij,ij->ij", {a, row});                    // without permission: an error naming label 'i'
  } catch (const Error& e) {
    message = e.what();
  }
  // [options]
  check_close(r2, {-6, -15}, "left_to_right");
  check_close(r3, {-6, -15}, "nested string");
  check_close(s, {10, 40, 40, 100, 90, 180}, "broadcast");
  check(message.find("'i'") != std::string::npos, "broadcast error names the label: " + message);
  fmt::print("without allow_broadcast: {}\n", message);

  // [grouped]
  // Upper-case letters are groups of axes; G's length (2) is solved from the ranks: x = a G, y = G b.
  std::vector<double> xs(2 * 2 * 3), ys(2 * 3 * 2);
  for (size_t n = 0; n < xs.size(); ++n) xs[n] = double(n + 1);
  for (size_t n = 0; n < ys.size(); ++n) ys[n] = double(n % 5) - 2;
  Tensor x = Tensor::from_col_major<double>({2, 2, 3}, xs);
  Tensor y = Tensor::from_col_major<double>({2, 3, 2}, ys);
  Tensor g = einsum::einsum_grouped("aG,Gb->ab", std::vector<Tensor>{x, y});  // the same as "ajk,jkb->ab"
  // [grouped]
  std::vector<double> gw(4, 0.0);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 2; ++k)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t l = 0; l < 3; ++l) gw[i + 2 * k] += x.at<double>({i, j, l}) * y.at<double>({j, l, k});
  check_close(g, gw, "grouped aG,Gb->ab");

  return example::result("01_einsum");
}
