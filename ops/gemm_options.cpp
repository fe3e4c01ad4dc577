// What steers gemm's router besides the call: the calling thread's options (bankops.options,
// _gemm_options) and the measured tables of plans per GPU (bankops.tune, _gemm_tuning); and the
// record of the calls a program makes, for the tuner to time (bankops.tune.record, _gemm_record).
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gemm_op.h"

namespace bankops {
namespace {

// The calling thread's options: gemm's, and the launcher's test hook.
struct ThreadOptions {
  GemmOptions gemm;
  bool refuse_tma = false;
};
thread_local ThreadOptions t_options;

// The options _gemm_options names: the switches, each a flag of ThreadOptions, and `plan`.
struct NamedOption {
  const char* name;
  bool ThreadOptions::*flag;
  bool GemmOptions::*gemm;
};
constexpr NamedOption kOptions[] = {
    {"wgmma", nullptr, &GemmOptions::wgmma},           {"repack", nullptr, &GemmOptions::repack},
    {"stream_k", nullptr, &GemmOptions::stream_k},     {"split_k", nullptr, &GemmOptions::split_k},
    {"persistent", nullptr, &GemmOptions::persistent}, {"prefetch", nullptr, &GemmOptions::prefetch},
    {"refuse_tma", &ThreadOptions::refuse_tma, nullptr},
};
bool& option_flag(ThreadOptions& t, const NamedOption& o) { return o.flag ? t.*o.flag : t.gemm.*o.gemm; }

std::string options_spec(ThreadOptions& t) {
  std::string s;
  for (const NamedOption& o : kOptions) s += std::string(o.name) + "=" + (option_flag(t, o) ? "1" : "0") + ",";
  return s + "plan=" + std::to_string(t.gemm.plan);
}

// Sets this thread's options from "name=value,..." (the switches 0 or 1, plan a plan's key or
// 0; the others keep their values) and returns them as they were, all of them, in that form.
std::string gemm_options_op(std::string_view spec) {
  ThreadOptions next = t_options;
  std::string names;
  for (const NamedOption& o : kOptions) names += std::string(o.name) + ", ";
  names += "plan";
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    const std::string name(item.substr(0, eq)), value(eq == std::string_view::npos ? "" : item.substr(eq + 1));
    if (name == "plan") {
      char* end = nullptr;
      const long long key = value.empty() ? -1 : std::strtoll(value.c_str(), &end, 10);
      TORCH_CHECK(key >= 0 && end != nullptr && *end == '\0', "_gemm_options: expected plan=<a plan's key, or 0>, got '",
                  std::string(item), "'");
      next.gemm.plan = key;
      continue;
    }
    const NamedOption* found = nullptr;
    for (const NamedOption& o : kOptions) found = name == o.name ? &o : found;
    TORCH_CHECK(found != nullptr, "_gemm_options: unknown option '", name, "'; expected one of: ", names);
    TORCH_CHECK(value == "0" || value == "1", "_gemm_options: expected ", name, "=0 or =1, got '", std::string(item),
                "'");
    option_flag(next, *found) = value == "1";
  }
  std::string previous = options_spec(t_options);
  t_options = next;
  return previous;
}

// The registered tables: replaced whole on each registration, so that a call's snapshot stays valid.
std::mutex g_tuned_mutex;
TunedTables g_tuned = std::make_shared<const std::vector<TunedTable>>();

// Registers (or, with no entries, drops) the table of a GPU (its name and SM count): entries
// holds 9 integers an entry, dtype (kernels/dtype.h's DType), layout (0 none, 1 pad, 2
// swizzle), a_km, b_kn, batch, m, n, k and the plan's key (gemm_plan_key).
void gemm_tuning_op(std::string_view gpu, int64_t num_sms, int64_t cc, std::string_view driver,
                    at::IntArrayRef entries, std::string_view source) {
  TORCH_CHECK(!gpu.empty(), "_gemm_tuning: expected gpu to name a device (its properties' name), got ''");
  TORCH_CHECK(num_sms >= 1 && num_sms <= 65536, "_gemm_tuning: num_sms must be in [1, 65536], got ", num_sms);
  TORCH_CHECK(entries.size() % 9 == 0, "_gemm_tuning: expected entries to hold 9 integers an entry, got ",
              entries.size());
  TunedTable t{std::string(gpu), static_cast<int>(num_sms), static_cast<int>(cc), std::string(driver),
               std::string(source), {}};
  for (size_t i = 0; i < entries.size(); i += 9) {
    const int64_t* e = entries.data() + i;
    TORCH_CHECK(e[0] == int64_t(DType::F16) || e[0] == int64_t(DType::BF16) || e[0] == int64_t(DType::F32) ||
                    e[0] == int64_t(DType::F64),
                "_gemm_tuning: entry ", i / 9, " has dtype code ", e[0], "; expected one of gemm's");
    TORCH_CHECK(e[1] >= 0 && e[1] <= 2, "_gemm_tuning: entry ", i / 9, " has layout code ", e[1],
                "; expected 0 (none), 1 (pad) or 2 (swizzle)");
    TORCH_CHECK(e[4] >= 1 && e[5] >= 1 && e[6] >= 1 && e[7] >= 1 && e[8] >= 0, "_gemm_tuning: entry ", i / 9,
                " needs batch, m, n, k >= 1 and a plan key >= 0 (0: the model's plan), got ", at::IntArrayRef(e + 4, 5));
    t.entries.push_back(TunedEntry{DType(e[0]), Layout(e[1]), e[2] != 0, e[3] != 0, std::log2(double(e[4])),
                                   std::log2(double(e[5])), std::log2(double(e[6])), std::log2(double(e[7])), e[8]});
  }
  const std::lock_guard<std::mutex> lock(g_tuned_mutex);
  std::vector<TunedTable> next;
  for (const TunedTable& old : *g_tuned)
    if (old.gpu != t.gpu || old.num_sms != t.num_sms) next.push_back(old);
  if (!t.entries.empty()) next.push_back(std::move(t));
  g_tuned = std::make_shared<const std::vector<TunedTable>>(std::move(next));
}

// The calls recorded since _gemm_record(1), every thread's (autograd's backward runs on threads
// of its own): each distinct call (dtype, layout, majors, batch, m, n, k) once, in the order first
// made, with how often it ran.
using RecordedCall = std::array<int64_t, 8>;
struct Recorder {
  std::atomic<bool> on{false};
  std::mutex mutex;
  std::map<RecordedCall, size_t> index;
  std::vector<std::pair<RecordedCall, int64_t>> calls;
};
Recorder& recorder() {
  static Recorder r;
  return r;
}

// on = 1 starts recording afresh (an error while recording: records do not nest) and returns
// nothing; on = 0 stops and returns the calls, 9 integers each: dtype, layout, a_km, b_kn, batch,
// m, n, k (_gemm_tuning's codes and order) and the count.
std::vector<int64_t> gemm_record_op(int64_t on) {
  TORCH_CHECK(on == 0 || on == 1, "_gemm_record: expected on to be 0 or 1, got ", on);
  Recorder& r = recorder();
  const std::lock_guard<std::mutex> lock(r.mutex);
  TORCH_CHECK(!(on && r.on.load()), "_gemm_record: already recording (bankops.tune.record() does not nest)");
  std::vector<int64_t> out;
  if (on) {
    r.index.clear();
    r.calls.clear();
  } else {
    for (const auto& [call, count] : r.calls) {
      out.insert(out.end(), call.begin(), call.end());
      out.push_back(count);
    }
  }
  r.on.store(on != 0);
  return out;
}

}  // namespace

void record_gemm_call(const GemmArgs& g, DType dtype, Layout layout) {
  Recorder& r = recorder();
  if (!r.on.load(std::memory_order_relaxed) || g.batch < 1 || g.m < 1 || g.n < 1 || g.k < 1) return;
  const RecordedCall call{int64_t(dtype), int64_t(layout), mma_a_km(g), mma_b_kn(g), g.batch, g.m, g.n, g.k};
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (!r.on.load()) return;
  const auto [at, added] = r.index.try_emplace(call, r.calls.size());
  if (added) r.calls.emplace_back(call, 0);
  ++r.calls[at->second].second;
}

GemmOptions gemm_options() { return t_options.gemm; }
bool refuse_tma() { return t_options.refuse_tma; }

TunedTables tuned_tables() {
  const std::lock_guard<std::mutex> lock(g_tuned_mutex);
  return g_tuned;
}

const TunedTable* find_tuned(const TunedTables& tables, std::string_view gpu, int num_sms) {
  for (const TunedTable& t : *tables)
    if (t.gpu == gpu && t.num_sms == num_sms) return &t;
  return nullptr;
}

GpuKind gpu_kind(std::string_view name) {
  return name.find("H200") != std::string_view::npos   ? GpuKind::H200
         : name.find("H100") != std::string_view::npos ? GpuKind::H100
                                                        : GpuKind::Other;
}

TORCH_LIBRARY_IMPL(bankops, CompositeExplicitAutograd, m) {
  m.impl("_gemm_options", &gemm_options_op);
  m.impl("_gemm_tuning", &gemm_tuning_op);
  m.impl("_gemm_record", &gemm_record_op);
}

}  // namespace bankops
