//! `--plot FILE.png`: bandwidth (Gb/s) or latency (us: typical, 99 %, 99.9 %) against message
//! size on a log2 axis, drawn with `plotters`; text in DejaVu Sans (Debian's
//! fonts-dejavu-core, installed by scripts/deps.sh).

use super::session::Row;
use anyhow::{Context, Result, bail};
use plotters::prelude::*;
use std::path::Path;

/// Where the font is looked for.
pub const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

fn register_font() -> Result<()> {
    let path = FONT_PATHS
        .iter()
        .find(|p| Path::new(p).exists())
        .context("no DejaVuSans.ttf (install fonts-dejavu-core: scripts/deps.sh does)")?;
    let bytes: &'static [u8] = Box::leak(std::fs::read(path)?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow::anyhow!("{path}: not a usable font"))?;
    Ok(())
}

/// Series of (size, value) per label, from rows; bandwidth rows in Gb/s.
pub fn series(rows: &[Row], gbits: bool) -> Vec<(&'static str, Vec<(u64, f64)>)> {
    let to_gb = |x: f64| {
        if gbits {
            x
        } else {
            x * 1_048_576.0 * 8.0 / 1e9
        }
    };
    let mut bw = Vec::new();
    let (mut typ, mut p99, mut p999) = (Vec::new(), Vec::new(), Vec::new());
    for r in rows {
        match *r {
            Row::Bw(b) => bw.push((b.size, to_gb(b.bw_avg))),
            Row::Lat(l) => {
                typ.push((l.size, l.t_typical));
                p99.push((l.size, l.p99));
                p999.push((l.size, l.p99_9));
            }
            Row::LatDuration(s, _, t, _) => typ.push((s, t)),
        }
    }
    if !bw.is_empty() {
        return vec![("average Gb/s", bw)];
    }
    let mut v = vec![("t_typical us", typ)];
    if !p99.is_empty() {
        v.push(("99% us", p99));
        v.push(("99.9% us", p999));
    }
    v
}

/// Draw `rows` into `path` (PNG), titled `title`.
pub fn draw(path: &Path, title: &str, rows: &[Row], gbits: bool) -> Result<()> {
    let s = series(rows, gbits);
    let pts: Vec<(u64, f64)> = s.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    if pts.is_empty() {
        bail!("--plot: no results to plot");
    }
    register_font()?;
    let xmax = pts.iter().map(|p| p.0).max().unwrap_or(2).max(2) as f64;
    let xmin = pts.iter().map(|p| p.0).min().unwrap_or(1).max(1) as f64;
    let ymax = pts.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1e-3) * 1.1;
    let root = BitMapBackend::new(path, (1000, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((xmin..xmax * 1.05).log_scale(), 0f64..ymax)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let ylabel = if s[0].0.contains("Gb/s") {
        "Gb/s"
    } else {
        "usec"
    };
    chart
        .configure_mesh()
        .x_desc("message size [bytes]")
        .y_desc(ylabel)
        .x_label_formatter(&|x| fmt_size(*x))
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let colors = [BLUE, RED, GREEN];
    for (i, (label, v)) in s.iter().enumerate() {
        let c = colors[i % colors.len()];
        chart
            .draw_series(LineSeries::new(
                v.iter().map(|&(x, y)| (x as f64, y)),
                c.stroke_width(2),
            ))
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .label(*label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        chart
            .draw_series(
                v.iter()
                    .map(|&(x, y)| Circle::new((x as f64, y), 3, c.filled())),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    root.present()
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(())
}

fn fmt_size(x: f64) -> String {
    let x = x.round() as u64;
    match x {
        0..1024 => format!("{x}"),
        1024..1_048_576 => format!("{}K", x / 1024),
        _ => format!("{}M", x / 1_048_576),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::report::BwRow;

    #[test]
    fn draws_a_png() {
        let rows: Vec<Row> = (1..12)
            .map(|i| {
                let size = 1u64 << i;
                Row::Bw(BwRow {
                    size,
                    iters: 100,
                    bw_peak: 0.0,
                    bw_avg: i as f64,
                    msg_rate: 1.0,
                })
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("iwarp-perf-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("bw.png");
        if FONT_PATHS.iter().all(|f| !Path::new(f).exists()) {
            println!("SKIPPED draws_a_png: needs fonts-dejavu-core");
            return;
        }
        draw(&p, "write_bw sweep", &rows, true).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(&b[1..4], b"PNG");
        assert!(b.len() > 5000, "{} bytes", b.len());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(fmt_size(65536.0), "64K");
    }
}
