//! `helm template` golden files: the chart's defaults and the demo values.
//!
//! A change in what the chart renders shows up as a diff here. Refresh with
//! `UPDATE_GOLDEN=1 cargo test -p integration-tests --test chart golden`.
//! Lines are compared without trailing whitespace and without blank lines:
//! helm 4 separates documents with extra blank lines where helm 3 does not,
//! and neither changes what the YAML means here.

use crate::helm::{fixture, Template};

fn check_golden(name: &str, template: &Template) {
    let got = template.text();
    let path = fixture(&format!("golden/{name}.yaml"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got)
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|err| {
        panic!(
            "cannot read {} ({err}): create it with \
             `UPDATE_GOLDEN=1 cargo test -p integration-tests --test chart golden`",
            path.display()
        )
    });
    let want_lines = significant_lines(&want);
    let got_lines = significant_lines(&got);
    if want_lines == got_lines {
        return;
    }
    let first = want_lines
        .iter()
        .zip(&got_lines)
        .position(|(want, got)| want != got)
        .unwrap_or(want_lines.len().min(got_lines.len()));
    let context = |lines: &[&str]| -> String {
        let start = first.saturating_sub(3);
        let end = (first + 4).min(lines.len());
        (start..end)
            .map(|index| {
                let marker = if index == first { ">" } else { " " };
                format!("{marker}{:5} | {}\n", index + 1, lines[index])
            })
            .collect()
    };
    panic!(
        "helm template output differs from {} at non-blank line {}\n--- golden\n{}--- rendered\n{}\
         If the change is intended, refresh with \
         `UPDATE_GOLDEN=1 cargo test -p integration-tests --test chart golden`",
        path.display(),
        first + 1,
        context(&want_lines),
        context(&got_lines),
    );
}

/// The lines that carry meaning: trailing whitespace cut, blank lines dropped.
fn significant_lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect()
}

#[test]
fn golden_defaults() {
    check_golden("defaults", &Template::defaults());
}

#[test]
fn golden_demo() {
    check_golden("demo", &Template::demo());
}
