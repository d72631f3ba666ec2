#include "runtime/jit/Jit.h"

#include <fmt/format.h>

#include "ir/Error.h"
#include "runtime/jit/JitLlvm.h"
#include "runtime/jit/LlvmProcess.h"

#include <llvm/Passes/PassBuilder.h>

#include <llvm/ADT/SmallVector.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/JITLink/EHFrameSupport.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/ExecutorProcessControl.h>
#include <llvm/ExecutionEngine/Orc/TaskDispatch.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/SubtargetFeature.h>
#include <llvm/TargetParser/Host.h>

#include <algorithm>
#include <mutex>

namespace einstage {

void throw_if_error(llvm::Error error, std::string_view what) {
  if (!error) return;
  std::string text = llvm::toString(std::move(error));
  fail(ErrorKind::runtime, "jit: {} failed: {}", what, text);
}

namespace {

void initialise_llvm_once() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] {
    ok = !llvm::InitializeNativeTarget() && !llvm::InitializeNativeTargetAsmPrinter() &&
         !llvm::InitializeNativeTargetAsmParser();
  });
  if (!ok) fail(ErrorKind::runtime, "jit: LLVM has no native target for this machine");
}

// The host's feature string in a stable order ("+name" / "-name" for every feature LLVM detects): the host's feature
// map iterates in hash order, and the string is a cache key.
std::string sorted_features(const llvm::SubtargetFeatures& host_features) {
  std::vector<std::string> features = host_features.getFeatures();
  std::sort(features.begin(), features.end());
  return fmt::format("{}", fmt::join(features, ","));
}

// The host's triple, CPU name and features (LLVM's JITTargetMachineBuilder::detectHost), read once per process: each
// read of the CPU name and features executes cpuid, which a virtual machine traps, and every Jit::create wants them.
const llvm::orc::JITTargetMachineBuilder& host_builder() {
  static const llvm::orc::JITTargetMachineBuilder builder =
      take_or_throw(llvm::orc::JITTargetMachineBuilder::detectHost(), "detecting the host CPU");
  return builder;
}

// The features a target machine was made with ("+name" for each enabled one, in the subtarget table's sorted order):
// the feature string of a named CPU, which LLVM derives from its own CPU table rather than from the host.
std::string enabled_features(const llvm::MCSubtargetInfo& sti) {
  std::vector<std::string> features;
  for (const llvm::SubtargetFeatureKV& kv : sti.getAllProcessorFeatures())
    if (sti.getFeatureBits().test(kv.Value)) features.push_back(fmt::format("+{}", kv.Key));
  return fmt::format("{}", fmt::join(features, ","));
}

// Refuses a CPU name LLVM does not know for `triple` (LLVM itself would only print a warning and use a generic CPU).
void check_cpu_name(const llvm::Triple& triple, const std::string& cpu) {
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple.str(), error);
  if (!target) fail(ErrorKind::runtime, "jit: LLVM has no target for '{}': {}", triple.str(), error);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple.str(), "", ""));
  if (!sti || !sti->isCPUStringValid(cpu))
    fail(ErrorKind::invalid_argument,
         "jit: LLVM {} does not know the CPU '{}' for {}; name one LLVM knows (e.g. 'haswell', 'znver3', "
         "'skylake-avx512'), or leave it empty for the host CPU",
         LLVM_VERSION_STRING, cpu, triple.str());
}

}  // namespace

std::unique_ptr<llvm::Module> Jit::Impl::new_module(llvm::LLVMContext& context, const std::string& name) {
  llvm::TargetMachine& tm = target_machine();
  auto module = std::make_unique<llvm::Module>(name, context);
  module->setTargetTriple(tm.getTargetTriple().str());
  module->setDataLayout(tm.createDataLayout());
  return module;
}

namespace {
thread_local int64_t t_codegens = 0;
thread_local int64_t t_target_machines = 0;
}  // namespace

int64_t Jit::codegens_on_this_thread() { return t_codegens; }
int64_t Jit::target_machines_on_this_thread() { return t_target_machines; }

namespace {

// A module the emitters built wrong is einstage's bug: checked before the optimiser (which may delete the evidence, as
// it deleted the unused argument of a direct kernel that its specialised callers did not pass) and before codegen.
void verify(llvm::Module& module, const char* when) {
  std::string verify_message;
  llvm::raw_string_ostream verify_stream(verify_message);
  if (llvm::verifyModule(module, &verify_stream))
    fail(ErrorKind::runtime, "jit: module '{}' is invalid {}: {}", module.getName().str(), when, verify_message);
}

// Verifies the module and runs the code generator into `out` as an object file or assembly text.
void emit(Jit::Impl& impl, llvm::Module& module, llvm::CodeGenFileType type, llvm::SmallVector<char, 0>& out) {
  LlvmProcess::Use use(LlvmProcess::UseKind::codegen);
  ++t_codegens;
  verify(module, "before code generation");
  llvm::raw_svector_ostream stream(out);
  llvm::TargetMachine& tm = impl.target_machine();
  std::lock_guard lock(impl.mutex);  // a TargetMachine is not safe to use from two threads at once
  llvm::legacy::PassManager passes;
  if (tm.addPassesToEmitFile(passes, stream, nullptr, type))
    fail(ErrorKind::runtime, "jit: the target machine for '{}' cannot emit {}", impl.host.cpu,
         type == llvm::CodeGenFileType::ObjectFile ? "object files" : "assembly");
  passes.run(module);
}

}  // namespace

std::vector<char> Jit::Impl::emit_object(llvm::Module& module) {
  llvm::SmallVector<char, 0> buffer;
  emit(*this, module, llvm::CodeGenFileType::ObjectFile, buffer);
  return std::vector<char>(buffer.begin(), buffer.end());
}

std::string Jit::Impl::emit_assembly(llvm::Module& module) {
  llvm::SmallVector<char, 0> buffer;
  emit(*this, module, llvm::CodeGenFileType::AssemblyFile, buffer);
  return std::string(buffer.begin(), buffer.end());
}

void Jit::Impl::optimise(llvm::Module& module) {
  LlvmProcess::Use use(LlvmProcess::UseKind::codegen);
  verify(module, "before optimisation");
  llvm::TargetMachine& tm = target_machine();
  std::lock_guard lock(mutex);  // the pipeline reads the target machine
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(&tm);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager passes = builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
  passes.run(module, mam);
}

llvm::TargetMachine& Jit::Impl::target_machine() {
  std::call_once(tm_once_, [this] {
    LlvmProcess::Use use(LlvmProcess::UseKind::target_machine);
    initialise_llvm_once();
    tm_ = take_or_throw(jtmb->createTargetMachine(), "creating the target machine");
    ++t_target_machines;
  });
  return *tm_;
}

Jit::Impl::~Impl() {
  if (session)
    if (llvm::Error error = session->endSession()) session->reportError(std::move(error));
}

Jit::Jit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Jit::~Jit() = default;

std::unique_ptr<Jit> Jit::create(const JitTarget& target) {
  LlvmProcess::Use use(LlvmProcess::UseKind::create);
  auto impl = std::make_unique<Impl>();
  llvm::orc::JITTargetMachineBuilder jtmb = host_builder();
  jtmb.setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  impl->host.llvm_version = LLVM_VERSION_STRING;
  impl->host.triple = jtmb.getTargetTriple().str();
  if (target.cpu.empty()) {
    impl->host.cpu = jtmb.getCPU();
    impl->host.features = sorted_features(jtmb.getFeatures());
    impl->host.has_avx512 = llvm::is_contained(jtmb.getFeatures().getFeatures(), "+avx512f");
    impl->jtmb = std::make_unique<llvm::orc::JITTargetMachineBuilder>(std::move(jtmb));
  } else {
    // A named CPU's features are LLVM's own table for it, which only its target machine knows: made now.
    initialise_llvm_once();
    check_cpu_name(jtmb.getTargetTriple(), target.cpu);
    jtmb.setCPU(target.cpu);
    jtmb.getFeatures() = llvm::SubtargetFeatures();  // the named CPU's own features, not the host's
    impl->host.cpu = jtmb.getCPU();
    impl->jtmb = std::make_unique<llvm::orc::JITTargetMachineBuilder>(std::move(jtmb));
    const llvm::MCSubtargetInfo& sti = *impl->target_machine().getMCSubtargetInfo();
    impl->host.features = enabled_features(sti);
    impl->host.has_avx512 = sti.checkFeatures("+avx512f");
  }
  // What LLJIT makes for an x86-64 ELF host, without what only compiling IR would need (a data layout, hence a
  // target machine, and its IR layers and platform): the session runs materialisation on the calling thread, JITLink
  // links the objects into memory from the process's allocator, EH frames are registered in process, and symbols an
  // object does not define are looked up in the process (the C library's memcpy and the like).
  auto control = take_or_throw(
      llvm::orc::SelfExecutorProcessControl::Create(nullptr, std::make_unique<llvm::orc::InPlaceTaskDispatcher>()),
      "creating the JIT's process control");
  impl->session = std::make_unique<llvm::orc::ExecutionSession>(std::move(control));
  impl->linker = std::make_unique<llvm::orc::ObjectLinkingLayer>(*impl->session);
  impl->linker->addPlugin(std::make_unique<llvm::orc::EHFrameRegistrationPlugin>(
      *impl->session, std::make_unique<llvm::jitlink::InProcessEHFrameRegistrar>()));
  impl->main = &impl->session->createBareJITDylib("main");
  impl->main->addGenerator(take_or_throw(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess('\0'),
                                         "opening the process's symbols"));
  return std::unique_ptr<Jit>(new Jit(std::move(impl)));
}

const JitHost& Jit::host() const { return impl_->host; }

namespace {

// The x86 instruction-set extensions LLVM's code generator may emit in user code (LLVM's feature names). Everything
// else in a feature string is a system feature, a tuning flag or an instruction no kernel reaches.
constexpr std::string_view kInstructionSets[] = {
    "sse",        "sse2",       "sse3",       "ssse3",     "sse4.1",    "sse4.2",          "sse4a",
    "popcnt",     "cmov",       "cx8",        "cx16",      "avx",       "avx2",            "fma",
    "fma4",       "xop",        "f16c",       "bmi",       "bmi2",      "lzcnt",           "movbe",
    "adx",        "aes",        "pclmul",     "vpclmulqdq", "vaes",     "gfni",            "sha",
    "prfchw",     "avxvnni",    "avx512f",    "avx512cd",  "avx512dq",  "avx512bw",        "avx512vl",
    "avx512ifma", "avx512vbmi", "avx512vbmi2", "avx512vnni", "avx512bitalg", "avx512vpopcntdq", "avx512bf16",
    "avx512fp16", "evex512"};

bool is_instruction_set(std::string_view feature) {
  return std::find(std::begin(kInstructionSets), std::end(kInstructionSets), feature) != std::end(kInstructionSets);
}

// Calls fn(sign, name) for each "+name" / "-name" entry of a comma-separated feature string.
template <typename Fn>
void for_each_feature(std::string_view features, Fn fn) {
  while (!features.empty()) {
    const size_t comma = features.find(',');
    const std::string_view f = features.substr(0, comma);
    if (f.size() > 1) fn(f[0], f.substr(1));
    features = comma == std::string_view::npos ? std::string_view() : features.substr(comma + 1);
  }
}

}  // namespace

bool can_run(const JitHost& code, const JitHost& host) {
  if (code.triple != host.triple) return false;
  std::vector<std::string_view> absent;
  for_each_feature(host.features, [&](char sign, std::string_view name) {
    if (sign == '-') absent.push_back(name);
  });
  bool runs = true;
  for_each_feature(code.features, [&](char sign, std::string_view name) {
    if (sign == '+' && is_instruction_set(name) && std::find(absent.begin(), absent.end(), name) != absent.end())
      runs = false;
  });
  return runs;
}

std::vector<char> Jit::compile_ir_text(std::string_view llvm_ir, std::string_view module_name) {
  LlvmProcess::Use use(LlvmProcess::UseKind::parse);
  llvm::LLVMContext context;
  llvm::SMDiagnostic diagnostic;
  auto buffer = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(llvm_ir.data(), llvm_ir.size()),
                                                 llvm::StringRef(module_name.data(), module_name.size()), false);
  std::unique_ptr<llvm::Module> module = llvm::parseIR(buffer->getMemBufferRef(), diagnostic, context);
  if (!module) {
    std::string message;
    llvm::raw_string_ostream out(message);
    diagnostic.print(std::string(module_name).c_str(), out, false);
    fail(ErrorKind::parse, "jit: cannot parse LLVM IR: {}", message);
  }
  module->setTargetTriple(impl_->target_machine().getTargetTriple().str());
  module->setDataLayout(impl_->target_machine().createDataLayout());
  return impl_->emit_object(*module);
}

void Jit::add_object(const std::vector<char>& object, std::string_view name) {
  LlvmProcess::Use use(LlvmProcess::UseKind::link);
  auto buffer = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()),
                                                     llvm::StringRef(name.data(), name.size()));
  std::lock_guard lock(impl_->mutex);
  throw_if_error(impl_->linker->add(*impl_->main, std::move(buffer)), "adding object '" + std::string(name) + "'");
}

void* Jit::lookup(std::string_view symbol) {
  LlvmProcess::Use use(LlvmProcess::UseKind::lookup);
  std::lock_guard lock(impl_->mutex);
  // ELF names carry no global prefix: the symbol is looked up as written.
  auto address = impl_->session->lookup(
      llvm::orc::makeJITDylibSearchOrder(impl_->main, llvm::orc::JITDylibLookupFlags::MatchAllSymbols),
      impl_->session->intern(llvm::StringRef(symbol.data(), symbol.size())));
  if (!address) throw_if_error(address.takeError(), "looking up symbol '" + std::string(symbol) + "'");
  return address->getAddress().toPtr<void*>();
}

void* Jit::compile_and_lookup(std::string_view llvm_ir, std::string_view symbol) {
  add_object(compile_ir_text(llvm_ir, symbol), symbol);
  return lookup(symbol);
}

}  // namespace einstage
