//! One SVG line chart per test: median requests/s (y) at each level (x), one
//! line per server, with a legend. Built as a string so the lab needs no
//! plotting crate; the output is plain SVG 1.1 that browsers and GitHub
//! render.
//!
//! Levels are spaced evenly on the x-axis, labelled with their values. For
//! the concurrency levels, which double, that is a log₂ scale, the natural
//! one; for query and item counts it is only approximately linear, which is
//! also how TFB draws them. A level where a server has no clean result is
//! left out of its line (the line joins the levels it has).

use super::levels::TestLevels;
use super::records::Summary;
use std::fmt::Write as _;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 84.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 56.0;
const BOTTOM: f64 = 64.0;

/// Distinct colours that stay apart for common colour blindness (Okabe–Ito).
const COLOURS: [&str; 8] =
    ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];

/// The chart's file name for a test: the name with anything but ASCII
/// letters, digits, `-` and `_` replaced, so a test name cannot escape the
/// output directory.
pub fn file_name(test: &str) -> String {
    let safe: String = test
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    format!("{safe}.svg")
}

/// Escapes text for XML character data and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

/// A round step for about `target` ticks between 0 and `max`: 1, 2 or 5
/// times a power of ten.
fn tick_step(max: f64, target: f64) -> f64 {
    let raw = (max / target).max(f64::MIN_POSITIVE);
    let power = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * power).find(|s| *s >= raw);
    step.unwrap_or(10.0 * power)
}

/// `1500000` -> `1.5M`, `250000` -> `250k`, `12` -> `12`.
fn short_count(value: f64) -> String {
    let (scaled, suffix) = if value >= 1e6 {
        (value / 1e6, "M")
    } else if value >= 1e3 {
        (value / 1e3, "k")
    } else {
        (value, "")
    };
    let text = format!("{scaled:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

/// The chart for one test. `servers` fixes the line order and colours;
/// `pipelined` adds the depth to the title.
pub fn svg(levels: &TestLevels, servers: &[String], summaries: &[Summary]) -> String {
    let test = &levels.test;
    let points: Vec<Vec<(usize, f64)>> = servers
        .iter()
        .map(|server| {
            levels
                .levels
                .iter()
                .enumerate()
                .filter_map(|(i, level)| {
                    let s = summaries
                        .iter()
                        .find(|s| &s.test == test && s.level == *level && &s.server == server)?;
                    Some((i, s.requests_per_sec?.median))
                })
                .collect()
        })
        .collect();

    let max = points.iter().flatten().map(|(_, y)| *y).fold(0.0, f64::max);
    // 5% headroom keeps the highest point off the frame.
    let headroom = if max > 0.0 { max * 1.05 } else { 1.0 };
    let step = tick_step(headroom, 5.0);
    let top = (headroom / step).ceil().max(1.0) * step;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let n = levels.levels.len().max(1);
    // Evenly spaced levels, with half a slot of margin at each end.
    let x = |i: usize| LEFT + plot_w * (i as f64 + 0.5) / n as f64;
    let y = |v: f64| TOP + plot_h * (1.0 - v / top);

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="Helvetica, Arial, sans-serif" font-size="13">"#
    );
    let pipeline = levels.levels.first().map_or(1, |l| l.pipeline);
    let mut title = format!("{test}: requests/s by {}", levels.axis.title());
    if pipeline > 1 {
        let _ = write!(title, " (pipeline depth {pipeline})");
    }
    let _ = writeln!(out, "<title>{}</title>", escape(&title));
    let _ = writeln!(out, r##"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>"##);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16" font-weight="bold">{}</text>"#,
        LEFT + plot_w / 2.0,
        escape(&title)
    );

    // Horizontal grid lines with y tick labels.
    let ticks = (top / step).round() as usize;
    for k in 0..=ticks {
        let v = step * k as f64;
        let py = y(v);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" stroke="#dddddd"/>"##,
            LEFT + plot_w
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            py + 4.0,
            short_count(v)
        );
    }
    // Axes, x tick labels and axis titles.
    let _ = writeln!(
        out,
        r##"<path d="M{LEFT},{TOP} V{b} H{r}" fill="none" stroke="#333333"/>"##,
        b = TOP + plot_h,
        r = LEFT + plot_w
    );
    for (i, level) in levels.levels.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x(i),
            TOP + plot_h + 20.0,
            levels.value(level)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 18.0,
        levels.axis.title()
    );
    let _ = writeln!(
        out,
        r#"<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">requests/s (median of clean rounds)</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    );

    // One line per server with a marker at each point, then the legend.
    for (s, server) in servers.iter().enumerate() {
        let colour = COLOURS[s % COLOURS.len()];
        let line = &points[s];
        if line.is_empty() {
            continue;
        }
        let coords: Vec<String> = line.iter().map(|(i, v)| format!("{:.1},{:.1}", x(*i), y(*v))).collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2.5" points="{}"><title>{}</title></polyline>"#,
            coords.join(" "),
            escape(server)
        );
        for (i, v) in line {
            let _ = writeln!(
                out,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{colour}"><title>{}, {}: {} req/s</title></circle>"#,
                x(*i),
                y(*v),
                escape(server),
                levels.label(&levels.levels[*i]),
                crate::rig::stats::count(*v)
            );
        }
    }
    let legend_x = LEFT + plot_w + 20.0;
    for (s, server) in servers.iter().enumerate() {
        let colour = COLOURS[s % COLOURS.len()];
        let ly = TOP + 10.0 + 24.0 * s as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{legend_x}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{colour}" stroke-width="3"/>"#,
            legend_x + 24.0
        );
        let label = if points[s].is_empty() { format!("{server} (no data)") } else { server.clone() };
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
            legend_x + 32.0,
            ly + 4.0,
            escape(&label)
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::levels::{plan, LevelOptions};

    fn summary(test: &str, level: crate::bench::levels::Level, server: &str, rps: f64) -> Summary {
        Summary::single(test, level, server, Some(rps))
    }

    #[test]
    fn ticks_and_labels() {
        assert_eq!(tick_step(1000.0, 5.0), 200.0);
        assert_eq!(tick_step(730_000.0, 5.0), 200_000.0);
        assert_eq!(tick_step(4.0, 5.0), 1.0);
        assert_eq!(short_count(1_500_000.0), "1.5M");
        assert_eq!(short_count(250_000.0), "250k");
        assert_eq!(short_count(0.0), "0");
        assert_eq!(file_name("json"), "json.svg");
        assert_eq!(file_name("../x y"), "___x_y.svg");
    }

    #[test]
    fn valid_svg_with_one_polyline_per_server() {
        let levels = plan("json", false, &LevelOptions { pipeline: 16, ..LevelOptions::default() });
        let servers = vec!["peregrine".to_string(), "a<b>&\"c\"".to_string(), "silent".to_string()];
        let mut summaries = Vec::new();
        for (i, level) in levels.levels.iter().enumerate() {
            summaries.push(summary("json", *level, &servers[0], 100_000.0 * (i + 1) as f64));
            // The second server lacks one level: its line joins the others.
            if i != 2 {
                summaries.push(summary("json", *level, &servers[1], 50_000.0));
            }
        }
        // Another test's rows must not leak in.
        summaries.push(summary("plaintext", levels.levels[0], &servers[2], 9e9));
        let text = svg(&levels, &servers[..2], &summaries);
        let doc = roxmltree::Document::parse(&text).expect("chart is well-formed XML");
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "svg");
        let polylines: Vec<_> = root.children().filter(|n| n.has_tag_name("polyline")).collect();
        assert_eq!(polylines.len(), 2);
        let first_points = polylines[0].attribute("points").unwrap_or_default();
        assert_eq!(first_points.split(' ').count(), 6);
        assert_eq!(polylines[1].attribute("points").unwrap_or_default().split(' ').count(), 5);
        let texts: Vec<&str> = root.descendants().filter_map(|n| n.text()).collect();
        assert!(texts.contains(&"a<b>&\"c\""), "legend keeps the escaped name: {texts:?}");
        assert!(texts.contains(&"connections"));
        assert!(texts.contains(&"512"));
        assert!(texts.contains(&"600k"), "y axis reaches the maximum: {texts:?}");

        // A server without any result gets no line but a legend entry.
        let text = svg(&levels, &servers, &summaries);
        let doc = roxmltree::Document::parse(&text).expect("well-formed");
        assert_eq!(doc.root_element().children().filter(|n| n.has_tag_name("polyline")).count(), 2);
        assert!(text.contains("silent (no data)"));
    }

    #[test]
    fn empty_chart_is_still_valid() {
        let levels = plan("queries", true, &LevelOptions { pipeline: 1, ..LevelOptions::default() });
        let text = svg(&levels, &["x".to_string()], &[]);
        assert!(roxmltree::Document::parse(&text).is_ok(), "{text}");
        assert!(text.contains("queries per request"));
    }
}
