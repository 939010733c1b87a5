// Byte-equality of Seedling's chat-template rendering with transformers.apply_chat_template, for every real template
// in tests/data/templates/ and every conversation x variant in conversations.json. The goldens are made on the GPU
// machine by tools/make_template_goldens.py and live in tests/data/templates/golden/ (SEEDLING_TEMPLATE_GOLDEN_DIR
// overrides the folder, e.g. to check a fresh run before copying it in).
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <sstream>

#include "template/chat_template.h"
#include "template/template_render.h"

namespace {

namespace fs = std::filesystem;
const fs::path kTemplates = fs::path(SEEDLING_TEST_DATA) / "templates";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

fs::path golden_dir() {
  if (const char* env = std::getenv("SEEDLING_TEMPLATE_GOLDEN_DIR")) return env;
  return kTemplates / "golden";
}

std::tm parse_now(const std::string& iso) {  // "YYYY-MM-DDTHH:MM:SS"
  std::tm tm{};
  std::istringstream ss(iso);
  ss >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  std::time_t t = timegm(&tm);  // normalizes tm_wday / tm_yday for %a, %j, ...
  gmtime_r(&t, &tm);
  return tm;
}

TEST(TemplateGolden, EveryRealTemplateRendersByteEqualToTransformers) {
  const fs::path dir = golden_dir();
  if (!fs::exists(dir)) {
    GTEST_SKIP() << "no goldens at " << dir
                 << ": run tools/make_template_goldens.py OUT on the GPU machine and copy OUT/*.json there";
  }
  const auto spec = nlohmann::ordered_json::parse(slurp(kTemplates / "conversations.json"));
  std::map<std::string, nlohmann::ordered_json> conversations;
  for (const auto& c : spec["conversations"]) conversations[c["name"]] = c;
  int files = 0, checked = 0, failures = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const auto golden = nlohmann::ordered_json::parse(slurp(entry.path()));
    const fs::path template_path = kTemplates / golden["template"].get<std::string>();
    ASSERT_TRUE(fs::exists(template_path)) << template_path;
    ++files;
    auto tmpl = seedling::ChatTemplate::from_string(slurp(template_path), template_path.filename().string());
    const std::tm now = parse_now(golden["now"]);
    for (const auto& c : golden["cases"]) {
      const auto& conv = conversations.at(c["conversation"]);
      nlohmann::ordered_json ctx = golden["context_tokens"];
      ctx["messages"] = conv["messages"];
      ctx["tools"] =
          conv.contains("tools") ? spec["tool_sets"][conv["tools"].get<std::string>()] : nlohmann::ordered_json();
      ctx["documents"] = nullptr;
      ctx["add_generation_prompt"] = c["add_generation_prompt"];
      for (auto it = c["kwargs"].begin(); it != c["kwargs"].end(); ++it) ctx[it.key()] = it.value();
      const std::string label = template_path.filename().string() + " / " + c["conversation"].get<std::string>() +
                                " / " + c["variant"].get<std::string>();
      ++checked;
      if (c.contains("output")) {
        try {
          std::string got = tmpl.render(ctx, now);
          if (got != c["output"].get<std::string>()) {
            ++failures;
            ADD_FAILURE() << label << ": rendering differs\n--- transformers\n"
                          << c["output"].get<std::string>() << "\n--- seedling\n"
                          << got;
          }
        } catch (const std::exception& e) {
          ++failures;
          ADD_FAILURE() << label << ": threw " << e.what();
        }
      } else {
        // transformers raised: we must raise too; raise_exception() text must match.
        try {
          tmpl.render(ctx, now);
          ++failures;
          ADD_FAILURE() << label << ": expected an error (" << c["error"]["message"] << "), rendered fine";
        } catch (const seedling::tmpl::TemplateRaised& e) {
          if (c["error"]["type"] == "TemplateError") {
            EXPECT_EQ(e.message(), c["error"]["message"].get<std::string>()) << label;
          }
        } catch (const seedling::Error&) {
        }
      }
    }
  }
  EXPECT_GT(files, 0) << "no *.json goldens in " << dir;
  std::cout << "checked " << checked << " renderings of " << files << " templates, " << failures << " failures\n";
}

}  // namespace
