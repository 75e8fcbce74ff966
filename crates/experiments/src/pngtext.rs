//! PNG text that reads like text: a [`DrawingBackend`] wrapper that rasterises strings itself,
//! placing every glyph at its pen position.
//!
//! Why: plotters 0.3.7's `ab_glyph` text path (`style/font/ab_glyph.rs`) draws each glyph's
//! bitmap at the pen position without its left side bearing (`px_bounds().min.x` is dropped),
//! truncates the advance to whole pixels, and puts the glyph's top at
//! `(size / 2 + px_bounds.min.y) as i32`. That cast rounds towards zero, so glyphs taller than
//! half the size (`l`, `1`, `b`) land a pixel lower than short ones (`a`, `.`, `c`): at the
//! 10-px text of a figure this reads "|atency", "1·5", "tp cb". SVG text is laid out by the
//! browser and is not affected.
//!
//! Here each glyph is outlined at a fractional pen position on one shared baseline (kerning
//! included) and its coverage blended pixel by pixel, so the result matches the layout plotters
//! estimates for the same size (the legend boxes and label areas it sizes still fit).

use ab_glyph::{Font, FontRef, PxScale, ScaleFont};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};
use std::sync::OnceLock;

/// The font every PNG string is drawn in (the one `plot` registers for measuring).
fn font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(ttf_noto_sans::REGULAR).ok()).as_ref()
}

/// One glyph's pixels: offsets from the text's anchor (before rotation) and coverage.
pub type Coverage = Vec<(i32, i32, f32)>;

/// The advance width of `text` at plotters size `size`, in pixels (0 without the font).
pub fn width(text: &str, size: f64) -> f64 {
    let Some(font) = font() else { return 0.0 };
    f64::from(advance(&font.as_scaled(PxScale::from(size as f32)), text))
}

fn advance(scaled: &impl ScaleFont<&'static FontRef<'static>>, text: &str) -> f32 {
    let mut width = 0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(p) = prev {
            width += scaled.kern(p, id);
        }
        width += scaled.h_advance(id);
        prev = Some(id);
    }
    width
}

/// The pixels of `text` at plotters size `size` (the font's pixel height, as plotters' own
/// `ab_glyph` backend measures it), anchored as `anchor` says, in unrotated offsets.
pub fn rasterize(text: &str, size: f64, h: HPos, v: VPos) -> Coverage {
    let Some(font) = font() else { return Vec::new() };
    let scaled = font.as_scaled(PxScale::from(size as f32));
    let width = advance(&scaled, text);
    // The box plotters reserves for the text is `size / 1.24` high; the font's ascent and
    // descent are fitted into it so that text stays where plotters made room for it.
    let box_height = (size / 1.24) as f32;
    let (ascent, descent) = (scaled.ascent(), scaled.descent());
    let baseline_in_box = box_height * ascent / (ascent - descent);
    let left = match h {
        HPos::Left => 0.0,
        HPos::Center => -width / 2.0,
        HPos::Right => -width,
    };
    let top = match v {
        VPos::Top => 0.0,
        VPos::Center => -box_height / 2.0,
        VPos::Bottom => -box_height,
    };
    let baseline = top + baseline_in_box;
    let mut out = Vec::new();
    let mut pen = left;
    let mut prev = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(p) = prev {
            pen += scaled.kern(p, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(scaled.scale(), ab_glyph::point(pen, baseline));
        if let Some(outlined) = font.outline_glyph(glyph) {
            let min = outlined.px_bounds().min;
            let (x0, y0) = (min.x.round() as i32, min.y.round() as i32);
            outlined.draw(|x, y, c| {
                if c > 0.0 {
                    out.push((x0 + x as i32, y0 + y as i32, c.min(1.0)));
                }
            });
        }
        pen += scaled.h_advance(id);
    }
    out
}

/// `inner` with its text drawn by [`rasterize`]; everything else passes through.
pub struct CrispText<B: DrawingBackend>(pub B);

impl<B: DrawingBackend> DrawingBackend for CrispText<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }
    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.ensure_prepared()
    }
    fn present(&mut self) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.present()
    }
    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.draw_circle(center, radius, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.fill_polygon(vert, style)
    }
    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        self.0.blit_bitmap(pos, size, src)
    }
    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<B::ErrorType>> {
        self.0.estimate_text_size(text, style)
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<B::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let anchor = style.anchor();
        let transform = style.transform();
        let (w, h) = self.0.get_size();
        for (dx, dy, coverage) in rasterize(text, style.size(), anchor.h_pos, anchor.v_pos) {
            let (dx, dy) = transform.transform(dx, dy);
            let (x, y) = (pos.0 + dx, pos.1 + dy);
            if x >= 0 && y >= 0 && (x as u32) < w && (y as u32) < h {
                let alpha = color.alpha * f64::from(coverage);
                self.0.draw_pixel((x, y), BackendColor { alpha, rgb: color.rgb })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lowest ink row of `text`: its baseline, give or take antialiasing.
    fn bottom(text: &str) -> i32 {
        let px = rasterize(text, 16.0, HPos::Left, VPos::Top);
        px.iter().filter(|p| p.2 > 0.5).map(|p| p.1).max().unwrap()
    }

    #[test]
    fn tall_and_short_glyphs_share_one_baseline() {
        // plotters 0.3.7 put `l` and `1` a pixel below `a` and `.`: "|atency", "1·5".
        assert_eq!(bottom("l"), bottom("a"));
        assert_eq!(bottom("1"), bottom("."));
        assert_eq!(bottom("b"), bottom("c"));
    }

    #[test]
    fn glyphs_keep_their_side_bearings() {
        // "tp cb": the gap between two letters is the font's, not a dropped bearing.
        let ink = |text: &str| {
            let px = rasterize(text, 16.0, HPos::Left, VPos::Top);
            let xs: std::collections::BTreeSet<i32> =
                px.iter().filter(|p| p.2 > 0.3).map(|p| p.0).collect();
            xs
        };
        let cols = ink("tpcb");
        let (first, last) = (*cols.first().unwrap(), *cols.last().unwrap());
        // Letters are a column apart at this size; a dropped bearing left two or more.
        let mut run = 0;
        for x in first..=last {
            run = if cols.contains(&x) { 0 } else { run + 1 };
            assert!(run <= 1, "a gap of {run} columns at x = {x} in \"tpcb\": {cols:?}");
        }
        // `l` starts after its bearing, not at the pen position.
        assert!(*ink("l").first().unwrap() >= 1);
    }

    #[test]
    fn anchors_place_the_text_box() {
        let right = rasterize("abc", 16.0, HPos::Right, VPos::Center);
        assert!(right.iter().all(|p| p.0 <= 0));
        assert!(right.iter().any(|p| p.1 < 0) && right.iter().any(|p| p.1 > 0));
    }
}
