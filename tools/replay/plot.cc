#include "tools/replay/plot.h"

#include <cairo.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace kvtier::replay {
namespace {

struct Rgb {
  double r, g, b;
};
// The "tab10" palette: distinct for the usual colour-vision deficiencies and on paper.
constexpr Rgb kPalette[] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17},
                            {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29},
                            {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}, {0.74, 0.74, 0.13},
                            {0.09, 0.75, 0.81}};
constexpr int kMarkerKinds = 4;  // circle, square, triangle, diamond
constexpr double kLeft = 90, kRight = 30, kTop = 60, kBottom = 70;  // margins around the plot area

// One axis: data range, ticks, and the mapping from data to pixels along it.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;
  double step = 1;  // linear tick step, for choosing decimals

  double Fraction(double v) const {
    if (log) return (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return (v - lo) / (hi - lo);
  }
};

bool InRange(double v, const Axis& axis) { return v >= axis.lo && v <= axis.hi; }

// The data range widened a little on both sides, so that markers at the extremes stay clear of the
// frame; ticks at 1, 2 or 5 times a power of ten, about `target` of them, inside it.
Axis LinearAxis(double lo, double hi, int target) {
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {  // one value: give it some room
    lo -= std::max(0.5, std::abs(lo) * 0.1);
    hi += std::max(0.5, std::abs(hi) * 0.1);
  }
  double raw = (hi - lo) / target;
  double power = std::pow(10, std::floor(std::log10(raw)));
  double step = power * (raw / power < 1.5   ? 1
                         : raw / power < 3.5 ? 2
                         : raw / power < 7.5 ? 5
                                             : 10);
  Axis axis;
  axis.step = step;
  axis.lo = lo - (hi - lo) * 0.04;
  axis.hi = hi + (hi - lo) * 0.04;
  for (double t = std::ceil(axis.lo / step - 1e-9) * step; t <= axis.hi; t += step) {
    axis.ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  }
  return axis;
}

// Log scale over the data range widened by a few percent: ticks at whole decades, plus 2 and 5
// times them when fewer than three decades would show.
Axis LogAxis(double lo, double hi) {
  if (hi / lo < 1.5) lo /= 1.5, hi *= 1.5;
  Axis axis;
  axis.log = true;
  double pad = std::pow(hi / lo, 0.04);
  axis.lo = lo / pad;
  axis.hi = hi * pad;
  int first = static_cast<int>(std::floor(std::log10(axis.lo)));
  int last = static_cast<int>(std::ceil(std::log10(axis.hi)));
  int decades_inside = 0;
  for (int e = first; e <= last; ++e) decades_inside += InRange(std::pow(10, e), axis);
  for (int e = first; e <= last; ++e) {
    for (double m : {1.0, 2.0, 5.0}) {
      double t = m * std::pow(10, e);
      if ((m == 1 || decades_inside < 3) && InRange(t, axis)) axis.ticks.push_back(t);
    }
  }
  return axis;
}

// Readable tick labels: "0.25", "512", "1.5k", "2.5M".
std::string TickLabel(double v, const Axis& axis) {
  double a = std::abs(v);
  auto trim = [](std::string s) {
    if (s.find('.') != std::string::npos) {
      while (s.back() == '0') s.pop_back();
      if (s.back() == '.') s.pop_back();
    }
    return s;
  };
  if (a >= 1e9) return trim(fmt::format("{:.2f}", v / 1e9)) + "G";
  if (a >= 1e6) return trim(fmt::format("{:.2f}", v / 1e6)) + "M";
  if (a >= 1e3) return trim(fmt::format("{:.2f}", v / 1e3)) + "k";
  int decimals = axis.log ? 3 : std::max(0, static_cast<int>(-std::floor(std::log10(axis.step))));
  return trim(fmt::format("{:.{}f}", v, decimals));
}

absl::Status Validate(const PlotSpec& spec) {
  if (spec.width < 300 || spec.height < 200) {
    return absl::InvalidArgumentError(
        fmt::format("plot size {}x{} is too small (at least 300x200)", spec.width, spec.height));
  }
  if (spec.series.empty()) return absl::InvalidArgumentError("plot has no series");
  for (const PlotSeries& s : spec.series) {
    if (s.x.empty() || s.x.size() != s.y.size()) {
      return absl::InvalidArgumentError(fmt::format("plot series \"{}\" has {} x and {} y values",
                                                    s.label, s.x.size(), s.y.size()));
    }
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) || (spec.log_x && s.x[i] <= 0)) {
        return absl::InvalidArgumentError(
            fmt::format("plot series \"{}\" point {} ({}, {}) cannot be drawn{}", s.label, i,
                        s.x[i], s.y[i], spec.log_x ? " on a log x axis" : ""));
      }
    }
  }
  return absl::OkStatus();
}

// Draws on one cairo context; the plot area is the page minus the margins.
class Painter {
 public:
  Painter(cairo_t* cr, const PlotSpec& spec, Axis x, Axis y)
      : cr_(cr), spec_(spec), x_(std::move(x)), y_(std::move(y)) {
    cairo_select_font_face(cr_, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  }

  void Draw() {
    cairo_set_source_rgb(cr_, 1, 1, 1);
    cairo_paint(cr_);
    DrawGridAndTicks();
    for (size_t i = 0; i < spec_.series.size(); ++i) DrawSeries(spec_.series[i], i);
    DrawFrameAndLabels();
    DrawLegend();
  }

 private:
  double Width() const { return spec_.width - kLeft - kRight; }
  double Height() const { return spec_.height - kTop - kBottom; }
  double Px(double v) const { return kLeft + x_.Fraction(v) * Width(); }
  double Py(double v) const { return kTop + (1 - y_.Fraction(v)) * Height(); }

  // Draws `text` with its anchor point at (x, y); ax/ay pick the anchor (0 left/top .. 1
  // right/bottom).
  void Text(const std::string& text, double x, double y, double ax, double ay, double size) {
    cairo_set_font_size(cr_, size);
    cairo_text_extents_t e;
    cairo_text_extents(cr_, text.c_str(), &e);
    cairo_move_to(cr_, x - ax * e.width - e.x_bearing, y - ay * e.height - e.y_bearing);
    cairo_show_text(cr_, text.c_str());
  }

  void DrawGridAndTicks() {
    cairo_set_line_width(cr_, 1);
    for (double t : x_.ticks) {
      cairo_set_source_rgb(cr_, 0.9, 0.9, 0.9);
      Line(Px(t), kTop, Px(t), kTop + Height());
      cairo_set_source_rgb(cr_, 0.2, 0.2, 0.2);
      Line(Px(t), kTop + Height(), Px(t), kTop + Height() + 5);
      Text(TickLabel(t, x_), Px(t), kTop + Height() + 9, 0.5, 0, 13);
    }
    for (double t : y_.ticks) {
      cairo_set_source_rgb(cr_, 0.9, 0.9, 0.9);
      Line(kLeft, Py(t), kLeft + Width(), Py(t));
      cairo_set_source_rgb(cr_, 0.2, 0.2, 0.2);
      Line(kLeft - 5, Py(t), kLeft, Py(t));
      Text(TickLabel(t, y_), kLeft - 9, Py(t), 1, 0.5, 13);
    }
  }

  void DrawFrameAndLabels() {
    cairo_set_source_rgb(cr_, 0.2, 0.2, 0.2);
    cairo_set_line_width(cr_, 1.2);
    cairo_rectangle(cr_, kLeft, kTop, Width(), Height());
    cairo_stroke(cr_);
    cairo_set_source_rgb(cr_, 0, 0, 0);
    Text(spec_.x_label, kLeft + Width() / 2, spec_.height - 18, 0.5, 1, 15);
    cairo_save(cr_);
    cairo_translate(cr_, 24, kTop + Height() / 2);
    cairo_rotate(cr_, -M_PI / 2);
    Text(spec_.y_label, 0, 0, 0.5, 0.5, 15);
    cairo_restore(cr_);
    cairo_select_font_face(cr_, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
    Text(spec_.title, spec_.width / 2.0, kTop / 2, 0.5, 0.5, 18);
    cairo_select_font_face(cr_, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  }

  void DrawSeries(const PlotSeries& s, size_t index) {
    const Rgb& c = kPalette[index % std::size(kPalette)];
    cairo_set_source_rgb(cr_, c.r, c.g, c.b);
    cairo_set_line_width(cr_, 2.2);
    cairo_set_line_join(cr_, CAIRO_LINE_JOIN_ROUND);
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (i == 0) cairo_move_to(cr_, Px(s.x[i]), Py(s.y[i]));
      cairo_line_to(cr_, Px(s.x[i]), Py(s.y[i]));
    }
    cairo_stroke(cr_);
    for (size_t i = 0; i < s.x.size(); ++i) Marker(Px(s.x[i]), Py(s.y[i]), index);
  }

  // Filled markers of a different shape per series, so lines stay apart in greyscale too.
  void Marker(double x, double y, size_t index) {
    const double r = 4.5;
    switch (index % kMarkerKinds) {
      case 0:
        cairo_arc(cr_, x, y, r, 0, 2 * M_PI);
        break;
      case 1:
        cairo_rectangle(cr_, x - r * 0.85, y - r * 0.85, 1.7 * r, 1.7 * r);
        break;
      case 2:
        cairo_move_to(cr_, x, y - r * 1.15);
        cairo_line_to(cr_, x + r, y + r * 0.75);
        cairo_line_to(cr_, x - r, y + r * 0.75);
        cairo_close_path(cr_);
        break;
      default:
        cairo_move_to(cr_, x, y - r * 1.2);
        cairo_line_to(cr_, x + r, y);
        cairo_line_to(cr_, x, y + r * 1.2);
        cairo_line_to(cr_, x - r, y);
        cairo_close_path(cr_);
    }
    cairo_fill(cr_);
  }

  // Top-right inside the plot area, on a white box so grid lines do not run through the text.
  void DrawLegend() {
    cairo_set_font_size(cr_, 13);
    double text_width = 0;
    for (const PlotSeries& s : spec_.series) {
      cairo_text_extents_t e;
      cairo_text_extents(cr_, s.label.c_str(), &e);
      text_width = std::max(text_width, e.x_advance);
    }
    const double row = 20, pad = 8, sample = 30;
    double w = pad * 3 + sample + text_width, h = pad * 2 + row * spec_.series.size();
    double x0 = kLeft + Width() - w - 10, y0 = kTop + 10;
    cairo_rectangle(cr_, x0, y0, w, h);
    cairo_set_source_rgba(cr_, 1, 1, 1, 0.9);
    cairo_fill_preserve(cr_);
    cairo_set_source_rgb(cr_, 0.6, 0.6, 0.6);
    cairo_set_line_width(cr_, 1);
    cairo_stroke(cr_);
    for (size_t i = 0; i < spec_.series.size(); ++i) {
      double y = y0 + pad + row * (i + 0.5);
      const Rgb& c = kPalette[i % std::size(kPalette)];
      cairo_set_source_rgb(cr_, c.r, c.g, c.b);
      cairo_set_line_width(cr_, 2.2);
      Line(x0 + pad, y, x0 + pad + sample, y);
      Marker(x0 + pad + sample / 2, y, i);
      cairo_set_source_rgb(cr_, 0, 0, 0);
      Text(spec_.series[i].label, x0 + pad * 2 + sample, y, 0, 0.5, 13);
    }
  }

  void Line(double x0, double y0, double x1, double y1) {
    cairo_move_to(cr_, x0, y0);
    cairo_line_to(cr_, x1, y1);
    cairo_stroke(cr_);
  }

  cairo_t* cr_;
  const PlotSpec& spec_;
  Axis x_, y_;
};

}  // namespace

absl::Status WritePlotPng(const PlotSpec& spec, const std::string& path) {
  KVTIER_RETURN_IF_ERROR(Validate(spec));
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const PlotSeries& s : spec.series) {
    auto [xl, xh] = std::minmax_element(s.x.begin(), s.x.end());
    auto [yl, yh] = std::minmax_element(s.y.begin(), s.y.end());
    x_lo = std::min(x_lo, *xl), x_hi = std::max(x_hi, *xh);
    y_lo = std::min(y_lo, *yl), y_hi = std::max(y_hi, *yh);
  }
  Axis x = spec.log_x ? LogAxis(x_lo, x_hi) : LinearAxis(x_lo, x_hi, 8);
  Axis y = LinearAxis(y_lo, y_hi, 6);

  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> surface(
      cairo_image_surface_create(CAIRO_FORMAT_ARGB32, spec.width, spec.height),
      cairo_surface_destroy);
  std::unique_ptr<cairo_t, decltype(&cairo_destroy)> cr(cairo_create(surface.get()), cairo_destroy);
  Painter(cr.get(), spec, std::move(x), std::move(y)).Draw();
  cairo_surface_flush(surface.get());
  cairo_status_t status = cairo_surface_write_to_png(surface.get(), path.c_str());
  if (status != CAIRO_STATUS_SUCCESS) {
    return absl::InternalError(
        fmt::format("cannot write plot to {}: {}", path, cairo_status_to_string(status)));
  }
  return absl::OkStatus();
}

}  // namespace kvtier::replay
