// `einstage.tropical.v1`: payload forms, the type rule, the executor (one strided loop nest per output element) and
// the module descriptor, in that order.
#include "extensions/tropical/Tropical.h"

#include "ir/Quote.h"
#include "ir/Size.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <map>

namespace tropical {

using namespace einstage;

namespace {
constexpr std::string_view kFamily = TropicalAttrs::kFamily;

std::string_view semiring_name(Semiring s) { return s == Semiring::max_plus ? "max_plus" : "min_plus"; }

Semiring parse_semiring(std::string_view text) {
  if (text == "max_plus") return Semiring::max_plus;
  if (text == "min_plus") return Semiring::min_plus;
  fail(ErrorKind::parse, "'{}' attribute 'semiring': expected \"max_plus\" or \"min_plus\", got {}", kFamily,
       quote_for_message(text));
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
}  // namespace

// ---- subscripts ----

std::string Spec::text() const {
  std::string s;
  for (size_t i = 0; i < inputs.size(); ++i) s += (i ? "," : "") + inputs[i];
  return s + "->" + output;
}

Spec parse_spec(std::string_view text) {
  auto arrow = text.find("->");
  if (arrow == std::string_view::npos)
    fail(ErrorKind::parse, "'{}' subscripts {}: expected an explicit output after '->' (e.g. \"ij,jk->ik\")",
         kFamily, text);
  Spec spec;
  std::string_view lhs = text.substr(0, arrow), rhs = text.substr(arrow + 2);
  size_t start = 0;
  for (;;) {
    size_t comma = lhs.find(',', start);
    spec.inputs.emplace_back(lhs.substr(start, comma == std::string_view::npos ? lhs.npos : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  spec.output = std::string(rhs);
  for (size_t k = 0; k < spec.inputs.size(); ++k)
    for (char c : spec.inputs[k])
      if (!is_letter(c))
        fail(ErrorKind::parse, "'{}' subscripts {}: operand {} has '{}'; labels are letters a-z, A-Z", kFamily,
             quote_for_message(text), k,
             escape_for_message(std::string_view(&c, 1), '\''));
  for (size_t i = 0; i < spec.output.size(); ++i) {
    char c = spec.output[i];
    if (!is_letter(c))
      fail(ErrorKind::parse, "'{}' subscripts {}: the output has '{}'; labels are letters a-z, A-Z", kFamily,
           quote_for_message(text),
           escape_for_message(std::string_view(&c, 1), '\''));
    if (spec.output.find(c) != i)
      fail(ErrorKind::parse, "'{}' subscripts {}: output label '{}' appears twice", kFamily, quote_for_message(text),
           escape_for_message(std::string_view(&c, 1), '\''));
    bool found = std::any_of(spec.inputs.begin(), spec.inputs.end(),
                             [&](const std::string& in) { return in.find(c) != std::string::npos; });
    if (!found)
      fail(ErrorKind::parse, "'{}' subscripts {}: output label '{}' is in no operand", kFamily, quote_for_message(text),
           escape_for_message(std::string_view(&c, 1), '\''));
  }
  return spec;
}

// ---- payload ----

std::string TropicalAttrs::to_text() const {
  return "semiring = " + format_string_literal(semiring_name(semiring)) +
         ", subscripts = " + format_string_literal(spec.text());
}
std::string TropicalAttrs::to_json() const {
  return nlohmann::json{{"semiring", semiring_name(semiring)}, {"subscripts", spec.text()}}.dump();
}

TropicalAttrs TropicalAttrs::parse_text(std::string_view text) {
  std::optional<std::string> semiring, subscripts;
  for (auto& [key, value] : split_attribute_text(text)) {
    auto s = parse_string_literal(value);
    if (!s) fail(ErrorKind::parse, "'{}' attribute '{}': expected a string literal, got {}", kFamily,
                 escape_for_message(key, '\''), quote_for_message(value));
    if (key == "semiring") semiring = *s;
    else if (key == "subscripts") subscripts = *s;
    else fail(ErrorKind::parse, "'{}': unknown attribute '{}'; expected semiring and subscripts", kFamily,
              escape_for_message(key, '\''));
  }
  if (!semiring || !subscripts)
    fail(ErrorKind::parse, "'{}' needs the attributes semiring and subscripts, got '{}'", kFamily,
         escape_for_message(text, '\''));
  return {parse_spec(*subscripts), parse_semiring(*semiring)};
}

TropicalAttrs TropicalAttrs::parse_json(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("semiring") || !j["semiring"].is_string() || !j.contains("subscripts") ||
      !j["subscripts"].is_string())
    fail(ErrorKind::parse, "'{}' payload must be {{\"semiring\": string, \"subscripts\": string}}, got {}", kFamily,
         quote_for_message(text));
  return {parse_spec(j["subscripts"].get<std::string>()), parse_semiring(j["semiring"].get<std::string>())};
}

namespace {

// ---- type rule: operand count, ranks, one dtype, equal extents per label ----

TensorType infer_type(const TropicalPayload& p, Types in, TypeContext& ctx) {
  const Spec& spec = p.spec;
  if (in.size() != spec.inputs.size())
    ctx.error(ErrorKind::invalid_argument, "subscripts \"{}\" name {} operands but {} were given", spec.text(),
              spec.inputs.size(), in.size());
  if (in[0].dtype != DType::f32 && in[0].dtype != DType::f64)
    ctx.error(ErrorKind::dtype, "operand 0 has type {}; the tropical semirings take f32 or f64", in[0].to_string());
  std::map<char, Dim> extent;
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k].dtype != in[0].dtype)
      ctx.error(ErrorKind::dtype, "operand {} has type {} but operand 0 has {}; operands must have one dtype", k,
                in[k].to_string(), in[0].to_string());
    if (in[k].rank() != static_cast<int>(spec.inputs[k].size()))
      ctx.error(ErrorKind::shape, "operand {} has type {} (rank {}) but its subscript \"{}\" names {} labels", k,
                in[k].to_string(), in[k].rank(), spec.inputs[k], spec.inputs[k].size());
    for (size_t a = 0; a < spec.inputs[k].size(); ++a) {
      char c = spec.inputs[k][a];
      auto it = extent.find(c);
      if (it == extent.end()) extent.emplace(c, in[k].dims[a]);
      else
        it->second = ctx.unify(it->second, in[k].dims[a],
                               [&] { return fmt::format("operand {} axis {} (label {})", k, a, c); });
    }
  }
  TensorType out{in[0].dtype, {}};
  for (char c : spec.output) out.dims.push_back(extent.at(c));
  return out;
}

// ---- executor ----

class PreparedTropical final : public PreparedOp {
 public:
  PreparedTropical(const TropicalPayload& payload, std::span<const TensorType> operands) : payload_(payload) {
    const Spec& spec = payload.spec;
    std::map<char, int64_t> extent;
    for (size_t k = 0; k < operands.size(); ++k)
      for (size_t a = 0; a < spec.inputs[k].size(); ++a) extent[spec.inputs[k][a]] = operands[k].dims[a].constant();
    for (char c : spec.output) {
      labels_.push_back(c);
      extents_.push_back(extent.at(c));
    }
    for (auto& [c, e] : extent)
      if (spec.output.find(c) == std::string::npos) {
        labels_.push_back(c);
        extents_.push_back(e);
      }
    dtype_ = operands[0].dtype;
  }

  Tensor run(std::span<const Tensor> operands, ExecutionContext& context) const override {
    ThreadPool* pool = &context.pool();
    const Spec& spec = payload_.spec;
    const size_t nout = spec.output.size(), nl = labels_.size();
    Shape out_shape(extents_.begin(), extents_.begin() + static_cast<std::ptrdiff_t>(nout));
    Tensor out = Tensor::empty(dtype_, out_shape);
    // stride[k][l]: operand k's element stride along label l (summed when k repeats l: its diagonal).
    std::vector<std::vector<int64_t>> stride(operands.size(), std::vector<int64_t>(nl, 0));
    for (size_t k = 0; k < operands.size(); ++k)
      for (size_t a = 0; a < spec.inputs[k].size(); ++a) {
        size_t l = static_cast<size_t>(std::find(labels_.begin(), labels_.end(), spec.inputs[k][a]) - labels_.begin());
        stride[k][l] += operands[k].strides()[a];
      }
    const int64_t inner = checked_product(std::span(extents_).subspan(nout), "the summed extents");
    auto body = [&](auto zero) {
      using T = decltype(zero);
      const bool is_max = payload_.semiring == Semiring::max_plus;
      const T identity = is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
      std::vector<const T*> base;
      for (const Tensor& t : operands) base.push_back(static_cast<const T*>(t.raw_data()));
      T* dst = static_cast<T*>(out.raw_data());
      // Each output element is independent and reduced in one fixed order: same bits at any thread count.
      parallel_for(pool, out.numel(), [&](int64_t begin, int64_t end) {
        std::vector<int64_t> idx(nl, 0);
        for (int64_t o = begin; o < end; ++o) {
          int64_t r = o;
          for (size_t l = 0; l < nout; ++l) {
            idx[l] = r % extents_[l];
            r /= extents_[l];
          }
          T acc = identity;
          for (int64_t s = 0; s < inner; ++s) {
            int64_t q = s;
            for (size_t l = nout; l < nl; ++l) {
              idx[l] = q % extents_[l];
              q /= extents_[l];
            }
            T sum = T(0);
            for (size_t k = 0; k < base.size(); ++k) {
              int64_t off = 0;
              for (size_t l = 0; l < nl; ++l) off += idx[l] * stride[k][l];
              sum += base[k][off];
            }
            acc = is_max ? std::max(acc, sum) : std::min(acc, sum);
          }
          dst[o] = acc;  // out is column-major: linear index o is the output multi-index above
        }
      }, 16);
    };
    if (dtype_ == DType::f32) body(float{});
    else body(double{});
    return out;
  }

  std::string describe() const override {
    std::string s = fmt::format("{} {} loop over labels", semiring_name(payload_.semiring), payload_.spec.text());
    for (size_t l = 0; l < labels_.size(); ++l) s += fmt::format(" {}={}", labels_[l], extents_[l]);
    return s;
  }

 private:
  TropicalPayload payload_;
  std::vector<char> labels_;     // output labels first (in output order), then the reduced ones
  std::vector<int64_t> extents_;
  DType dtype_ = DType::f64;
};

class TropicalExecutor final : public ExtensionExecutor {
 public:
  std::shared_ptr<const PreparedOp> prepare(const ExtensionPayload& payload, std::span<const TensorType> operands,
                                            std::span<const TensorType>, ExecutionContext&) const override {
    return std::make_shared<PreparedTropical>(static_cast<const TropicalPayload&>(payload), operands);
  }
};

// ---- registration and descriptor ----

void register_tropical(ModuleRegistrar& registrar) {
  registrar.semantics().register_family(make_semantics<TropicalPayload>(registrar.module_name(), infer_type));
  registrar.set_executor(kFamily, std::make_shared<TropicalExecutor>());
}

constexpr EinstageFamilyEntry kFamilies[] = {{"einstage.tropical.v1", &register_tropical}};
constexpr EinstageModuleDescriptor kDescriptor = {kModuleAbiVersion, kBuildId, "einstage.tropical", "1.0.0",
                                                  kFamilies, 1};

}  // namespace

const EinstageModuleDescriptor* module_descriptor() { return &kDescriptor; }

}  // namespace tropical
