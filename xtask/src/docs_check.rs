//! The docs tell the truth about the command line and about each other:
//!
//! - every `cargo xtask …` in README.md and `docs/*.md`, in a code block or
//!   an inline code span, names a subcommand xtask has and only flags that
//!   subcommand takes (checked against clap's own tree of [`Xtask`], nothing
//!   is run);
//! - every relative link (`](docs/….md)`, `](….md)`) points at a file that
//!   exists.

use std::path::{Path, PathBuf};

use clap::CommandFactory as _;

use crate::flags::Xtask;

/// README.md and every page under `docs/`, as (path, text), README first,
/// then the pages sorted.
fn doc_files(root: &Path) -> Vec<(PathBuf, String)> {
    let mut paths = vec![root.join("README.md")];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    paths.extend(pages);
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
            (path, text)
        })
        .collect()
}

/// The code in `markdown`: each line of a fenced block, and each inline
/// code span outside the blocks.
fn code_texts(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            out.push(line.to_owned());
            continue;
        }
        // Between backticks: the odd pieces. A double-backtick span's inner
        // backticks split it too, which only shortens what is checked.
        out.extend(
            line.split('`')
                .skip(1)
                .step_by(2)
                .filter(|span| !span.is_empty())
                .map(str::to_owned),
        );
    }
    out
}

/// Every `cargo xtask …` command in a piece of code, up to a comment, a
/// pipe or the next command.
fn invocations(code: &str) -> Vec<String> {
    const PREFIX: &str = "cargo xtask";
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(PREFIX) {
        let after = &rest[at + PREFIX.len()..];
        let end = after.find(['#', '|', ';', '&']).unwrap_or(after.len());
        let end = after[..end].find(PREFIX).unwrap_or(end);
        let args = after[..end].trim();
        out.push(format!("{PREFIX} {args}").trim_end().to_owned());
        rest = &after[end..];
    }
    out
}

/// Whether `line` (`cargo xtask <subcommand> [--flag …]`) names a
/// subcommand of `tree` and only flags that subcommand (or the root, for
/// global flags) takes. A placeholder subcommand (`<command>`) checks the
/// flags against the root alone.
fn check_invocation(tree: &clap::Command, line: &str) -> Result<(), String> {
    let words: Vec<&str> = line
        .strip_prefix("cargo xtask")
        .unwrap_or(line)
        .split_whitespace()
        .collect();
    let sub = words.iter().find(|word| !word.starts_with('-'));
    let command = match sub {
        Some(name) if name.starts_with('<') => tree,
        Some(name) => tree.find_subcommand(name).ok_or_else(|| {
            let known: Vec<&str> = tree.get_subcommands().map(|it| it.get_name()).collect();
            format!(
                "`{line}`: xtask has no subcommand `{name}` (it has {})",
                known.join(", ")
            )
        })?,
        None => tree,
    };
    for word in &words {
        let Some(flag) = word.strip_prefix('-') else {
            continue;
        };
        let known = match flag.strip_prefix('-') {
            Some(long) => {
                let long = long.split('=').next().unwrap_or(long);
                long.is_empty() || takes_long(command, long) || takes_long(tree, long)
            }
            None => flag
                .chars()
                .all(|short| takes_short(command, short) || takes_short(tree, short)),
        };
        if !known {
            return Err(format!(
                "`{line}`: `cargo xtask {}` takes no {word}",
                command.get_name()
            ));
        }
    }
    Ok(())
}

fn takes_long(command: &clap::Command, long: &str) -> bool {
    command.get_arguments().any(|arg| {
        arg.get_long() == Some(long)
            || arg
                .get_all_aliases()
                .is_some_and(|aliases| aliases.contains(&long))
    })
}

fn takes_short(command: &clap::Command, short: char) -> bool {
    command
        .get_arguments()
        .any(|arg| arg.get_short() == Some(short))
}

/// xtask's command tree, built, so that `--help`, `--version` and the
/// global flags are on every subcommand as the parser sees them.
fn xtask_tree() -> clap::Command {
    let mut tree = Xtask::command();
    tree.build();
    tree
}

/// The relative link targets in `markdown` (`](target)`), without anchors;
/// web addresses and in-page anchors are left out.
fn relative_links(markdown: &str) -> Vec<String> {
    markdown
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|target| target.split('#').next().unwrap_or_default().trim())
        .filter(|target| !target.is_empty() && !target.contains("://"))
        .filter(|target| !target.starts_with("mailto:"))
        .map(str::to_owned)
        .collect()
}

/// The links of `file` (at `path`) whose target does not exist.
fn broken_links(path: &Path, markdown: &str) -> Vec<String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    relative_links(markdown)
        .into_iter()
        .filter(|target| !dir.join(target).exists())
        .map(|target| format!("{}: ]({target}) points at nothing", path.display()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_xtask_command_is_one_xtask_accepts() {
        let tree = xtask_tree();
        let mut checked = 0;
        let mut wrong = Vec::new();
        for (path, text) in doc_files(&crate::project_root()) {
            for code in code_texts(&text) {
                for line in invocations(&code) {
                    checked += 1;
                    if let Err(err) = check_invocation(&tree, &line) {
                        wrong.push(format!("{}: {err}", path.display()));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        // The quick start alone has five; finding none would mean the scan is blind.
        assert!(checked >= 5, "only {checked} `cargo xtask` commands found");
    }

    #[test]
    fn every_relative_link_in_the_docs_points_at_a_file() {
        let files = doc_files(&crate::project_root());
        assert!(files.len() > 1, "README.md and docs/*.md");
        let broken: Vec<String> = files
            .iter()
            .flat_map(|(path, text)| broken_links(path, text))
            .collect();
        assert!(broken.is_empty(), "{}", broken.join("\n"));
        let readme = &files[0].1;
        assert!(
            relative_links(readme)
                .iter()
                .any(|it| it.starts_with("docs/")),
            "README.md links no docs/ page"
        );
    }

    #[test]
    fn a_made_up_subcommand_or_flag_is_refused_and_real_ones_pass() {
        let tree = xtask_tree();
        for good in [
            "cargo xtask demo --offline --trays 18 --cliques-per-rack 1 --scenarios 1,3,4",
            "cargo xtask scenario5 --kube-context c --registry r:5000/p --plain-http",
            "cargo xtask inject --node n --gpu 1 --xid 79",
            "cargo xtask ci --step \"e2e full rack\" -v",
            "cargo xtask --help",
            "cargo xtask <command> --help",
            "cargo xtask doctor --trays=18",
        ] {
            assert_eq!(check_invocation(&tree, good), Ok(()), "{good}");
        }
        for (bad, says) in [
            ("cargo xtask frobnicate", "no subcommand `frobnicate`"),
            ("cargo xtask demo --no-such-flag", "takes no --no-such-flag"),
            // A real flag, but of another subcommand.
            (
                "cargo xtask inject --trays 4",
                "`cargo xtask inject` takes no --trays",
            ),
            ("cargo xtask status -x", "takes no -x"),
        ] {
            let err = check_invocation(&tree, bad).expect_err(bad);
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn commands_are_found_in_blocks_and_inline_code_up_to_a_comment() {
        let markdown = "Run `cargo xtask up --profile h100` first.\n\
                        Not code: cargo xtask nothing.\n\
                        ```sh\n\
                        cargo xtask demo --offline   # a --comment\n\
                        echo; cargo xtask status | head\n\
                        ```\n";
        let found: Vec<String> = code_texts(markdown)
            .iter()
            .flat_map(|code| invocations(code))
            .collect();
        assert_eq!(
            found,
            [
                "cargo xtask up --profile h100",
                "cargo xtask demo --offline",
                "cargo xtask status"
            ]
        );
    }

    #[test]
    fn a_link_to_a_missing_page_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("docs")).expect("docs/");
        std::fs::write(dir.path().join("docs/here.md"), "# here").expect("write");
        let readme = dir.path().join("README.md");
        let text =
            "[a](docs/here.md#part) [b](docs/gone.md) [c](https://example.com/x.md) [d](#top)";
        assert_eq!(
            relative_links(text),
            ["docs/here.md", "docs/gone.md"],
            "web addresses and anchors are not files"
        );
        assert_eq!(
            broken_links(&readme, text),
            [format!(
                "{}: ](docs/gone.md) points at nothing",
                readme.display()
            )]
        );
    }
}
