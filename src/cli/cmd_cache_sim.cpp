// cli/cmd_cache_sim.cpp - `seedling cache-sim TRACE`: hit rate of the expert slot cache per policy and size.
//
// Replays a route trace (ours or tools/record_route_trace.py's) through the streamed provider's own slot
// bookkeeping, prints one row per slot count and one column per policy, and with --plot draws hit rate against
// slots, one line per policy, with the ceiling no cache can pass (every first use of an expert is a miss).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "cli/commands.h"
#include "core/error.h"
#include "experts/cache_sim.h"

namespace seedling::cli {

namespace {

struct CacheSimFlags {
  std::string trace;
  std::string slots = "8,16,32,64,128";
  std::string policies = "lru,lfu,belady";
  std::string plot;
  bool no_prefetch = false;
  int admit_per_step = 0;
};

struct Curve {
  EvictionPolicy policy;
  std::vector<double> hit_rate;  // per slot count
};

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// Hit rate (%) against slots; x on a log2 scale when the sizes span 8x or more.
void write_plot(const std::string& path, const std::string& title, const std::vector<int>& slots,
                const std::vector<Curve>& curves, double ceiling) {
  const double W = 760, H = 480, left = 80, right = 150, top = 50, bottom = 70;
  const double pw = W - left - right, ph = H - top - bottom;
  const bool log_x = slots.back() >= 8 * slots.front();
  auto fx = [&](double s) {
    if (slots.front() == slots.back()) return left + pw / 2;
    const double a = log_x ? std::log2(double(slots.front())) : double(slots.front());
    const double b = log_x ? std::log2(double(slots.back())) : double(slots.back());
    return left + ((log_x ? std::log2(s) : s) - a) / (b - a) * pw;
  };
  auto fy = [&](double rate) { return top + (1.0 - rate) * ph; };
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"13\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      W, H);
  svg += fmt::format("<text x=\"{}\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">{}</text>\n", left + pw / 2,
                     xml_escape(title));
  for (int p = 0; p <= 100; p += 10) {  // y grid and ticks
    const double y = fy(p / 100.0);
    svg += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#e0e0e0\"/>\n", left, y,
                       left + pw, y);
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}%</text>\n", left - 8, y + 4, p);
  }
  for (int s : slots) {  // x ticks
    const double x = fx(s);
    svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#e0e0e0\"/>\n", x, top, x,
                       top + ph);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x, top + ph + 20, s);
  }
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n", left, top,
                     pw, ph);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">slots (experts held in RAM{})</text>\n",
                     left + pw / 2, H - 22, log_x ? ", log scale" : "");
  svg +=
      fmt::format("<text x=\"22\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 22 {0})\">hit rate</text>\n",
                  top + ph / 2);
  // The ceiling: every first use is a miss whatever the policy.
  svg +=
      fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#777\" stroke-dasharray=\"6 4\"/>\n",
                  left, fy(ceiling), left + pw, fy(ceiling));
  for (size_t c = 0; c < curves.size(); ++c) {
    const char* color = colors[c % 5];
    std::string points;
    for (size_t i = 0; i < slots.size(); ++i) {
      points += fmt::format("{:.1f},{:.1f} ", fx(slots[i]), fy(curves[c].hit_rate[i]));
    }
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n", points, color);
    for (size_t i = 0; i < slots.size(); ++i) {
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", fx(slots[i]),
                         fy(curves[c].hit_rate[i]), color);
    }
    const double ly = top + 20 + 22 * double(c);
    svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                       left + pw + 15, ly, left + pw + 45, ly, color);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + pw + 52, ly + 4, policy_name(curves[c].policy));
  }
  const double ly = top + 20 + 22 * double(curves.size());
  svg += fmt::format(
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#777\" stroke-dasharray=\"6 4\"/>\n<text x=\"{}\" "
      "y=\"{}\">ceiling</text>\n</svg>\n",
      left + pw + 15, ly, left + pw + 45, ly, left + pw + 52, ly + 4);
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) fail("--plot {}: cannot create the file", path);
  const bool ok = std::fwrite(svg.data(), 1, svg.size(), f) == svg.size();
  if (std::fclose(f) != 0 || !ok) fail("--plot {}: writing failed", path);
}

int run(const CacheSimFlags& f) {
  std::vector<int> slots;
  for (int32_t s : parse_ids(f.slots, "--slots")) {
    if (s < 1) fail("--slots: {} is not a slot count (expected positive integers)", s);
    slots.push_back(s);
  }
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  if (slots.empty()) fail("--slots: no slot counts given");
  std::vector<Curve> curves;
  for (size_t b = 0, e = 0; b <= f.policies.size(); b = e + 1) {
    e = f.policies.find(',', b);
    if (e == std::string::npos) e = f.policies.size();
    curves.push_back({parse_eviction_policy(f.policies.substr(b, e - b), "--policy"), {}});
  }

  const auto trace = read_route_trace(f.trace);
  if (trace.empty()) fail("{}: the route trace has no records", f.trace);
  const auto groups = access_groups(trace);
  std::set<uint64_t> keys;
  uint64_t accesses = 0;
  for (const auto& g : groups) {
    for (int e : g.experts) keys.insert(expert_key(g.layer, e));
    accesses += g.experts.size();
  }
  const double ceiling = 1.0 - double(keys.size()) / double(accesses);
  std::printf("trace:     %s\n", f.trace.c_str());
  std::printf("records:   %zu (%zu MoE blocks, %llu expert fetches, %zu distinct experts)\n", trace.size(),
              groups.size(), static_cast<unsigned long long>(accesses), keys.size());
  std::printf("ceiling:   %.2f%% (every first use of an expert misses)\n", 100.0 * ceiling);
  std::printf("replay:    %s\n", f.no_prefetch ? "acquire one expert at a time" : "prefetch each MoE block");
  if (f.admit_per_step > 0) {
    std::printf(
        "admission: at most %d misses a step copied into slots, the rest read in place (each cell: hit rate, "
        "copies a step)\n",
        f.admit_per_step);
  }
  std::printf("\n");
  std::printf("%8s", "slots");
  for (const auto& c : curves) std::printf("  %8s", policy_name(c.policy));
  std::printf("\n");
  for (int s : slots) {
    std::printf("%8d", s);
    for (auto& c : curves) {
      const CacheSimResult r = simulate_cache(groups, s, c.policy, !f.no_prefetch, f.admit_per_step);
      c.hit_rate.push_back(r.hit_rate());
      std::printf("  %7.2f%%", 100.0 * r.hit_rate());
      if (f.admit_per_step > 0) std::printf(" %6.1f", double(r.admitted) / double(std::max<uint64_t>(r.steps, 1)));
    }
    std::printf("\n");
  }
  if (!f.plot.empty()) {
    const size_t slash = f.trace.find_last_of('/');
    write_plot(f.plot, "Expert cache hit rate: " + f.trace.substr(slash == std::string::npos ? 0 : slash + 1), slots,
               curves, ceiling);
    std::printf("\nplot:      %s\n", f.plot.c_str());
  }
  return 0;
}

}  // namespace

void add_cache_sim(CLI::App& app, int* status) {
  auto f = std::make_shared<CacheSimFlags>();
  CLI::App* cmd = app.add_subcommand("cache-sim", "Replay a route trace: expert cache hit rate per policy and size");
  cmd->add_option("trace", f->trace, "Route trace (.csv or .csv.gz; docs/formats/route-trace.md)")->required();
  cmd->add_option("--slots", f->slots, "Comma-separated slot counts")->capture_default_str();
  cmd->add_option("--policy", f->policies, "Comma-separated policies: lru, lfu, belady")->capture_default_str();
  cmd->add_option("--plot", f->plot, "Write an SVG plot of hit rate against slots");
  cmd->add_flag("--no-prefetch", f->no_prefetch, "Replay without MoE-block prefetch (one expert pinned at a time)");
  cmd->add_option("--admit-per-step", f->admit_per_step,
                  "Copy at most N misses a step into slots, the rest read in place (0: every miss)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->callback([f, status] { *status = run(*f); });
}

}  // namespace seedling::cli
