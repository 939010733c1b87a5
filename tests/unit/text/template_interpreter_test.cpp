// Hand-checkable behaviour of the Jinja2 chat-template interpreter. Each expected string is what jinja2 3.1 with
// transformers' settings (trim_blocks, lstrip_blocks, its tojson) prints; they were checked against jinja2 itself.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "template/chat_template.h"
#include "template/template_render.h"

namespace {

std::string render(const std::string& source, const nlohmann::json& ctx = nlohmann::json::object()) {
  std::tm now{};
  now.tm_year = 125;
  now.tm_mon = 5;
  now.tm_mday = 15;
  return seedling::ChatTemplate::from_string(source, "t.jinja").render(ctx, now);
}

std::string error_of(const std::string& source, const nlohmann::json& ctx = nlohmann::json::object()) {
  try {
    render(source, ctx);
  } catch (const seedling::Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(TemplateWhitespace, TrimBlocksDropsOneNewlineAfterABlockTag) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nend"), "yes\nend");
}

TEST(TemplateWhitespace, LstripBlocksRemovesIndentBeforeBlockTagsOnly) {
  EXPECT_EQ(render("  {% if true %}\n  a\n  {% endif %}\n  {{ 'b' }}"), "  a\n  b");
}

TEST(TemplateWhitespace, DashMarkersStripAllWhitespaceOnTheirSide) {
  EXPECT_EQ(render("a  \n  {{- 'b' -}}  \n  c"), "abc");
  EXPECT_EQ(render("x\n\n{%- if true -%}\n\n y {%- endif %}"), "xy");
}

TEST(TemplateWhitespace, OneTrailingNewlineOfTheSourceIsDropped) {
  EXPECT_EQ(render("a\n"), "a");
  EXPECT_EQ(render("a\n\n"), "a\n");
}

TEST(TemplateWhitespace, CommentsVanishAndTrimLikeBlocks) {
  EXPECT_EQ(render("a{# note #}\nb   {#- x -#}   c"), "abc");
}

TEST(TemplateLoops, LoopVariablesAndElse) {
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|"
                   "{% else %}empty{% endfor %}",
                   {{"xs", {"a", "b"}}}),
            "01TrueFalse2|12FalseTrue2|");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
}

TEST(TemplateLoops, SetInsideALoopDoesNotLeakButNamespaceDoes) {
  EXPECT_EQ(render("{% set c = 0 %}{% for i in [1,2,3] %}{% set c = c + 1 %}{{ c }}{% endfor %}|{{ c }}"), "111|0");
  EXPECT_EQ(
      render("{% set ns = namespace(c=0) %}{% for i in [1,2,3] %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}"),
      "6");
}

TEST(TemplateLoops, FilteredLoopBreakContinueAndDictItems) {
  EXPECT_EQ(render("{% for x in [1,2,3,4,5] if x is odd %}{{ loop.index }}:{{ x }} {% endfor %}"), "1:1 2:3 3:5 ");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}"
                   "{% endif %}{{ x }}{% endfor %}"),
            "02");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"b", 1}, {"a", 2}}}}),
            "a=2;b=1;");
}

TEST(TemplateValues, PythonPrintingOfScalarsListsAndDicts) {
  EXPECT_EQ(render("{{ 1.0 }} {{ 1e16 }} {{ 1e-05 }} {{ 0.1 + 0.2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }}"),
            "1.0 1e+16 1e-05 0.30000000000000004 3 -4 3.5");
  EXPECT_EQ(render("{{ true }} {{ none }} {{ x }}|"), "True None |");
  EXPECT_EQ(render("{{ [1, 'a', {'k': none, 'b': true}, (1,), \"it's\"] }}"),
            "[1, 'a', {'k': None, 'b': True}, (1,), \"it's\"]");
}

TEST(TemplateValues, SlicesIncludingNegativeAndReversed) {
  EXPECT_EQ(render("{{ xs[1:] }} {{ xs[-2:] }} {{ xs[::-1] }} {{ 'héllo'[::-1] }} {{ xs[-1] }}", {{"xs", {1, 2, 3}}}),
            "[2, 3] [2, 3] [3, 2, 1] olléh 3");
}

TEST(TemplateValues, UndefinedIsEmptyFalsyAndIteratesEmptyButItsAttributesFail) {
  EXPECT_EQ(render("[{{ nope }}]{% if not nope %}f{% endif %}{% for x in nope %}x{% endfor %}{{ nope | length }}"),
            "[]f0");
  EXPECT_EQ(render("{{ m.missing is defined }} {{ none_value.attr is defined }}",
                   {{"m", nlohmann::json::object()}, {"none_value", nullptr}}),
            "False False");
  EXPECT_NE(error_of("{{ nope.attr }}").find("t.jinja:1:"), std::string::npos);
}

TEST(TemplateExpressions, TestsOperatorsAndTruthiness) {
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 3 not in [1, 2] }} {{ x is string }} {{ x is mapping }} {{ [] or 'd' }}"
                   " {{ 0 and 1 }} {{ 'y' if x else 'n' }} {{ 1 == 1.0 }} {{ x is sequence }}",
                   {{"x", "s"}}),
            "True True True False d 0 y True True");
  EXPECT_EQ(
      render("{{ 'a' ~ 1 ~ none }} {{ 2 ** 10 }} {{ -3 % 5 }} {{ v is number }} {{ v is integer }}", {{"v", true}}),
      "a1None 1024 2 True False");
}

TEST(TemplateExpressions, RepetitionIsBoundedAndEmptySequencesRepeatAtOnce) {
  // Found by fuzz_template: '[] * 2**62' looped 2**62 times inserting nothing (a hang, not an error).
  EXPECT_EQ(render("{{ [] * 4611686018427387904 }}|{{ '' * 9223372036854775807 }}|{{ 2147483647 * () }}|"
                   "{{ [1, 2] * 2 }}|{{ 'ab' * 0 }}|{{ 'ab' * -3 }}"),
            "[]||()|[1, 2, 1, 2]||");
  EXPECT_NE(error_of("{{ 'ab' * 9223372036854775807 }}").find("'*': the repetition's bytes would be over"),
            std::string::npos);
  EXPECT_NE(error_of("{{ [1, 2] * 1048576 }}").find("the repetition's items would be over"), std::string::npos);
}

// Found by fuzz_template (2026-12-05): tojson(indent=4611686018427387) asked for a 4.6 PB indent string and
// tojson(indent=2147483648) for 2 GB, before one byte of output. Every way a template grows text, a list or its
// work past the limits of template/value.h is now an error naming the operation, never an allocation or a hang.
TEST(TemplateExpressions, GrowthPastTheTemplateLimitsIsAnErrorNotAnAllocation) {
  const auto fails_with = [](const std::string& source, const std::string& what) {
    const std::string e = error_of(source);
    EXPECT_NE(e.find(what), std::string::npos) << source << " -> " << e;
    EXPECT_NE(e.find("too large for a chat template"), std::string::npos) << source << " -> " << e;
  };
  fails_with("{{ [1] | tojson(indent=4611686018427387) }}", "tojson: the indent's bytes");
  fails_with("{{ [1] | tojson(indent=2147483648) }}", "tojson: the indent's bytes");
  fails_with("{{ [[[[1]]]] | tojson(indent=16777000) }}", "tojson: the result is over");
  fails_with("{{ 'a\nb' | indent(1099511627776) }}", "indent: the width's bytes");
  fails_with("{{ ('a\n' * 4000000) | indent(8) }}", "indent: the result's bytes");
  fails_with("{{ ('x' * 16777216) ~ 'y' }}", "'~': the string's bytes");
  fails_with("{{ ('x' * 16777216) + 'y' }}", "'+': the string's bytes");
  fails_with("{{ ([1] * 1048576) + [2] }}", "'+': the list's items");
  fails_with("{{ ('x' * 9000000).join(['a', 'b', 'c']) }}", "join(): the result's bytes");
  fails_with("{{ ['a', 'b', 'c'] | join('x' * 9000000) }}", "join: the result's bytes");
  fails_with("{{ ('ab' * 6000000).replace('a', 'xyz') }}", "replace(): the result's bytes");
  fails_with("{% for i in range(3) %}{{ 'x' * 16000000 }}{% endfor %}", "the output would be over");
  // Below the limits the same operations give Python's bytes.
  EXPECT_EQ(render("{{ [1, [2]] | tojson(indent=2) }}|{{ 'a\nb' | indent(-3) }}|{{ 'a\nb' | indent(2, true) }}"),
            "[\n  1,\n  [\n    2\n  ]\n]|a\nb|  a\n  b");
}

// The error of rendering source with these work limits ("" when it renders).
std::string error_with_limits(const std::string& source, int64_t max_steps, double max_seconds) {
  seedling::tmpl::RenderOptions o;
  o.origin = "t.jinja";
  o.max_steps = max_steps;
  o.max_seconds = max_seconds;
  try {
    seedling::tmpl::render_template(seedling::tmpl::parse_template(source, "t.jinja"), {}, o);
  } catch (const seedling::Error& e) {
    return e.what();
  }
  return "";
}

TEST(TemplateLoops, WorkPastTheStepLimitIsAnErrorNotAHang) {
  // With a limit of 1000 steps (the default is 2**20, template/value.h) and no clock in the way: 2**40 iterations of
  // nested loops, a filtered loop, and a macro that calls itself twice a level (2**60 calls within the depth limit).
  for (const char* source :
       {"{% for a in range(1048576) %}{% for b in range(1048576) %}{% endfor %}{% endfor %}",
        "{% for a in range(1048576) if a >= 0 %}{% for b in range(8) if b %}{% endfor %}{% endfor %}",
        "{% macro m(n) %}{% if n %}{{ m(n - 1) }}{{ m(n - 1) }}{% endif %}{% endmacro %}{{ m(60) }}"}) {
    const std::string e = error_with_limits(source, 1000, 1e9);
    EXPECT_NE(e.find("more than 1000 loop iterations and macro calls, too many for a chat template"), std::string::npos)
        << source << " -> " << e;
  }
  // At the default limits the same nested loops end in an error too (the steps' or, in a slow build, the clock's).
  const std::string e = error_of("{% for a in range(1048576) %}{% for b in range(1048576) %}{% endfor %}{% endfor %}");
  EXPECT_TRUE(e.find("too many for a chat template") != std::string::npos ||
              e.find("too long for a chat template") != std::string::npos)
      << e;
  // Exactly at the limit: 32 x 31 inner iterations + 32 outer = 1024 steps render.
  EXPECT_EQ(error_with_limits("{% for a in range(32) %}{% for b in range(31) %}{% endfor %}{% endfor %}", 1024, 1e9),
            "");
  EXPECT_NE(error_with_limits("{% for a in range(32) %}{% for b in range(31) %}{% endfor %}{% endfor %}", 1023, 1e9),
            "");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for a in range(64) %}{% for b in range(1024) %}"
                   "{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}{{ ns.n }}"),
            "65536");
}

TEST(TemplateLoops, FewStepsOfLargeWorkStopAtTheTimeLimit) {
  // Each step scans a 16 MB string: 2**20 steps would take hours, so the clock stops it (here after 0.5 s).
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_with_limits(
      "{% set s = 'x' * 16777216 %}{% for i in range(1048576) %}{% if s | length > 1 %}{% endif %}{% endfor %}",
      int64_t(1) << 20, 0.5);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(e.find("rendering took over 0.5 s, too long for a chat template"), std::string::npos) << e;
  EXPECT_LT(seconds, 30.0);
}

TEST(TemplateFilters, CommonFilters) {
  EXPECT_EQ(
      render("{{ '  x  ' | trim }}|{{ 'ab' | upper }}|{{ 'hello world-foo' | title }}|{{ 'hI' | capitalize }}|"
             "{{ [3, 1, 2] | sort | join(',') }}|{{ 'aAb' | list | unique | join }}|{{ xs | first }}{{ xs | last }}|"
             "{{ nope | default('d') }}|{{ '' | default('e', true) }}|{{ '3' | int + 1 }}|{{ 2 | float }}",
             {{"xs", {1, 2, 3}}}),
      "x|AB|Hello World-Foo|Hi|1,2,3|ab|13|d|e|4|2.0");
  EXPECT_EQ(
      render("{{ ms | selectattr('role', 'equalto', 'user') | map(attribute='c') | join(' ') }}",
             {{"ms", {{{"role", "user"}, {"c", "a"}}, {{"role", "x"}, {"c", "b"}}, {{"role", "user"}, {"c", "c"}}}}}),
      "a c");
  EXPECT_EQ(render("{{ 'a\nb\n\nc' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}"), "a\n  b\n\n  c|  a\n  b");
}

TEST(TemplateFilters, TojsonFollowsTransformersJsonDumps) {
  nlohmann::ordered_json d = {{"b", 1.0}, {"a", {"é", nullptr, true}}, {"s", "q\"\\\n\t\x01"}};
  EXPECT_EQ(seedling::ChatTemplate::from_string("{{ d | tojson }}", "t.jinja").render(nlohmann::ordered_json{{"d", d}}),
            "{\"b\": 1.0, \"a\": [\"é\", null, true], \"s\": \"q\\\"\\\\\\n\\t\\u0001\"}");
  EXPECT_EQ(render("{{ {'b': [], 'a': [1, 2]} | tojson(indent=2, sort_keys=true) }}"),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": []\n}");
  EXPECT_EQ(render("{{ 'é' | tojson(ensure_ascii=true) }} {{ [1,2] | tojson(separators=(',', ':')) }}"),
            "\"\\u00e9\" [1,2]");
}

TEST(TemplateMethods, StringAndDictMethods) {
  EXPECT_EQ(
      render("{{ ' a b '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a.b.c'.rsplit('.', 1) }} {{ 'xxhixx'.strip('x') }}"
             " {{ 'hello'.startswith(('he', 'x')) }} {{ 'abc'.find('c') }} {{ '{} and {}'.format(1, 'b') }}"
             " {{ d.get('k') }} {{ d.get('z', 0) }} {{ d.keys() | list }}",
             {{"d", {{"k", "v"}}}}),
      "['a', 'b'] ['a', 'b', '', 'c'] ['a.b', 'c'] hi True 2 1 and b v 0 ['k']");
}

TEST(TemplateMacros, MacrosDefaultsCallerAndFilterBlocks) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }}{{ "
                   "greet('B', '?') }}"
                   "{{ greet(name='C') }}"),
            "Hi A!Hi B?Hi C!");
  EXPECT_EQ(render("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}in{% endcall %}"), "[in]");
  EXPECT_EQ(render("{% filter upper %}abc{% endfilter %}{% set x %}  y  {% endset %}({{ x | trim }})"), "ABC(y)");
  EXPECT_EQ(render("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
}

TEST(TemplateGlobals, RaiseExceptionCarriesTheTemplatesMessage) {
  try {
    render("line one\n{{ raise_exception('Only user and assistant roles are supported!') }}");
    FAIL() << "expected TemplateRaised";
  } catch (const seedling::tmpl::TemplateRaised& e) {
    EXPECT_EQ(e.message(), "Only user and assistant roles are supported!");
    EXPECT_NE(std::string(e.what()).find("t.jinja:2:"), std::string::npos) << e.what();
  }
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d') }}"), "2025-06-15");
}

TEST(TemplateErrors, SyntaxErrorsNameFileLineAndColumn) {
  EXPECT_NE(error_of("ok\n{% if x %}\nno end").find("t.jinja:3:"), std::string::npos);
  EXPECT_NE(error_of("a\nb {{ 1 + }}").find("t.jinja:2:"), std::string::npos) << error_of("a\nb {{ 1 + }}");
  EXPECT_NE(error_of("{% for %}").find("expected a name"), std::string::npos);
  EXPECT_NE(error_of("{{ 'unterminated }}").find("t.jinja:1:"), std::string::npos);
}

TEST(TemplateErrors, UnsupportedFeaturesAreNamedNotIgnored) {
  EXPECT_NE(error_of("{% include 'x.jinja' %}").find("'include' statement is not supported"), std::string::npos);
  EXPECT_NE(error_of("{{ x | truncate(3) }}").find("'truncate' filter is not supported"), std::string::npos);
  EXPECT_NE(error_of("{{ x | no_such_filter }}").find("no filter named 'no_such_filter'"), std::string::npos);
  EXPECT_NE(error_of("{{ x is no_such_test }}").find("no test named"), std::string::npos);
  EXPECT_NE(error_of("{{ [1].append(2) }}").find("unsafe"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a' + 1 }}").find("can only concatenate str"), std::string::npos);
}

TEST(ModelChatTemplate, FindsJinjaFileFirstThenTokenizerConfigListDefault) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "seedling_tpl_model_dir";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": {"content": "<s>"}, "eos_token": "</s>",
            "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})";
  auto found = seedling::find_model_chat_template(dir);
  EXPECT_EQ(found.source, "D");
  EXPECT_EQ(found.bos_token, "<s>");
  EXPECT_EQ(found.eos_token, "</s>");
  std::ofstream(dir / "chat_template.jinja") << "J";
  EXPECT_EQ(seedling::find_model_chat_template(dir).source, "J");
  fs::remove_all(dir);
  EXPECT_THROW(seedling::find_model_chat_template(dir), seedling::Error);
}

}  // namespace
