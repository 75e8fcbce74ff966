//! Figures as SVG and PNG, drawn with `plotters`: one panel per value of the panel key, a line
//! with markers and error bars per series.
//!
//! PNG text needs a font; the crate embeds Noto Sans (`ttf-noto-sans`), so plots render the same
//! on a machine without any font installed (a CI runner, a compute node). PNG text is drawn by
//! [`crate::pngtext`], not by plotters (whose glyph placement is off by a pixel per glyph).
//!
//! The paper's values are drawn beside ours in black: a dashed vertical line per value along x
//! (a break-even latency), a hollow diamond per value at a plotted point; each has a legend
//! entry starting with "paper".

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::text_anchor;
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

/// A value the paper gives, in the plot's coordinates (already scaled, log10 on log axes).
#[derive(Clone, Debug, PartialEq)]
pub enum Reference {
    /// A value along x (a break-even latency): a dashed vertical line.
    X { x: f64, label: String },
    /// The paper's value at one plotted point: a hollow diamond per value (two for a range,
    /// joined by a dashed line), `short` beside it (`≈ 1.5×`) and `label` in the legend.
    Point { x: f64, ys: Vec<f64>, label: String, short: String },
    /// The interval a claim accepts, drawn as a grey band beside the paper's marker: along y at
    /// `x` (a ratio or value claim's point), or along x over the whole panel (`x: None`, a
    /// break-even or threshold). Infinite ends reach the panel's edge.
    Accepted { x: Option<f64>, lo: f64, hi: f64 },
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Panel {
    pub title: String,
    pub series: Vec<Series>,
    /// Vertical marks (a break-even latency we measured): x and a label.
    pub marks: Vec<(f64, String)>,
    /// The paper's values, drawn beside ours.
    pub references: Vec<Reference>,
}

/// Everything a figure shows. Values are already scaled; log axes hold log10 values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figure {
    pub title: String,
    /// A smaller line under the title: what was run where and when (host, date, commit).
    pub subtitle: String,
    /// A line under the subtitle, in the paper's black: what the figure would otherwise let a
    /// reader misread (empty: none, and no room taken).
    pub note: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub y_from_zero: bool,
    /// Category names when x is categorical (x = index): drawn as points, not joined by lines
    /// that would suggest a trend between workloads or configurations.
    pub categories: Option<Vec<String>>,
    /// What the panels are split by (`threads`): a panel is titled `threads = 2`, not `2`.
    pub panel_key: Option<String>,
    pub panels: Vec<Panel>,
}

/// Pixel size of one panel.
const PANEL_SIZE: (u32, u32) = (560, 420);
/// Room above the panels for the title and the subtitle.
const HEADER_HEIGHT: u32 = 64;
/// ... and for a note under them.
const NOTE_HEIGHT: u32 = 26;

fn header_height(fig: &Figure) -> u32 {
    HEADER_HEIGHT + if fig.note.is_empty() { 0 } else { NOTE_HEIGHT }
}
/// Text sizes in plotters units (the font's pixel height; SVG shows them at size / 1.24 px).
/// Chosen so that text is at least 12 px at the figure's native size.
const TITLE_SIZE: f64 = 26.0;
const SUBTITLE_SIZE: f64 = 17.0;
const CAPTION_SIZE: f64 = 21.0;
const LABEL_SIZE: f64 = 17.0;
/// The paper's values are black, ours are coloured.
const PAPER_COLOR: RGBColor = RGBColor(0, 0, 0);
const GREY: RGBColor = RGBColor(80, 80, 80);
/// Height of one legend row under a panel. The legend sits below the plot, never on the data.
const LEGEND_ROW_PX: u32 = 22;
/// Narrowest figure: room for a title with the quick mark.
const MIN_WIDTH: u32 = 840;
/// Panels per row: two keep a figure 1,120 px wide, so the report shows it at native size.
const MAX_COLUMNS: usize = 2;
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

/// The height of a panel with `legend_rows` rows of legend under its plot.
fn panel_height(legend_rows: usize) -> u32 {
    PANEL_SIZE.1 + LEGEND_ROW_PX * legend_rows as u32 + 8
}

/// Total image size of `fig`: two panels a row, each with the longest legend of them.
pub fn size(fig: &Figure) -> (u32, u32) {
    let n = fig.panels.len();
    let cols = n.clamp(1, MAX_COLUMNS);
    let rows = n.max(1).div_ceil(cols);
    let legend_rows = fig.panels.iter().map(|p| legend(p).len()).max().unwrap_or(0);
    let width = (PANEL_SIZE.0 * cols as u32).max(MIN_WIDTH);
    (width, panel_height(legend_rows) * rows as u32 + header_height(fig))
}

/// The largest size up to `size` at which `text` fits in `width` pixels (SVG fonts run up to
/// ~10% wider than the embedded Noto Sans, hence the margin).
fn fitting(text: &str, size: f64, width: u32) -> f64 {
    let w = crate::pngtext::width(text, size);
    let room = f64::from(width) * 0.9;
    if w <= room || w <= 0.0 {
        size
    } else {
        (size * room / w).max(10.0)
    }
}

/// Writes `svg` and `png` renderings of `fig`.
pub fn render(fig: &Figure, svg: &Path, png: &Path) -> Result<(), String> {
    register_font();
    let dims = size(fig);
    {
        let root = SVGBackend::new(svg, dims).into_drawing_area();
        draw(root, fig).map_err(|e| format!("{}: {e}", svg.display()))?;
    }
    let root = crate::pngtext::CrispText(BitMapBackend::new(png, dims)).into_drawing_area();
    draw(root, fig).map_err(|e| format!("{}: {e}", png.display()))
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, fig: &Figure) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (header, root) = root.split_vertically(header_height(fig));
    let width = header.dim_in_pixel().0 as i32;
    let centred = |size: f64, color: &'static RGBColor| {
        TextStyle::from(("sans-serif", size).into_font())
            .color(color)
            .pos(text_anchor::Pos::new(text_anchor::HPos::Center, text_anchor::VPos::Top))
    };
    let (title, subtitle) = (
        centred(fitting(&fig.title, TITLE_SIZE, width as u32), &BLACK),
        centred(fitting(&fig.subtitle, SUBTITLE_SIZE, width as u32), &GREY),
    );
    header.draw_text(&fig.title, &title, (width / 2, 8)).map_err(e)?;
    header.draw_text(&fig.subtitle, &subtitle, (width / 2, 38)).map_err(e)?;
    if !fig.note.is_empty() {
        let note = centred(fitting(&fig.note, SUBTITLE_SIZE, width as u32), &PAPER_COLOR);
        header.draw_text(&fig.note, &note, (width / 2, 38 + NOTE_HEIGHT as i32)).map_err(e)?;
    }
    let cols = fig.panels.len().clamp(1, MAX_COLUMNS);
    let rows = fig.panels.len().max(1).div_ceil(cols);
    let areas = root.split_evenly((rows, cols));
    for (panel, area) in fig.panels.iter().zip(areas) {
        let (plot_area, legend_area) = area.split_vertically(PANEL_SIZE.1);
        draw_panel(&plot_area, fig, panel)?;
        draw_legend(&legend_area, &legend(panel))?;
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
    for r in &panel.references {
        let (x, ys) = match r {
            Reference::X { x, .. } => (*x, &[][..]),
            Reference::Point { x, ys, .. } => (*x, ys.as_slice()),
            // An interval widens nothing: it is drawn within the panel's data.
            Reference::Accepted { .. } => continue,
        };
        x0 = x0.min(x);
        x1 = x1.max(x);
        for &y in ys {
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
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
    let (y0p, y1) = pad(y0, y1, 0.08);
    let y0 = if fig.y_from_zero && !fig.log_y && y0 >= 0.0 {
        y0.max(0.0).min(y0p.max(0.0))
    } else {
        y0p
    };
    ((x0, x1), (y0, y1))
}

/// What a legend row shows before its text.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Key {
    Series(RGBColor),
    Mark,
    PaperLine,
    PaperPoint,
}

/// A panel's legend rows: each series, each of our marks, each of the paper's values.
fn legend(panel: &Panel) -> Vec<(Key, String)> {
    let mut rows: Vec<(Key, String)> = Vec::new();
    for (i, s) in panel.series.iter().enumerate() {
        rows.push((Key::Series(PALETTE[i % PALETTE.len()]), s.name.clone()));
    }
    for (_, label) in &panel.marks {
        rows.push((Key::Mark, format!("ours: {label}")));
    }
    for r in &panel.references {
        let row = match r {
            Reference::X { label, .. } => (Key::PaperLine, format!("paper: {label}")),
            Reference::Point { label, .. } => (Key::PaperPoint, format!("paper: {label}")),
            Reference::Accepted { .. } => continue,
        };
        if !rows.contains(&row) {
            rows.push(row);
        }
    }
    rows
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    rows: &[(Key, String)],
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let font = ("sans-serif", LABEL_SIZE)
        .into_font()
        .color(&BLACK)
        .pos(text_anchor::Pos::new(text_anchor::HPos::Left, text_anchor::VPos::Center));
    let paper = ShapeStyle::from(&PAPER_COLOR).stroke_width(2);
    let (x, row_height) = (88, LEGEND_ROW_PX as i32);
    for (i, (key, text)) in rows.iter().enumerate() {
        let y = 4 + i as i32 * row_height + row_height / 2;
        match *key {
            Key::Series(color) => {
                let style = ShapeStyle::from(&color).stroke_width(2);
                area.draw(&PathElement::new(vec![(x, y), (x + 24, y)], style)).map_err(e)?;
                area.draw(&Circle::new((x + 12, y), 3, color.filled())).map_err(e)?;
            }
            Key::Mark => {
                let style = ShapeStyle::from(&BLACK.mix(0.6)).stroke_width(1);
                area.draw(&PathElement::new(vec![(x + 12, y - 7), (x + 12, y + 7)], style))
                    .map_err(e)?;
            }
            Key::PaperLine => {
                area.draw(&PathElement::new(vec![(x, y), (x + 9, y)], paper)).map_err(e)?;
                area.draw(&PathElement::new(vec![(x + 15, y), (x + 24, y)], paper)).map_err(e)?;
            }
            Key::PaperPoint => area.draw(&diamond((x + 12, y), paper)).map_err(e)?,
        }
        area.draw_text(text, &font, (x + 34, y)).map_err(e)?;
    }
    Ok(())
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
    let caption = match (&fig.panel_key, panel.title.is_empty()) {
        (Some(key), false) => format!("{key} = {}", panel.title),
        _ => panel.title.clone(),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&caption, ("sans-serif", CAPTION_SIZE))
        .margin(12)
        .x_label_area_size(52)
        .y_label_area_size(76)
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
    mesh.light_line_style(WHITE.mix(0.0))
        .label_style(("sans-serif", LABEL_SIZE))
        .axis_desc_style(("sans-serif", LABEL_SIZE));
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
        if fig.categories.is_none() {
            chart.draw_series(LineSeries::new(pts.clone(), style)).map_err(e)?;
        }
        chart
            .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 3, color.filled())))
            .map_err(e)?;
        let bars =
            s.points.iter().filter(|p| p.y_hi > p.y_lo).map(|p| {
                ErrorBar::new_vertical(p.x, p.y_lo, p.y, p.y_hi, color.stroke_width(1), 8)
            });
        chart.draw_series(bars).map_err(e)?;
    }
    for (x, _) in &panel.marks {
        let line = vec![(*x, y0), (*x, y1)];
        let style = ShapeStyle::from(&BLACK.mix(0.6)).stroke_width(1);
        chart.draw_series(std::iter::once(PathElement::new(line, style))).map_err(e)?;
    }
    draw_references(&mut chart, panel, fig.categories.is_none(), (x0, x1), (y0, y1))?;
    Ok(())
}

/// A box in pixels: left, top, right, bottom.
type PixelBox = [i32; 4];

fn overlap(a: &PixelBox, b: &PixelBox) -> bool {
    a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]
}

/// Whether the segment `a`–`b` passes through `area` (Liang–Barsky clipping).
fn crosses(area: &PixelBox, a: (i32, i32), b: (i32, i32)) -> bool {
    let (dx, dy) = (f64::from(b.0 - a.0), f64::from(b.1 - a.1));
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    let edges = [
        (-dx, f64::from(a.0 - area[0])),
        (dx, f64::from(area[2] - a.0)),
        (-dy, f64::from(a.1 - area[1])),
        (dy, f64::from(area[3] - a.1)),
    ];
    for (p, q) in edges {
        if p == 0.0 {
            if q < 0.0 {
                return false;
            }
        } else if p < 0.0 {
            t0 = t0.max(q / p);
        } else {
            t1 = t1.min(q / p);
        }
        if t0 > t1 {
            return false;
        }
    }
    true
}

/// Half the width of a paper diamond, and the gap a label keeps from it.
const DIAMOND_HALF_PX: i32 = 7;
const LABEL_GAP_PX: i32 = 3;
/// What covering one soft obstacle costs a label's place, in candidate ranks: a label moves up
/// to a row away (five ranks) from its marker rather than cross a line.
const SOFT_COST: usize = 5;
/// SVG text is laid out in the viewer's sans-serif, up to ~10% wider than the embedded Noto
/// Sans the label boxes are measured in.
const SVG_WIDTH_SLACK: f64 = 1.1;

/// What the label of a paper marker must stay clear of, in pixels. `hard`: the paper's markers
/// and the labels placed so far (a label over a marker or a label hides a value); `soft`: our
/// points, lines and error bars, the accepted intervals and vertical lines (a label over them
/// stays readable, so it crosses them only when that keeps it beside its marker).
struct Obstacles {
    area: PixelBox,
    hard: Vec<PixelBox>,
    soft_boxes: Vec<PixelBox>,
    soft_segments: Vec<((i32, i32), (i32, i32))>,
}

/// Where a label goes: its box, and the anchor it is drawn from (`HPos` at the box's left,
/// right or centre; vertically at its centre).
#[derive(Clone, Copy)]
struct LabelPlace {
    area: PixelBox,
    h: text_anchor::HPos,
}

impl LabelPlace {
    fn anchor(&self) -> (i32, i32) {
        let y = (self.area[1] + self.area[3]) / 2;
        match self.h {
            text_anchor::HPos::Left => (self.area[0], y),
            text_anchor::HPos::Right => (self.area[2], y),
            text_anchor::HPos::Center => ((self.area[0] + self.area[2]) / 2, y),
        }
    }
}

impl Obstacles {
    /// The place for a `width` × `height` label of the marker centred at `at`, nearest first:
    /// level beside it (on the side that faces the panel's middle, `right` when the marker is
    /// in the left half, then the other), centred above and below, then one and two rows up
    /// and down. Each candidate costs its rank plus [`SOFT_COST`] per soft obstacle it covers; the
    /// cheapest that covers nothing hard and stays inside the plot wins, and is then itself an
    /// obstacle. `None` when every candidate covers something hard: the value is still in the
    /// legend, and a label over a marker would hide one.
    fn place(
        &mut self,
        at: (i32, i32),
        (width, height): (i32, i32),
        right: bool,
    ) -> Option<LabelPlace> {
        use text_anchor::HPos;
        let (x, y) = at;
        let offset = DIAMOND_HALF_PX + LABEL_GAP_PX;
        let row = height + 4;
        let beside = |toward_right: bool, centre_y: i32| {
            let (top, bottom) = (centre_y - height / 2, centre_y - height / 2 + height);
            if toward_right {
                LabelPlace { area: [x + offset, top, x + offset + width, bottom], h: HPos::Left }
            } else {
                LabelPlace { area: [x - offset - width, top, x - offset, bottom], h: HPos::Right }
            }
        };
        let centred = |centre_y: i32| {
            let (left, top) = (x - width / 2, centre_y - height / 2);
            LabelPlace { area: [left, top, left + width, top + height], h: HPos::Center }
        };
        let stacked = offset + height / 2;
        let mut candidates =
            vec![beside(right, y), beside(!right, y), centred(y - stacked), centred(y + stacked)];
        for rows in [1, 2] {
            for dy in [-rows * row, rows * row] {
                candidates.extend([beside(right, y + dy), beside(!right, y + dy)]);
            }
            if rows == 1 {
                candidates.extend([centred(y - stacked - row), centred(y + stacked + row)]);
            }
        }
        let inside = |b: &PixelBox| {
            b[0] >= self.area[0]
                && b[1] >= self.area[1]
                && b[2] <= self.area[2]
                && b[3] <= self.area[3]
        };
        let best = candidates
            .into_iter()
            .enumerate()
            .filter(|(_, c)| inside(&c.area) && !self.hard.iter().any(|o| overlap(&c.area, o)))
            .min_by_key(|(rank, c)| rank + SOFT_COST * self.soft_count(&c.area))
            .map(|(_, c)| c)?;
        self.hard.push(best.area);
        Some(best)
    }

    fn soft_count(&self, b: &PixelBox) -> usize {
        let boxes = self.soft_boxes.iter().filter(|o| overlap(b, o)).count();
        boxes + self.soft_segments.iter().filter(|(p, q)| crosses(b, *p, *q)).count()
    }
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The paper's values of `panel`: dashed black lines along x, hollow black diamonds at points,
/// grey accepted intervals, then each diamond's value beside it where it covers no marker and
/// no other label ([`Obstacles::place`]).
fn draw_references<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    panel: &Panel,
    joined: bool,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let line = ShapeStyle::from(&PAPER_COLOR).stroke_width(2);
    let band = ShapeStyle::from(&PAPER_COLOR.mix(0.12)).filled();
    let clip = |v: f64, lo: f64, hi: f64| if v.is_nan() { lo } else { v.clamp(lo, hi) };
    for r in &panel.references {
        match r {
            Reference::Accepted { x: None, lo, hi } => {
                let (a, b) = (clip(*lo, x0, x1), clip(*hi, x0, x1));
                let rect = Rectangle::new([(a, y0), (b, y1)], band);
                chart.draw_series(std::iter::once(rect)).map_err(e)?;
            }
            Reference::Accepted { x: Some(x), lo, hi } => {
                let (a, b) = (clip(*lo, y0, y1), clip(*hi, y0, y1));
                let wide = ShapeStyle::from(&PAPER_COLOR.mix(0.25)).stroke_width(8);
                let path = PathElement::new(vec![(*x, a), (*x, b)], wide);
                chart.draw_series(std::iter::once(path)).map_err(e)?;
            }
            Reference::X { x, .. } => {
                chart
                    .draw_series(DashedLineSeries::new(vec![(*x, y0), (*x, y1)], 8, 5, line))
                    .map_err(e)?;
            }
            Reference::Point { x, ys, .. } => {
                if ys.len() > 1 {
                    let (lo, hi) = span(ys);
                    let thin = ShapeStyle::from(&PAPER_COLOR).stroke_width(1);
                    chart
                        .draw_series(DashedLineSeries::new(vec![(*x, lo), (*x, hi)], 4, 4, thin))
                        .map_err(e)?;
                }
                chart.draw_series(ys.iter().map(|&y| diamond((*x, y), line))).map_err(e)?;
            }
        }
    }
    let mut obstacles = obstacles(chart, panel, joined, (y0, y1));
    let font = |h: text_anchor::HPos| {
        ("sans-serif", LABEL_SIZE)
            .into_font()
            .color(&PAPER_COLOR)
            .pos(text_anchor::Pos::new(h, text_anchor::VPos::Center))
    };
    let height = (LABEL_SIZE / 1.24).ceil() as i32;
    // Labels already drawn, by marker pixel and text: two claims on one point, or one claim's
    // groups, would print the same text twice at the same place (`≈ 1.5×≈ 1.5×`).
    let mut drawn: Vec<((i32, i32), &str)> = Vec::new();
    for r in &panel.references {
        let Reference::Point { x, ys, short, .. } = r else { continue };
        let top = span(ys).1;
        let at = chart.backend_coord(&(*x, top));
        let repeat = |d: &&((i32, i32), &str)| {
            d.0 .0 == at.0 && (d.0 .1 - at.1).abs() < height && d.1 == short.as_str()
        };
        if short.is_empty() || drawn.iter().any(|d| repeat(&d)) {
            continue;
        }
        let width = (crate::pngtext::width(short, LABEL_SIZE) * SVG_WIDTH_SLACK).ceil() as i32;
        let Some(place) = obstacles.place(at, (width, height), *x <= (x0 + x1) / 2.0) else {
            continue;
        };
        drawn.push((at, short));
        let (ax, ay) = place.anchor();
        let text = EmptyElement::at((*x, top))
            + Text::new(short.clone(), (ax - at.0, ay - at.1), font(place.h));
        chart.draw_series(std::iter::once(text)).map_err(e)?;
    }
    Ok(())
}

/// The lowest and highest of `ys`.
fn span(ys: &[f64]) -> (f64, f64) {
    let lo = ys.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ys.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// What a paper label in `panel` must avoid, in the chart's pixels; `joined`: the series are
/// drawn as lines (not categories).
fn obstacles<DB: DrawingBackend>(
    chart: &Chart<'_, DB>,
    panel: &Panel,
    joined: bool,
    (y0, y1): (f64, f64),
) -> Obstacles {
    let px = |x: f64, y: f64| chart.backend_coord(&(x, y));
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let around = |(x, y): (i32, i32), half: i32| [x - half, y - half, x + half, y + half];
    let mut o = Obstacles {
        area: [xs.start, ys.start, xs.end, ys.end],
        hard: Vec::new(),
        soft_boxes: Vec::new(),
        soft_segments: Vec::new(),
    };
    for r in &panel.references {
        match r {
            Reference::Point { x, ys, .. } => {
                o.hard.extend(ys.iter().map(|&y| around(px(*x, y), DIAMOND_HALF_PX + 1)));
                let (lo, hi) = span(ys);
                let (a, b) = (px(*x, hi), px(*x, lo));
                o.hard.push([a.0 - 1, a.1, a.0 + 1, b.1]);
            }
            Reference::Accepted { x: Some(x), lo, hi } => {
                let (a, b) = (px(*x, hi.min(y1)), px(*x, lo.max(y0)));
                o.soft_boxes.push([a.0 - 4, a.1, a.0 + 4, b.1]);
            }
            Reference::X { x, .. } => o.soft_segments.push((px(*x, y0), px(*x, y1))),
            Reference::Accepted { x: None, .. } => {}
        }
    }
    for (x, _) in &panel.marks {
        o.soft_segments.push((px(*x, y0), px(*x, y1)));
    }
    for s in &panel.series {
        for p in &s.points {
            o.soft_boxes.push(around(px(p.x, p.y), 4));
            if p.y_hi > p.y_lo {
                o.soft_segments.push((px(p.x, p.y_lo), px(p.x, p.y_hi)));
            }
        }
        for w in s.points.windows(2).filter(|_| joined) {
            o.soft_segments.push((px(w[0].x, w[0].y), px(w[1].x, w[1].y)));
        }
    }
    o
}

/// A hollow diamond, 14 px across, centred on `at` (plotters has no diamond marker).
struct Diamond<C> {
    at: C,
    style: ShapeStyle,
}

fn diamond<C>(at: C, style: ShapeStyle) -> Diamond<C> {
    Diamond { at, style }
}

impl<'a, C> PointCollection<'a, C> for &'a Diamond<C> {
    type Point = &'a C;
    type IntoIter = std::iter::Once<&'a C>;
    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for Diamond<C> {
    fn draw<I: Iterator<Item = plotters_backend::BackendCoord>>(
        &self,
        mut points: I,
        backend: &mut DB,
        _: (u32, u32),
    ) -> Result<(), plotters_backend::DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = points.next() else { return Ok(()) };
        let path = [(x, y - 7), (x + 7, y), (x, y + 7), (x - 7, y), (x, y - 7)];
        backend.draw_path(path, &self.style)
    }
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
                references: vec![
                    Reference::X { x: 3.5, label: "be ≈ 3.5 µs".into() },
                    Reference::Point {
                        x: 0.0,
                        ys: vec![15.0],
                        label: "ratio ≈ 1.5×".into(),
                        short: "≈ 1.5×".into(),
                    },
                ],
            }],
            ..Figure::default()
        };
        let (svg, png) = (dir.path().join("f.svg"), dir.path().join("f.png"));
        render(&fig, &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg") && text.contains("inplace"));
        // The paper's values have legend rows and a marker of their own.
        assert!(text.contains("paper: be ≈ 3.5 µs"), "{text}");
        assert!(text.contains("paper: ratio ≈ 1.5×") && text.contains("\n≈ 1.5×\n"));
        assert!(text.contains("ours: break-even"));
        // A diamond is a closed four-sided polyline, 14 px across.
        assert!(text.lines().any(|l| l.contains("<polyline")
            && l.matches(' ').count() > 5
            && l.contains("stroke=\"#000000\"")));
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }

    #[test]
    fn the_paper_widens_the_axes_to_show_its_values() {
        let panel = Panel {
            series: vec![Series {
                name: "s".into(),
                points: vec![XY { x: 0.0, y: 10.0, y_lo: 10.0, y_hi: 10.0 }],
            }],
            references: vec![
                Reference::X { x: 15.0, label: "x".into() },
                Reference::Point { x: 0.0, ys: vec![40.0], label: "p".into(), short: "p".into() },
            ],
            ..Panel::default()
        };
        let fig = Figure { panels: vec![panel.clone()], ..Figure::default() };
        let ((_, x1), (_, y1)) = bounds(&fig, &panel);
        assert!(x1 > 15.0 && y1 > 40.0, "{x1} {y1}");
        assert_eq!(legend(&panel).len(), 3);
    }

    /// thesis-fig5.7 printed `≥ 1.00e8 writes≥ 1.00e8 writes`: the labels of two neighbouring
    /// configurations' markers, one left of the middle (label to its right) and one right of it
    /// (label to its left), covered the same pixels.
    #[test]
    fn labels_of_neighbouring_paper_markers_do_not_overlap() {
        let dir = tempfile::tempdir().unwrap();
        let point = |x: f64| Reference::Point {
            x,
            ys: vec![5.0],
            label: format!("claim at {x}"),
            short: "≥ 1.00e8 writes".into(),
        };
        let fig = Figure {
            panels: vec![Panel {
                series: vec![Series {
                    name: "s".into(),
                    points: vec![
                        XY { x: 0.0, y: 1.0, y_lo: 1.0, y_hi: 1.0 },
                        XY { x: 1.0, y: 1.0, y_lo: 1.0, y_hi: 1.0 },
                    ],
                }],
                references: vec![point(0.45), point(0.55), point(0.0)],
                ..Panel::default()
            }],
            ..Figure::default()
        };
        let (svg, png) = (dir.path().join("f.svg"), dir.path().join("f.png"));
        render(&fig, &svg, &png).unwrap();
        let svg = std::fs::read_to_string(&svg).unwrap();
        let (labels, diamonds) = label_and_diamond_boxes(&svg, "≥ 1.00e8 writes");
        assert_eq!(labels.len(), 3, "{labels:?}");
        for (i, a) in labels.iter().enumerate() {
            for b in labels.iter().skip(i + 1).chain(&diamonds) {
                assert!(!overlap(a, b), "label {a:?} overlaps {b:?}: {labels:?}");
            }
        }
    }

    /// The pixel boxes of `svg`'s texts that read `label` and of its paper diamonds (closed
    /// five-point black polylines), as the file places them: a text's box from its anchor,
    /// its `dy` (plotters' vertical anchor) and its width in the embedded font.
    fn label_and_diamond_boxes(svg: &str, label: &str) -> (Vec<PixelBox>, Vec<PixelBox>) {
        let lines: Vec<&str> = svg.lines().collect();
        let attr = |l: &str, name: &str| -> String {
            let at = l.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
            l[at..].split('"').next().unwrap().to_string()
        };
        let num = |l: &str, name: &str| attr(l, name).parse::<f64>().unwrap();
        let texts = lines.windows(2).filter(|w| w[1] == label && w[0].starts_with("<text"));
        let labels = texts
            .map(|w| {
                let (x, y, px) = (num(w[0], "x"), num(w[0], "y"), num(w[0], "font-size"));
                let width = crate::pngtext::width(label, px * 1.24);
                let left = match attr(w[0], "text-anchor").as_str() {
                    "start" => x,
                    "end" => x - width,
                    _ => x - width / 2.0,
                };
                let top = match attr(w[0], "dy").as_str() {
                    "0.76em" => y,
                    "0.5ex" => y - px / 2.0,
                    _ => y - px,
                };
                [left, top, left + width, top + px].map(|v| v.round() as i32)
            })
            .collect();
        let diamonds = lines
            .iter()
            .filter(|l| l.starts_with("<polyline") && l.contains("stroke=\"#000000\""))
            .filter_map(|l| {
                let pts: Vec<(i32, i32)> = attr(l, "points")
                    .split_whitespace()
                    .filter_map(|p| p.split_once(','))
                    .map(|(x, y)| (x.parse().unwrap(), y.parse().unwrap()))
                    .collect();
                let closed = pts.len() == 5 && pts[0] == pts[4] && pts[1].0 - pts[0].0 == 7;
                closed.then(|| [pts[3].0, pts[0].1, pts[1].0, pts[2].1])
            })
            .collect();
        (labels, diamonds)
    }

    /// pelley-fig3-1 drew `≥ 0.9×` beside the diamond at 10 pages over the diamond at 20, and
    /// pelley-fig5-1 two claims' `≈ 1.5×` over each other and over their neighbours' diamonds:
    /// labels dodged the labels drawn before them, never the paper's markers.
    #[test]
    fn paper_labels_overlap_neither_each_other_nor_any_paper_marker() {
        let dir = tempfile::tempdir().unwrap();
        let short = "≈ 1.5×";
        let point = |x: f64, y: f64, claim: &str| Reference::Point {
            x,
            ys: vec![y],
            label: format!("{claim} {short}"),
            short: short.into(),
        };
        // Markers half an x unit (about 37 px) apart: closer than a label and its gap are
        // wide; at x = 3 and 7 a second claim's marker 10% of the axis lower.
        let mut references: Vec<Reference> =
            (0..19).map(|i| point(f64::from(i) / 2.0, 50.0, "a")).collect();
        references.extend([point(3.0, 40.0, "b"), point(7.0, 40.0, "b")]);
        let fig = Figure {
            panels: vec![Panel {
                series: vec![Series {
                    name: "s".into(),
                    points: vec![
                        XY { x: 0.0, y: 0.0, y_lo: 0.0, y_hi: 0.0 },
                        XY { x: 9.0, y: 100.0, y_lo: 100.0, y_hi: 100.0 },
                    ],
                }],
                references,
                ..Panel::default()
            }],
            ..Figure::default()
        };
        let (svg, png) = (dir.path().join("f.svg"), dir.path().join("f.png"));
        render(&fig, &svg, &png).unwrap();
        let (labels, diamonds) =
            label_and_diamond_boxes(&std::fs::read_to_string(&svg).unwrap(), short);
        // 21 on the plot, one for each claim's legend row.
        assert_eq!(diamonds.len(), 23, "{diamonds:?}");
        assert!(labels.len() >= 15, "a label per marker where there is room: {labels:?}");
        for (i, a) in labels.iter().enumerate() {
            for b in labels.iter().skip(i + 1).chain(&diamonds) {
                assert!(!overlap(a, b), "label {a:?} overlaps {b:?}\n{labels:?}\n{diamonds:?}");
            }
        }
    }

    #[test]
    fn a_note_is_drawn_under_the_subtitle_and_takes_room_only_when_given() {
        let dir = tempfile::tempdir().unwrap();
        let mut fig = Figure { panels: vec![Panel::default()], ..Figure::default() };
        let plain = size(&fig).1;
        fig.note = "Above 1x: no slowdown measured".into();
        assert_eq!(size(&fig).1, plain + NOTE_HEIGHT);
        let (svg, png) = (dir.path().join("f.svg"), dir.path().join("f.png"));
        render(&fig, &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("\nAbove 1x: no slowdown measured\n"), "{text}");
    }

    #[test]
    fn figures_fit_the_report_at_native_width() {
        let panels = |n| Figure { panels: vec![Panel::default(); n], ..Figure::default() };
        assert_eq!(size(&panels(1)).0, MIN_WIDTH);
        assert_eq!(size(&panels(3)).0, 1120);
        assert!(size(&panels(3)).1 > 2 * PANEL_SIZE.1);
    }
}
