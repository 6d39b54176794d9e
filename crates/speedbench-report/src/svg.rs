//! The pieces every SVG chart of the HTML pages shares: colours, escaping,
//! "nice" axis scales and the value axis.

use std::fmt::Write;

/// Bar colours, one per series.
pub(crate) const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f",
];

/// `s` escaped for HTML text and attribute values.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An axis scale from 0 with ticks at a "nice" step: 1, 2 or 5 times a
/// power of ten, about five ticks, the top tick at or above `max`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Scale {
    /// Distance between ticks.
    pub step: f64,
    /// The last tick (the axis end), a multiple of `step`, `>= max`.
    pub top: f64,
    /// Decimals that print every tick exactly.
    pub decimals: usize,
}

impl Scale {
    /// The scale for values in `0..=max`; `None` when `max` is not a
    /// positive finite number.
    pub(crate) fn nice(max: f64) -> Option<Scale> {
        if !(max.is_finite() && max > 0.0) {
            return None;
        }
        let raw = max / 5.0;
        let exponent = raw.log10().floor();
        let magnitude = 10f64.powf(exponent);
        let norm = raw / magnitude;
        let factor = if norm <= 1.0 {
            1.0
        } else if norm <= 2.0 {
            2.0
        } else if norm <= 5.0 {
            5.0
        } else {
            10.0
        };
        let step = factor * magnitude;
        // Round away float noise before ceil: 4.000000001 / 1 is 4 ticks.
        let n = ((max / step) * 1e9).round() / 1e9;
        let top = n.ceil().max(1.0) * step;
        let decimals = (-(step.log10().floor())).max(0.0) as usize;
        Some(Scale {
            step,
            top,
            decimals,
        })
    }

    /// The tick values `0, step, ..., top`.
    pub(crate) fn ticks(&self) -> Vec<f64> {
        let n = (self.top / self.step).round() as usize;
        (0..=n).map(|i| i as f64 * self.step).collect()
    }

    /// A tick's label.
    pub(crate) fn label(&self, v: f64) -> String {
        format!("{v:.*}", self.decimals)
    }
}

/// Horizontal grid lines and tick labels of a vertical value axis, plus
/// its rotated title.
pub(crate) fn y_axis(svg: &mut String, scale: &Scale, left: f64, right: f64, h: f64, title: &str) {
    for t in scale.ticks() {
        let y = h - h * t / scale.top;
        let _ = write!(
            svg,
            "<line x1=\"{left}\" x2=\"{right}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text class=\"tick y-tick\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{}</text>",
            left - 4.0,
            y + 3.0,
            scale.label(t)
        );
    }
    let _ = write!(
        svg,
        "<line x1=\"{left}\" x2=\"{left}\" y1=\"0\" y2=\"{h}\" stroke=\"#444\"/><text class=\"axis-title y-title\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 {:.1} {:.1})\">{}</text>",
        14.0,
        h / 2.0,
        14.0,
        h / 2.0,
        esc(title)
    );
}
