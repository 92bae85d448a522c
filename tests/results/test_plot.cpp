// The SVG plotting toolkit: structure of the SVG text (series, labels, missing
// values, escaping), well-formedness, and the PNG that rsvg-convert renders from
// it (size from the header, not blank, series colours present). Set
// MAMBAMT_RESULTS_PLOT_DIR to keep the SVG and PNG files for a look.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "image_check.h"
#include "results/plot.h"
#include "results/svg.h"
#include "test_support.h"

using namespace mambamt::results;
using namespace mambamt::results::testing;
namespace fs = std::filesystem;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Writes the SVG, checks it is well-formed, renders it and checks the PNG:
// the expected size and a share of drawn (non-white) pixels. Returns the decoded
// image when zlib could be loaded.
std::optional<Image> render_and_check(const std::string& name, const std::string& svg_text,
                                      std::uint32_t width, std::uint32_t height) {
  INFO("plot " << name);
  REQUIRE(xml_problem(svg_text) == "");
  TempDir dir;
  const fs::path svg_path = dir.path() / (name + ".svg");
  const fs::path png_path = dir.path() / (name + ".png");
  svg::write_file(svg_path.string(), svg_text);
  REQUIRE(have_rsvg_convert());  // librsvg2-bin, installed by scripts/setup.sh
  REQUIRE(render_png(svg_path.string(), png_path.string()) == 0);
  if (const char* keep = std::getenv("MAMBAMT_RESULTS_PLOT_DIR")) {
    fs::create_directories(keep);
    fs::copy_file(svg_path, fs::path(keep) / svg_path.filename(), fs::copy_options::overwrite_existing);
    fs::copy_file(png_path, fs::path(keep) / png_path.filename(), fs::copy_options::overwrite_existing);
  }
  const PngHeader h = read_png_header(png_path.string());
  REQUIRE(h.valid);
  CHECK(h.width == width);
  CHECK(h.height == height);
  std::optional<Image> img = decode_png(png_path.string());
  REQUIRE(img);  // zlib (zlib1g, part of every Debian system) decodes the pixels
  const double drawn = static_cast<double>(img->count_non_white()) / (double(img->width) * img->height);
  CHECK(drawn > 0.01);  // not blank
  CHECK(drawn < 0.95);  // not a solid block
  return img;
}

std::uint32_t svg_dimension(const std::string& svg_text, const std::string& attr) {
  const auto p = svg_text.find(" " + attr + "=\"");
  REQUIRE(p != std::string::npos);
  return static_cast<std::uint32_t>(std::lround(std::stod(svg_text.substr(p + attr.size() + 3))));
}

}  // namespace

TEST_CASE("nice ticks, log ticks and tick labels") {
  CHECK(svg::nice_ticks(0, 1) == std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1});
  auto t = svg::nice_ticks(3.2, 47.9);
  CHECK(t.front() == 0);
  CHECK(t.back() == 50);
  CHECK(t.size() <= 8);
  auto single = svg::nice_ticks(5, 5);
  CHECK(single.front() <= 5);
  CHECK(single.back() >= 5);
  CHECK(svg::log_ticks(3, 4000) == std::vector<double>{1, 10, 100, 1000, 10000});
  CHECK(svg::log_ticks(20, 300) == std::vector<double>{10, 20, 50, 100, 200, 500, 1000});
  CHECK(svg::tick_label(0.6000000000000001, 0.2) == "0.6");
  CHECK(svg::tick_label(2.5, 2.5) == "2.5");
  CHECK(svg::tick_label(-0.0, 1) == "0");
  CHECK(svg::tick_label(1500, 500) == "1500");
  CHECK(svg::tick_label(2e7, 1e7) == "2e+07");
}

TEST_CASE("the well-formedness check used on every plot catches broken XML") {
  CHECK(xml_problem("<svg a=\"1\"><g><text>a &amp; b</text></g></svg>") == "");
  CHECK(xml_problem("<svg><g></svg>") != "");
  CHECK(xml_problem("<svg a=1/>") != "");
  CHECK(xml_problem("<svg><text>a & b</text></svg>") != "");
  CHECK(xml_problem("<svg><text>&foo;</text></svg>") != "");
  CHECK(xml_problem("<svg><g>") != "");
}

TEST_CASE("svg escaping of tokens and user text") {
  CHECK(svg::escape("a<b>&\"c\"'d'") == "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;");
  CHECK(svg::escape("▁Haus Straße 日本") == "▁Haus Straße 日本");
  CHECK(svg::escape(std::string("bad\x01" "byte\xff")) == "bad\xEF\xBF\xBD" "byte\xEF\xBF\xBD");
  CHECK(svg::text_width("日本", 10) > svg::text_width("ab", 10));
}

TEST_CASE("Pareto front: higher quality and higher speed are better") {
  // (speed, BLEU)
  std::vector<std::pair<double, double>> pts = {
      {100, 30}, {200, 29}, {150, 28}, {300, 20}, {50, 31}, {300, 19}, {kNaN, 40}, {120, 30}};
  // {150,28} is dominated by {200,29}; {300,19} by {300,20}; {100,30} by {120,30}.
  CHECK(pareto_front(pts) == std::vector<std::size_t>{4, 7, 1, 3});
  // Lower is better on x (e.g. latency): {50,31} dominates everything with y <= 31.
  CHECK(pareto_front(pts, false, true) == std::vector<std::size_t>{4});
  CHECK(pareto_front({}).empty());
}

TEST_CASE("line plot: series, legend, gaps for missing values, PNG") {
  LinePlot plot;
  plot.layout.title = "Quality by source length";
  plot.x_axis.label = "source tokens";
  plot.y_axis.label = "BLEU";
  plot.x_categories = {"1-16", "17-32", "33-64", "65-128", "129-256", "257+"};
  plot.series = {{"Transformer", {}, {34.1, 33.0, 31.2, 27.5, 20.3, 12.0}},
                 {"Mamba", {}, {33.5, 32.8, 30.1, kNaN, 15.2, 8.9}},
                 {"Hybrid 1:7 <mid+last>", {}, {34.3, 33.6, 32.0, 29.9, 26.1, kNaN}, true}};
  plot.vertical_lines = {{4.0, "longest training bin"}};
  const std::string s = render_line_plot(plot);

  CHECK(count_of(s, "class=\"series\"") == 3);
  CHECK(count_of(s, "class=\"legend-entry\"") == 3);
  CHECK(count_of(s, "class=\"legend-missing\"") == 1);
  CHECK(count_of(s, "class=\"missing\"") == 2);  // one cross per missing value
  // Mamba's line breaks at the gap: two runs; the hybrid's is one run.
  CHECK(count_of(s, "class=\"line\"") == 4);
  CHECK(count_of(s, "class=\"point\"") == 16);
  CHECK(s.find("Quality by source length") != std::string::npos);
  CHECK(s.find(">257+<") != std::string::npos);
  CHECK(s.find("Hybrid 1:7 &lt;mid+last&gt;") != std::string::npos);
  CHECK(s.find("longest training bin") != std::string::npos);

  auto img = render_and_check("line_plot", s, 720, 450);
  if (img) {
    CHECK(img->count_color(svg::series_color(0)) > 300);
    CHECK(img->count_color(svg::series_color(1)) > 200);
    CHECK(img->count_color(svg::series_color(2)) > 200);
  }
}

TEST_CASE("line plot with error bands (mean +- std over seeds)") {
  LinePlot plot;
  plot.layout.title = "BLEU by attention ratio";
  plot.x_axis.label = "attention layers per 8";
  plot.y_axis.label = "BLEU";
  plot.series = {{"hybrid", {0, 1, 2, 4, 8}, {28.0, 32.5, 33.1, kNaN, 33.6}, false, {0.8, 0.5, 0.4, 0.3, 0.2}},
                 {"transformer", {0, 8}, {33.4, 33.4}, true, {}}};
  const std::string s = render_line_plot(plot);
  // The band breaks at the missing value; the point after it is alone and gets a whisker.
  CHECK(count_of(s, "class=\"error-band\"") == 1);
  CHECK(count_of(s, "class=\"error-bar\"") == 1);
  CHECK(count_of(s, "class=\"missing\"") == 1);
  render_and_check("line_plot_bands", s, 720, 450);
  LinePlot bad = plot;
  bad.series[0].errors.pop_back();
  CHECK_THROWS_AS(render_line_plot(bad), mambamt::InputError);
}

TEST_CASE("line plot with a log axis skips non-positive values") {
  LinePlot plot;
  plot.layout.title = "Validation loss";
  plot.x_axis.label = "step";
  plot.y_axis.label = "loss";
  plot.y_axis.log_scale = true;
  LineSeries a{"hybrid", {}, {}};
  LineSeries b{"transformer", {}, {}};
  for (int k = 0; k <= 20; ++k) {
    a.x.push_back(k * 500);
    a.y.push_back(9.0 * std::exp(-k / 5.0) + 1.8);
    b.x.push_back(k * 500);
    b.y.push_back(k == 7 ? 0.0 : 9.5 * std::exp(-k / 6.0) + 1.9);  // 0 cannot be drawn on a log axis
  }
  plot.series = {a, b};
  const std::string s = render_line_plot(plot);
  CHECK(count_of(s, "class=\"series\"") == 2);
  CHECK(count_of(s, "class=\"missing\"") == 1);
  CHECK(s.find(">10<") != std::string::npos);  // a decade tick
  render_and_check("line_plot_log", s, 720, 450);
}

TEST_CASE("scatter plot with labels and the Pareto front overlay") {
  ScatterPlot plot;
  plot.layout.title = "Quality vs decoding speed";
  plot.x_axis.label = "decoding tokens/s";
  plot.y_axis.label = "BLEU";
  plot.series = {{"Transformer", {{1200, 34.2, "Transformer"}}},
                 {"Mamba", {{2900, 32.1, "Mamba"}, {3100, 30.5, "Mamba d_state=16"}}},
                 {"Hybrid", {{2500, 34.6, "1:7 mid+last"}, {2200, 34.0, "1:3"}, {kNaN, 33.0, "crashed & burned"}}}};
  const std::string s = render_scatter_plot(plot);
  CHECK(count_of(s, "class=\"series\"") == 3);
  CHECK(count_of(s, "class=\"pareto-front\"") == 1);
  // Front: Hybrid 1:7 (2500, 34.6), Mamba (2900, 32.1), Mamba d16 (3100, 30.5).
  CHECK(count_of(s, "class=\"pareto\"") == 3);
  CHECK(count_of(s, "class=\"point-label\"") == 5);
  CHECK(s.find("1 point has no value") != std::string::npos);
  CHECK(s.find("crashed") == std::string::npos);  // not placed, so not labelled
  CHECK(s.find("Mamba d_state=16") != std::string::npos);
  auto img = render_and_check("scatter_pareto", s, 720, 450);
  if (img) {
    CHECK(img->count_color(svg::series_color(2)) > 30);
    CHECK(img->count_color("#333333", 30) > 100);  // the dashed front and rings
  }
}

TEST_CASE("grouped bar chart with error bars and a missing value") {
  BarChart chart;
  chart.layout.title = "Contrastive accuracy by antecedent distance";
  chart.categories = {"0", "1", "2", "3", ">3"};
  chart.x_label = "antecedent distance (sentences)";
  chart.y_axis.label = "accuracy (%)";
  chart.series = {{"sentence-level", {88, 51, 49, 50, 48}, {1.2, 2.5, 3.0, 4.1, 5.0}},
                  {"document-level", {89, 83, 71, kNaN, 55}, {1.1, 2.2, 3.3, 0, 5.5}}};
  chart.show_values = true;
  const std::string s = render_bar_chart(chart);
  CHECK(count_of(s, "class=\"series\"") == 2);
  CHECK(count_of(s, "class=\"bar\"") == 9);
  CHECK(count_of(s, "class=\"bar missing\"") == 1);
  CHECK(count_of(s, ">n/a<") == 1);
  CHECK(count_of(s, "class=\"error-bar\"") == 9);
  CHECK(s.find("&gt;3") != std::string::npos);
  auto img = render_and_check("bar_chart", s, 720, 450);
  if (img) {
    CHECK(img->count_color(svg::series_color(0)) > 2000);
    CHECK(img->count_color(svg::series_color(1)) > 2000);
  }

  BarChart bad = chart;
  bad.series[1].values.pop_back();
  CHECK_THROWS_AS(render_bar_chart(bad), mambamt::InputError);
}

TEST_CASE("heatmap of an alignment map with UTF-8 tokens") {
  Heatmap hm;
  hm.layout.title = "Cross-attention, layer 4";
  hm.x_labels = {"▁Das", "▁Haus", "▁ist", "▁groß", "<unk>", "&", "\"q\"", "日本", "</s>"};
  hm.y_labels = {"▁The", "▁house", "▁is", "▁big", "▁&", "</s>"};
  hm.colorbar_label = "attention weight";
  const std::size_t rows = hm.y_labels.size(), cols = hm.x_labels.size();
  hm.values.assign(rows, std::vector<double>(cols, 0.0));
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      const double d = static_cast<double>(c) - 1.5 * static_cast<double>(r);
      hm.values[r][c] = std::exp(-d * d / 2.0);
    }
  }
  hm.values[2][6] = kNaN;
  hm.show_values = true;
  const std::string s = render_heatmap(hm);
  CHECK(count_of(s, "class=\"cell\"") == rows * cols - 1);
  CHECK(count_of(s, "class=\"cell missing\"") == 1);
  CHECK(count_of(s, "class=\"legend-missing\"") == 1);
  CHECK(s.find(">&lt;unk&gt;<") != std::string::npos);
  CHECK(s.find(">&amp;<") != std::string::npos);
  CHECK(s.find(">&quot;q&quot;<") != std::string::npos);
  CHECK(s.find(">日本<") != std::string::npos);
  CHECK(s.find(">▁groß<") != std::string::npos);
  CHECK(s.find("<title>▁is / &quot;q&quot;: no value</title>") != std::string::npos);
  const auto w = svg_dimension(s, "width"), h = svg_dimension(s, "height");
  auto img = render_and_check("heatmap", s, w, h);
  if (img) {
    CHECK(img->count_color(svg::viridis(1.0), 20) > 200);  // the diagonal's maxima
    CHECK(img->count_color(svg::viridis(0.0), 20) > 200);
  }

  Heatmap ragged = hm;
  ragged.values[3].pop_back();
  CHECK_THROWS_AS(render_heatmap(ragged), mambamt::InputError);
}

TEST_CASE("a diverging heatmap for signed occlusion effects") {
  Heatmap hm;
  hm.layout.title = "Occlusion: change in log-probability";
  hm.x_labels = {"▁Sie", "▁sagte", ",", "▁dass", "▁er", "▁kommt"};
  hm.y_labels = {"▁She", "▁said", "▁he", "▁comes"};
  hm.values = {{-2.0, 0.1, 0.0, 0.0, 0.2, 0.0},
               {0.1, -1.5, 0.0, 0.1, 0.0, 0.0},
               {0.0, 0.0, 0.0, 0.1, -3.0, 0.5},
               {0.0, 0.0, 0.0, 0.0, 0.3, -1.0}};
  hm.diverging = true;
  hm.colorbar_label = "effect";
  const std::string s = render_heatmap(hm);
  CHECK(s.find(svg::diverging(0.5)) != std::string::npos);  // 0 is white
  CHECK(s.find(svg::diverging(0.0)) != std::string::npos);  // -3 is the darkest blue
  CHECK(svg::diverging(0.5) == "#f7f7f7");
  auto img = render_and_check("heatmap_diverging", s, svg_dimension(s, "width"), svg_dimension(s, "height"));
  if (img) CHECK(img->count_color(svg::diverging(0.0), 12) > 100);
}

TEST_CASE("a larger heatmap sizes its cells down") {
  Heatmap hm;
  const int n = 60;
  for (int k = 0; k < n; ++k) {
    hm.x_labels.push_back("src" + std::to_string(k));
    hm.y_labels.push_back("tgt" + std::to_string(k));
  }
  hm.values.assign(n, std::vector<double>(n, 0.0));
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) hm.values[r][c] = -std::abs(r - c);  // negative values too
  }
  const std::string s = render_heatmap(hm);
  CHECK(count_of(s, "class=\"cell\"") == static_cast<std::size_t>(n * n));
  CHECK(svg_dimension(s, "width") < 900);
  render_and_check("heatmap_large", s, svg_dimension(s, "width"), svg_dimension(s, "height"));
}

TEST_CASE("plots without any value stay readable") {
  LinePlot plot;
  plot.series = {{"empty", {1, 2, 3}, {kNaN, kNaN, kNaN}}};
  const std::string s = render_line_plot(plot);
  CHECK(count_of(s, "class=\"missing\"") == 3);
  CHECK(count_of(s, "class=\"line\"") == 0);
  render_and_check("line_all_missing", s, 720, 450);

  LinePlot mismatched;
  mismatched.series = {{"x", {1, 2}, {1}}};
  CHECK_THROWS_AS(render_line_plot(mismatched), mambamt::InputError);
}
