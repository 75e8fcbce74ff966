//! Figures as SVG and PNG, drawn with `plotters`: one panel per value of the panel key, a line
//! with markers and error bars per series.
//!
//! PNG text needs a font; the crate embeds Noto Sans (`ttf-noto-sans`), so plots render the same
//! on a machine without any font installed (a CI runner, a compute node).

use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::OnceLock;

/// One plotted point: x, y and the error bar's ends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct XY {
    pub x: f64,
    pub y: f64,
    pub y_lo: f64,
    pub y_hi: f64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<XY>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Panel {
    pub title: String,
    pub series: Vec<Series>,
    /// Vertical marks (a break-even latency): x and a label.
    pub marks: Vec<(f64, String)>,
}

/// Everything a figure shows. Values are already scaled; log axes hold log10 values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figure {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub y_from_zero: bool,
    /// Category names when x is categorical (x = index).
    pub categories: Option<Vec<String>>,
    pub panels: Vec<Panel>,
}

/// Pixel size of one panel.
const PANEL_SIZE: (u32, u32) = (560, 400);
/// Top padding per legend entry, as a fraction of the data's span.
const LEGEND_ROW_HEADROOM: f64 = 0.1;
/// Panels per row.
const MAX_COLUMNS: usize = 3;
/// Colours of series, in order (colour-blind safe, Okabe & Ito).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

fn register_font() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        // The embedded font is valid; should it not be, text is simply missing from PNGs.
        let _ =
            plotters::style::register_font("sans-serif", FontStyle::Normal, ttf_noto_sans::REGULAR);
    });
}

/// Total image size for `n` panels.
fn size(n: usize) -> (u32, u32) {
    let cols = n.clamp(1, MAX_COLUMNS);
    let rows = n.max(1).div_ceil(cols);
    (PANEL_SIZE.0 * cols as u32, PANEL_SIZE.1 * rows as u32 + 40)
}

/// Writes `svg` and `png` renderings of `fig`.
pub fn render(fig: &Figure, svg: &Path, png: &Path) -> Result<(), String> {
    register_font();
    let dims = size(fig.panels.len());
    {
        let root = SVGBackend::new(svg, dims).into_drawing_area();
        draw(root, fig).map_err(|e| format!("{}: {e}", svg.display()))?;
    }
    let root = BitMapBackend::new(png, dims).into_drawing_area();
    draw(root, fig).map_err(|e| format!("{}: {e}", png.display()))
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, fig: &Figure) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let root = root.titled(&fig.title, ("sans-serif", 22)).map_err(e)?;
    let cols = fig.panels.len().clamp(1, MAX_COLUMNS);
    let rows = fig.panels.len().max(1).div_ceil(cols);
    let areas = root.split_evenly((rows, cols));
    for (panel, area) in fig.panels.iter().zip(areas) {
        draw_panel(&area, fig, panel)?;
    }
    root.present().map_err(e)
}

fn bounds(fig: &Figure, panel: &Panel) -> ((f64, f64), (f64, f64)) {
    let pts = panel.series.iter().flat_map(|s| &s.points);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for p in pts {
        x0 = x0.min(p.x);
        x1 = x1.max(p.x);
        y0 = y0.min(p.y_lo.min(p.y));
        y1 = y1.max(p.y_hi.max(p.y));
    }
    for (x, _) in &panel.marks {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
    }
    if x0 > x1 {
        (x0, x1) = (0.0, 1.0);
    }
    if y0 > y1 {
        (y0, y1) = (0.0, 1.0);
    }
    if fig.y_from_zero && !fig.log_y {
        y0 = y0.min(0.0);
    }
    let pad = |lo: f64, hi: f64, frac: f64| {
        let span = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
        (lo - span * frac, hi + span * frac)
    };
    let (x0, x1) = pad(x0, x1, 0.05);
    // Headroom for the legend in the upper right corner, a row per entry.
    let entries = (panel.series.len() + panel.marks.len()) as f64;
    let (y0p, _) = pad(y0, y1, 0.08);
    let (_, y1) = pad(y0, y1, 0.08 + LEGEND_ROW_HEADROOM * entries);
    let y0 = if fig.y_from_zero && !fig.log_y && y0 >= 0.0 {
        y0.max(0.0).min(y0p.max(0.0))
    } else {
        y0p
    };
    ((x0, x1), (y0, y1))
}

/// A tick label; on a log axis (values are log10) only powers of ten get one.
fn tick(v: f64, log: bool) -> String {
    if !log {
        return crate::units::format_number(v);
    }
    let e = v.round();
    if (v - e).abs() > 1e-6 {
        return String::new();
    }
    crate::units::format_number(10f64.powf(e))
}

/// Ticks to ask for on a log axis spanning `lo..hi` decades: one per half decade.
fn log_ticks(lo: f64, hi: f64) -> usize {
    (((hi - lo) * 2.0).ceil() as usize + 1).clamp(2, 41)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    fig: &Figure,
    panel: &Panel,
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let ((x0, x1), (y0, y1)) = bounds(fig, panel);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 17))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(e)?;
    let categories = fig.categories.clone();
    let x_fmt = move |v: &f64| match &categories {
        Some(names) => {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        }
        None => tick(*v, fig.log_x),
    };
    let y_fmt = |v: &f64| tick(*v, fig.log_y);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(&fig.x_label)
        .y_desc(&fig.y_label)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt);
    mesh.light_line_style(WHITE.mix(0.0)).label_style(("sans-serif", 13));
    if let Some(names) = &fig.categories {
        mesh.x_labels(names.len() * 2 + 1);
    } else if fig.log_x {
        mesh.x_labels(log_ticks(x0, x1));
    }
    if fig.log_y {
        mesh.y_labels(log_ticks(y0, y1));
    }
    mesh.draw().map_err(e)?;
    for (i, s) in panel.series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let style = ShapeStyle::from(&color).stroke_width(2);
        let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.y)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), style))
            .map_err(e)?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        chart
            .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 3, color.filled())))
            .map_err(e)?;
        let bars =
            s.points.iter().filter(|p| p.y_hi > p.y_lo).map(|p| {
                ErrorBar::new_vertical(p.x, p.y_lo, p.y, p.y_hi, color.stroke_width(1), 8)
            });
        chart.draw_series(bars).map_err(e)?;
    }
    for (x, label) in &panel.marks {
        let line = vec![(*x, y0), (*x, y1)];
        let style = ShapeStyle::from(&BLACK.mix(0.6)).stroke_width(1);
        chart
            .draw_series(std::iter::once(PathElement::new(line, style)))
            .map_err(e)?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y - 6), (x, y + 6)], style));
    }
    if !panel.series.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(("sans-serif", 13))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(e)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_svg_and_png() {
        let dir = tempfile::tempdir().unwrap();
        let xy = |x: f64, y: f64| XY { x, y, y_lo: y * 0.9, y_hi: y * 1.1 };
        let fig = Figure {
            title: "Throughput vs persist-barrier latency".into(),
            x_label: "persist-barrier latency (µs)".into(),
            y_label: "kTPS".into(),
            y_from_zero: true,
            panels: vec![Panel {
                title: "tpcb".into(),
                series: vec![Series {
                    name: "inplace".into(),
                    points: vec![xy(0.0, 10.0), xy(5.0, 4.0)],
                }],
                marks: vec![(3.2, "break-even".into())],
            }],
            ..Figure::default()
        };
        let (svg, png) = (dir.path().join("f.svg"), dir.path().join("f.png"));
        render(&fig, &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("inplace"));
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }
}
