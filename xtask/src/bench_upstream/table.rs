//! The figures: driver lines parsed, samples per side, the table printed.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};

/// `key=value` pairs of one driver line.
pub(super) fn parse_pairs(line: &str) -> Result<BTreeMap<String, f64>> {
    line.split_whitespace()
        .map(|pair| {
            let (key, value) = pair
                .split_once('=')
                .with_context(|| format!("driver printed {pair:?}, not key=value"))?;
            let value: f64 = value
                .parse()
                .with_context(|| format!("driver printed {pair:?}, not a number"))?;
            Ok((key.to_owned(), value))
        })
        .collect()
}

/// Samples per side of one measure.
#[derive(Debug, Default, Clone)]
pub(super) struct Samples(pub(super) Vec<f64>);

impl Samples {
    fn sorted(&self) -> Vec<f64> {
        let mut values = self.0.clone();
        values.sort_by(f64::total_cmp);
        values
    }

    pub(super) fn min(&self) -> f64 {
        self.sorted().first().copied().unwrap_or(f64::NAN)
    }

    pub(super) fn median(&self) -> f64 {
        let values = self.sorted();
        values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
    }
}

/// One row of the table.
pub(super) struct Row {
    measure: String,
    unit: &'static str,
    upstream: Samples,
    ours: Samples,
    /// Higher is better (throughput): the ratio is upstream / ours.
    higher_is_better: bool,
    target: f64,
}

impl Row {
    /// A row where less is better (time, memory, size): ours / upstream.
    pub(super) fn lower(
        measure: impl Into<String>,
        unit: &'static str,
        [upstream, ours]: [Samples; 2],
        target: f64,
    ) -> Row {
        Row {
            measure: measure.into(),
            unit,
            upstream,
            ours,
            higher_is_better: false,
            target,
        }
    }

    /// A row where more is better (throughput): upstream / ours.
    pub(super) fn higher(
        measure: impl Into<String>,
        unit: &'static str,
        samples: [Samples; 2],
        target: f64,
    ) -> Row {
        Row {
            higher_is_better: true,
            ..Row::lower(measure, unit, samples, target)
        }
    }

    fn ratio(&self, pick: fn(&Samples) -> f64) -> f64 {
        if self.higher_is_better {
            pick(&self.upstream) / pick(&self.ours)
        } else {
            pick(&self.ours) / pick(&self.upstream)
        }
    }
}

fn format_value(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

pub(super) fn print_table(rows: &[Row]) {
    println!("| measure | unit | upstream min | upstream median | ours min | ours median | ratio (min) | ratio (median) | target | met |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for row in rows {
        let ratio = row.ratio(Samples::median);
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {} |",
            row.measure,
            row.unit,
            format_value(row.upstream.min()),
            format_value(row.upstream.median()),
            format_value(row.ours.min()),
            format_value(row.ours.median()),
            row.ratio(Samples::min),
            ratio,
            if row.target.is_finite() {
                format!("≤ {}", row.target)
            } else {
                "report".to_owned()
            },
            if !row.target.is_finite() {
                "–"
            } else if ratio <= row.target {
                "yes"
            } else {
                "no"
            },
        );
    }
    println!("Ratios are ours / upstream (for throughput upstream / ours): under 1 means ours is better.");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn driver_lines_parse_and_refuse_garbage() {
        let pairs = parse_pairs("a_us=1.5 b_kb=2").unwrap();
        assert_eq!(pairs["a_us"], 1.5);
        assert_eq!(pairs["b_kb"], 2.0);
        assert!(parse_pairs("oops").is_err());
        assert!(parse_pairs("a=b").is_err());
    }

    #[test]
    fn ratios_are_ours_over_upstream_and_inverted_for_throughput() {
        let mut row = Row {
            measure: String::new(),
            unit: "µs",
            upstream: Samples(vec![10.0, 20.0, 30.0]),
            ours: Samples(vec![1.0, 2.0, 3.0]),
            higher_is_better: false,
            target: 0.1,
        };
        assert_eq!(row.ratio(Samples::median), 0.1);
        assert_eq!(row.ratio(Samples::min), 0.1);
        row.higher_is_better = true;
        assert_eq!(row.ratio(Samples::median), 10.0);
    }
}
