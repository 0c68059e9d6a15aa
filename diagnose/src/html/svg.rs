//! Inline SVG charts: panels stacked on one x axis, each with its own y scale, lines drawn
//! as polylines (a gap in the data breaks the line), shaded x ranges, and a legend.

use std::fmt::Write;

/// How values map onto an axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    Linear,
    /// Positive values only, decades apart.
    Log,
    /// `log10(1 + v)`: counts from zero to thousands on one axis.
    SymLog,
}

impl Scale {
    fn f(self, v: f64) -> Option<f64> {
        match self {
            Scale::Linear => v.is_finite().then_some(v),
            Scale::Log => (v > 0.0 && v.is_finite()).then(|| v.log10()),
            Scale::SymLog => (v >= 0.0 && v.is_finite()).then(|| (1.0 + v).log10()),
        }
    }
}

/// How tick values are written.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unit {
    Seconds,
    Count,
    Plain,
}

pub fn format(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Seconds => analysis::units::secs(v),
        Unit::Count => {
            if v >= 1e6 {
                format!("{:.1}M", v / 1e6)
            } else if v >= 1e4 {
                format!("{:.0}k", v / 1e3)
            } else {
                analysis::units::count(v)
            }
        }
        Unit::Plain => {
            if v.fract() == 0.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        }
    }
}

pub struct Line {
    pub label: String,
    pub color: &'static str,
    pub points: Vec<Option<(f64, f64)>>,
    pub dashed: bool,
}

impl Line {
    pub fn new(
        label: impl Into<String>,
        color: &'static str,
        points: Vec<Option<(f64, f64)>>,
    ) -> Line {
        Line {
            label: label.into(),
            color,
            points,
            dashed: false,
        }
    }

    pub fn dashed(mut self) -> Line {
        self.dashed = true;
        self
    }

    fn has_data(&self) -> bool {
        self.points.iter().any(Option::is_some)
    }
}

pub struct Panel {
    pub title: String,
    pub height: f64,
    pub scale: Scale,
    pub unit: Unit,
    pub lines: Vec<Line>,
}

pub struct Chart {
    pub width: f64,
    pub x_label: String,
    pub x_scale: Scale,
    pub x_unit: Unit,
    /// Tick labels at given x values instead of computed ones (categories).
    pub x_ticks: Option<Vec<(f64, String)>>,
    /// x ranges shaded in every panel, with what they mean.
    pub shade: Vec<(f64, f64)>,
    pub shade_label: String,
    pub panels: Vec<Panel>,
}

const LEFT: f64 = 72.0;
const RIGHT: f64 = 240.0;
const TITLE: f64 = 22.0;
const GAP: f64 = 14.0;
const BOTTOM: f64 = 38.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Range of scaled values over all lines; `None` without data.
fn extent(lines: &[Line], pick: impl Fn(&(f64, f64)) -> f64, scale: Scale) -> Option<(f64, f64)> {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for p in lines.iter().flat_map(|l| l.points.iter().flatten()) {
        if let Some(v) = scale.f(pick(p)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
    }
    (lo <= hi).then_some((lo, hi))
}

/// Tick positions (in scaled units) and their raw values.
fn ticks(scale: Scale, lo: f64, hi: f64) -> Vec<(f64, f64)> {
    match scale {
        Scale::SymLog => {
            // 0, then powers of ten, each at log10(1 + v).
            let top = 10f64.powf(hi) - 1.0;
            let decades = top.max(1.0).log10().floor() as i32;
            let every = (decades / 5).max(1);
            let mut out = vec![(0.0, 0.0)];
            for d in (0..=decades).filter(|d| d % every == 0) {
                let v = 10f64.powi(d);
                if v <= top {
                    out.push(((1.0 + v).log10(), v));
                }
            }
            out
        }
        Scale::Log => {
            let raw = |d: f64| 10f64.powf(d);
            // Decades, with 2 and 5 in between when the range spans few of them.
            let span = hi - lo;
            let mults: &[f64] = if span <= 1.2 {
                &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0]
            } else if span <= 3.2 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            let every = ((span / 7.0).ceil() as i32).max(1);
            let mut out = Vec::new();
            for d in lo.floor() as i32..=hi.ceil() as i32 {
                if mults.len() == 1 && d.rem_euclid(every) != 0 {
                    continue;
                }
                for m in mults {
                    let v = d as f64 + m.log10();
                    if v >= lo - 1e-9 && v <= hi + 1e-9 {
                        out.push((v, raw(v)));
                    }
                }
            }
            if out.len() < 2 {
                out = vec![(lo, raw(lo)), (hi, raw(hi))];
            }
            out
        }
        Scale::Linear => {
            let span = (hi - lo).max(1e-12);
            let rough = span / 5.0;
            let mag = 10f64.powf(rough.log10().floor());
            let step = [1.0, 2.0, 2.5, 5.0, 10.0]
                .iter()
                .map(|m| m * mag)
                .find(|s| span / s <= 6.0)
                .unwrap_or(10.0 * mag);
            let mut out = Vec::new();
            let mut v = (lo / step).ceil() * step;
            while v <= hi + step * 1e-9 {
                out.push((v, v));
                v += step;
            }
            out
        }
    }
}

impl Panel {
    /// The values the panel shows, padded; from 0 where the values cannot be negative.
    fn y_range(&self) -> (f64, f64) {
        match extent(&self.lines, |p| p.1, self.scale) {
            Some((a, b)) if b > a => {
                let pad = (b - a) * 0.05;
                match self.scale {
                    Scale::Linear if a >= 0.0 => (0.0, b + pad),
                    Scale::SymLog => (0.0, b + pad),
                    _ => (a - pad, b + pad),
                }
            }
            Some((a, _)) => match self.scale {
                Scale::Log => (a - 0.5, a + 0.5),
                _ => (0.0, (a * 1.2).max(1.0)),
            },
            None => (0.0, 1.0),
        }
    }
}

impl Line {
    /// The line as polylines (a dot where a point stands alone, a gap where one is
    /// missing), placed by `at`, and its legend entry at (`lx`, `legend_y`).
    fn draw(
        &self,
        o: &mut String,
        at: &dyn Fn((f64, f64)) -> Option<(f64, f64)>,
        lx: f64,
        legend_y: f64,
    ) {
        let mut segments: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
        for p in &self.points {
            match p.and_then(at) {
                Some(xy) => segments.last_mut().expect("one segment").push(xy),
                None => {
                    if !segments.last().is_some_and(Vec::is_empty) {
                        segments.push(Vec::new());
                    }
                }
            }
        }
        let dash = if self.dashed {
            " stroke-dasharray=\"5 3\""
        } else {
            ""
        };
        for seg in segments.iter().filter(|s| !s.is_empty()) {
            if seg.len() == 1 {
                let _ = write!(
                    o,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{}\"/>",
                    seg[0].0, seg[0].1, self.color
                );
                continue;
            }
            let pts: Vec<String> = seg.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = write!(
                o,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{dash}/>",
                pts.join(" "),
                self.color
            );
        }
        let _ = write!(
            o,
            "<line x1=\"{lx:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" stroke-width=\"3\"{dash}/><text x=\"{:.1}\" y=\"{:.1}\" class=\"legend\">{}</text>",
            lx + 18.0,
            legend_y - 4.0,
            legend_y - 4.0,
            self.color,
            lx + 24.0,
            legend_y,
            esc(&self.label)
        );
    }
}

impl Chart {
    /// The x values of every panel, padded by half a tick when the ticks are given.
    fn x_range(&self) -> (f64, f64) {
        let all: Vec<&Line> = self.panels.iter().flat_map(|p| &p.lines).collect();
        let xs = extent(
            &all.iter()
                .map(|l| Line::new("", "", l.points.clone()))
                .collect::<Vec<_>>(),
            |p| p.0,
            self.x_scale,
        );
        let (x0, x1) = match xs {
            Some((a, b)) if b > a => (a, b),
            Some((a, _)) => (a - 0.5, a + 0.5),
            None => (0.0, 1.0),
        };
        match &self.x_ticks {
            Some(t) if t.len() > 1 => {
                let pad = (x1 - x0) / (2.0 * (t.len() - 1) as f64);
                (x0 - pad, x1 + pad)
            }
            _ => (x0, x1),
        }
    }

    pub fn height(&self) -> f64 {
        self.panels
            .iter()
            .map(|p| TITLE + p.height + GAP)
            .sum::<f64>()
            + BOTTOM
    }

    /// The chart as an `<svg>` element.
    pub fn render(&self) -> String {
        let w = self.width;
        let h = self.height();
        let plot_w = w - LEFT - RIGHT;
        let mut o = String::new();
        let _ = write!(
            o,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" class=\"chart\">"
        );
        let (x0, x1) = self.x_range();
        let sx = |x: f64| -> Option<f64> {
            let v = self.x_scale.f(x)?;
            Some(LEFT + (v - x0) / (x1 - x0) * plot_w)
        };
        let mut top = 0.0;
        for (pi, panel) in self.panels.iter().enumerate() {
            let py = top + TITLE;
            let ph = panel.height;
            let _ = write!(
                o,
                "<text x=\"{LEFT}\" y=\"{:.1}\" class=\"ptitle\">{}</text>",
                top + 15.0,
                esc(&panel.title)
            );
            let _ = write!(
                o,
                "<rect x=\"{LEFT}\" y=\"{py:.1}\" width=\"{plot_w:.1}\" height=\"{ph:.1}\" class=\"frame\"/>"
            );
            for &(a, b) in &self.shade {
                if let (Some(xa), Some(xb)) = (sx(a), sx(b)) {
                    let _ = write!(
                        o,
                        "<rect x=\"{xa:.1}\" y=\"{py:.1}\" width=\"{:.1}\" height=\"{ph:.1}\" class=\"shade\"/>",
                        (xb - xa).max(1.0)
                    );
                }
            }
            let (y0, y1) = panel.y_range();
            let sy = |v: f64| -> Option<f64> {
                let s = panel.scale.f(v)?;
                Some(py + ph - (s - y0) / (y1 - y0) * ph)
            };
            let has_data = panel.lines.iter().any(Line::has_data);
            for (pos, raw) in ticks(panel.scale, y0, y1).into_iter().filter(|_| has_data) {
                let y = py + ph - (pos - y0) / (y1 - y0) * ph;
                let _ = write!(
                    o,
                    "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" class=\"grid\"/><text x=\"{:.1}\" y=\"{:.1}\" class=\"ytick\">{}</text>",
                    LEFT + plot_w,
                    LEFT - 6.0,
                    y + 4.0,
                    esc(&format(panel.unit, raw))
                );
            }
            if !has_data {
                let _ = write!(
                    o,
                    "<text x=\"{:.1}\" y=\"{:.1}\" class=\"nodata\">not measured</text>",
                    LEFT + plot_w / 2.0,
                    py + ph / 2.0
                );
            }
            let mut legend_y = py + 12.0;
            let at = |(x, y): (f64, f64)| Some((sx(x)?, sy(y)?));
            for line in &panel.lines {
                line.draw(&mut o, &at, LEFT + plot_w + 12.0, legend_y);
                legend_y += 16.0;
            }
            if pi == 0 && !self.shade.is_empty() {
                let lx = LEFT + plot_w + 12.0;
                let _ = write!(
                    o,
                    "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"18\" height=\"10\" class=\"shade\"/><text x=\"{:.1}\" y=\"{legend_y:.1}\" class=\"legend\">{}</text>",
                    legend_y - 9.0,
                    lx + 24.0,
                    esc(&self.shade_label)
                );
            }
            top += TITLE + ph + GAP;
        }
        // The shared x axis under the last panel.
        let axis_y = top - GAP;
        let x_ticks: Vec<(f64, String)> = match &self.x_ticks {
            Some(t) => t.clone(),
            None => ticks(self.x_scale, x0, x1)
                .into_iter()
                .map(|(pos, raw)| {
                    let x = match self.x_scale {
                        Scale::Linear => pos,
                        _ => raw,
                    };
                    (x, format(self.x_unit, raw))
                })
                .collect(),
        };
        for (x, label) in x_ticks {
            if let Some(px) = sx(x) {
                let _ = write!(
                    o,
                    "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{axis_y:.1}\" y2=\"{:.1}\" class=\"axis\"/><text x=\"{px:.1}\" y=\"{:.1}\" class=\"xtick\">{}</text>",
                    axis_y + 5.0,
                    axis_y + 18.0,
                    esc(&label)
                );
            }
        }
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"xlabel\">{}</text></svg>",
            LEFT + plot_w / 2.0,
            axis_y + 34.0,
            esc(&self.x_label)
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(points: Vec<Option<(f64, f64)>>) -> Chart {
        Chart {
            width: 800.0,
            x_label: "seconds".into(),
            x_scale: Scale::Linear,
            x_unit: Unit::Plain,
            x_ticks: None,
            shade: vec![(2.0, 3.0)],
            shade_label: "raised".into(),
            panels: vec![Panel {
                title: "p99 <write>".into(),
                height: 200.0,
                scale: Scale::Log,
                unit: Unit::Seconds,
                lines: vec![Line::new("p99", "#d62728", points)],
            }],
        }
    }

    #[test]
    fn gaps_break_lines_and_text_is_escaped() {
        let svg = chart(vec![
            Some((0.0, 0.001)),
            Some((1.0, 0.002)),
            None,
            Some((3.0, 0.2)),
            Some((4.0, 0.1)),
            Some((5.0, 0.0)),
        ])
        .render();
        assert_eq!(svg.matches("<polyline").count(), 2, "{svg}");
        assert!(svg.contains("p99 &lt;write&gt;"));
        assert!(svg.contains("class=\"shade\""));
        assert!(svg.contains(">1.0 ms<") || svg.contains(">10 ms<"), "{svg}");
    }

    #[test]
    fn an_empty_panel_says_so() {
        let svg = chart(vec![None, None]).render();
        assert!(svg.contains("not measured"));
        assert!(!svg.contains("<polyline"));
    }

    #[test]
    fn ticks_are_round_numbers() {
        let t: Vec<f64> = ticks(Scale::Linear, 0.0, 97.0)
            .iter()
            .map(|t| t.1)
            .collect();
        assert_eq!(t, vec![0.0, 20.0, 40.0, 60.0, 80.0]);
        let t: Vec<f64> = ticks(Scale::Log, -4.6, -0.5).iter().map(|t| t.1).collect();
        assert_eq!(t.len(), 4, "decades only over four of them: {t:?}");
        let t: Vec<f64> = ticks(Scale::Log, -3.7, -2.0).iter().map(|t| t.1).collect();
        let want = [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01];
        assert_eq!(t.len(), want.len(), "{t:?}");
        assert!(
            t.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
            "{t:?}"
        );
        let t = ticks(Scale::Log, -6.0, 1.0);
        assert!(t.len() >= 4 && t.len() <= 8, "{t:?}");
        let t: Vec<f64> = ticks(Scale::SymLog, 0.0, (1.0f64 + 2000.0).log10())
            .iter()
            .map(|t| t.1)
            .collect();
        assert_eq!(t, vec![0.0, 1.0, 10.0, 100.0, 1000.0]);
        assert_eq!(format(Unit::Count, 1874.0), "1,874");
        assert_eq!(format(Unit::Count, 25_000.0), "25k");
    }
}
