//! No import cycle between files.
//!
//! Each crate's module tree is read from its roots (`src/lib.rs`,
//! `src/main.rs`, `src/bin/*.rs`) through its `mod` declarations (`x.rs`,
//! `x/mod.rs`, `#[path]`), leaving out `#[cfg(test)]` items and test files.
//! A file imports another when a `use` or a qualified path (`crate::x::y`,
//! `super::…`, `self::…`, or one starting at a child module or at a module
//! the file imported) names a module the other file holds, or an item in it;
//! a re-export is followed to where the item comes from. Declaring
//! `mod child;` is no import; a parent naming `child::X` is one, and so is a
//! child's `super::X`. A strongly connected component of more than one file
//! is a cycle: give what the files share one owner below them.

mod parse;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use parse::{parse, Named};

/// The import cycles of today, each named by its first file in path order,
/// with why it stays; the list may only shrink (an entry naming no cycle's
/// first file fails too).
const CYCLE_DEBT: &[(&str, &str)] = &[];

/// One cycle: the crate's folder, its files, and each import between them
/// as (from, line, to).
#[derive(Debug)]
struct Cycle {
    krate: String,
    files: Vec<String>,
    imports: Vec<(String, usize, String)>,
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: import cycle between {} files: {}",
            self.krate,
            self.files.len(),
            self.files.join(", ")
        )?;
        for (from, line, to) in &self.imports {
            writeln!(f, "  {from}:{line} imports {to}")?;
        }
        Ok(())
    }
}

/// One crate's module tree: which file holds each module, what each file
/// names, and the names each module's `use` items bind.
#[derive(Default)]
struct Tree {
    modules: BTreeMap<Vec<String>, String>,
    named: Vec<(String, Named)>,
    bindings: BTreeMap<(Vec<String>, String), Vec<String>>,
}

/// How far a re-export or an alias is followed.
const FOLLOW: usize = 8;

impl Tree {
    /// The crate whose root is `root`, its files read from `files`.
    fn read(files: &BTreeMap<String, String>, root: &str) -> Tree {
        let mut tree = Tree::default();
        let mut queue = vec![(Vec::new(), root.to_string())];
        while let Some((module, file)) = queue.pop() {
            let Some(text) = files.get(&file) else {
                continue;
            };
            if super::is_test_file(&file) || tree.modules.values().any(|it| *it == file) {
                continue;
            }
            let mod_rs = file == root || file.ends_with("/mod.rs");
            let items = parse(&file, text, &module, mod_rs);
            for module in items.modules {
                tree.modules.insert(module, file.clone());
            }
            for (module, candidates) in items.children {
                if let Some(found) = candidates.into_iter().find(|it| files.contains_key(it)) {
                    queue.push((module, found));
                }
            }
            for named in items.named {
                if let (true, Some(name)) = (named.is_use, &named.binds) {
                    let key = (named.module.clone(), name.clone());
                    tree.bindings.insert(key, named.path.clone());
                }
                tree.named.push((file.clone(), named));
            }
        }
        tree
    }

    /// `path`, standing in `module`, from the crate root; `None` when it
    /// starts outside the crate (another crate, a local item).
    fn absolute(&self, module: &[String], path: &[String], follow: usize) -> Option<Vec<String>> {
        let (first, mut rest) = path.split_first()?;
        let mut base = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => module[..module.len().checked_sub(1)?].to_vec(),
            _ => {
                let mut child = module.to_vec();
                child.push(first.clone());
                if self.modules.contains_key(&child) {
                    child
                } else {
                    let bound = self.bindings.get(&(module.to_vec(), first.clone()))?;
                    if follow == 0 || bound.as_slice() == path {
                        return None;
                    }
                    self.absolute(module, bound, follow - 1)?
                }
            }
        };
        while rest.first().is_some_and(|it| it == "super") {
            base.pop()?;
            rest = &rest[1..];
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// The module holding what the absolute `path` names, a re-export
    /// followed to where it comes from; `None` when that is outside the crate.
    fn owner(&self, path: &[String], follow: usize) -> Option<Vec<String>> {
        let held = (0..=path.len())
            .rev()
            .find(|&k| self.modules.contains_key(&path[..k]))?;
        let module = path[..held].to_vec();
        let Some(name) = path.get(held) else {
            return Some(module);
        };
        let Some(bound) = self.bindings.get(&(module.clone(), name.clone())) else {
            return Some(module);
        };
        if follow == 0 {
            return Some(module);
        }
        let mut from = self.absolute(&module, bound, follow - 1)?;
        from.extend(path[held + 1..].iter().cloned());
        if from == path {
            return Some(module);
        }
        self.owner(&from, follow - 1)
    }

    /// Each import from one file to another: (from, line, to).
    fn imports(&self) -> Vec<(String, usize, String)> {
        let mut out = Vec::new();
        for (file, named) in &self.named {
            let owner = self
                .absolute(&named.module, &named.path, FOLLOW)
                .and_then(|it| self.owner(&it, FOLLOW));
            if let Some(to) = owner.and_then(|it| self.modules.get(&it)) {
                if to != file {
                    out.push((file.clone(), named.line, to.clone()));
                }
            }
        }
        out.sort();
        out
    }
}

/// The crate roots among `files`: `src/lib.rs`, `src/main.rs`, `src/bin/*.rs`.
fn roots(files: &BTreeMap<String, String>) -> Vec<&str> {
    let is_root = |path: &str| {
        let Some((_, inside)) = path.split_once("/src/") else {
            return false;
        };
        matches!(inside, "lib.rs" | "main.rs")
            || inside
                .strip_prefix("bin/")
                .is_some_and(|it| !it.contains('/') || it.ends_with("/main.rs"))
    };
    files
        .keys()
        .map(String::as_str)
        .filter(|it| is_root(it) && !super::is_test_file(it))
        .collect()
}

/// Every import cycle between the files of the crates among `files`
/// (relative path → text).
fn cycles(files: &BTreeMap<String, String>) -> Vec<Cycle> {
    let mut graph: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for root in roots(files) {
        for (from, line, to) in Tree::read(files, root).imports() {
            let line_of = graph.entry(from).or_default().entry(to).or_insert(line);
            *line_of = (*line_of).min(line);
        }
    }
    let edges: BTreeMap<&str, Vec<&str>> = graph
        .iter()
        .map(|(from, to)| (from.as_str(), to.keys().map(String::as_str).collect()))
        .collect();
    let mut out = Vec::new();
    for component in components(&edges) {
        if component.len() < 2 {
            continue;
        }
        let members: BTreeSet<&str> = component.iter().copied().collect();
        let mut imports = Vec::new();
        for from in &members {
            for (to, line) in graph.get(*from).into_iter().flatten() {
                if members.contains(to.as_str()) {
                    imports.push((from.to_string(), *line, to.clone()));
                }
            }
        }
        let first = members.first().copied().unwrap_or_default();
        out.push(Cycle {
            krate: first
                .split_once("/src/")
                .map_or(first, |it| it.0)
                .to_string(),
            files: members.iter().map(|it| it.to_string()).collect(),
            imports,
        });
    }
    out.sort_by(|a, b| a.files.cmp(&b.files));
    out
}

/// The strongly connected components of `edges` (Tarjan's algorithm).
fn components<'a>(edges: &BTreeMap<&'a str, Vec<&'a str>>) -> Vec<Vec<&'a str>> {
    struct State<'a, 'e> {
        edges: &'e BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<&'a str>>,
    }
    fn visit<'a>(s: &mut State<'a, '_>, node: &'a str) {
        let at = s.index.len();
        s.index.insert(node, at);
        s.low.insert(node, at);
        s.stack.push(node);
        s.on_stack.insert(node);
        for &next in s.edges.get(node).into_iter().flatten() {
            if !s.index.contains_key(next) {
                visit(s, next);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top);
                if top == node {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &node in edges.keys() {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.out
}

#[test]
fn no_import_cycle_between_files() {
    let files: BTreeMap<String, String> = super::sources().into_iter().collect();
    let found = cycles(&files);
    let mut problems: Vec<String> = found
        .iter()
        .filter(|it| !CYCLE_DEBT.iter().any(|(first, _)| it.files[0] == *first))
        .map(|it| format!("{it}  give what they share one owner below them"))
        .collect();
    for (first, _) in CYCLE_DEBT {
        if !found.iter().any(|it| it.files[0] == *first) {
            problems.push(format!(
                "{first}: first file of no import cycle now: remove it from CYCLE_DEBT"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> BTreeMap<String, String> {
        files
            .iter()
            .map(|(path, text)| (path.to_string(), text.to_string()))
            .collect()
    }

    fn cycle_files(files: &[(&str, &str)]) -> Vec<Vec<String>> {
        cycles(&tree(files))
            .into_iter()
            .map(|it| it.files)
            .collect()
    }

    #[test]
    fn two_files_using_each_other_are_a_cycle() {
        let found = cycles(&tree(&[
            ("c/src/lib.rs", "mod a;\nmod b;\n"),
            ("c/src/a.rs", "use crate::b::B;\npub struct A;\n"),
            (
                "c/src/b.rs",
                "pub struct B;\n\nfn f() -> crate::a::A { todo!() }\n",
            ),
        ]));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].krate, "c");
        assert_eq!(found[0].files, ["c/src/a.rs", "c/src/b.rs"]);
        let imports: Vec<_> = found[0].imports.iter().map(|it| it.1).collect();
        assert_eq!(imports, [1, 3]);
    }

    #[test]
    fn declaring_a_child_is_no_import_but_naming_it_is() {
        let declared = [
            ("c/src/lib.rs", "pub mod a;\npub struct Root;\n"),
            ("c/src/a.rs", "use super::Root;\n"),
        ];
        assert!(cycle_files(&declared).is_empty());
        let named = [
            (
                "c/src/lib.rs",
                "pub mod a;\npub struct Root;\nfn f() { a::g() }\n",
            ),
            ("c/src/a.rs", "use super::Root;\npub fn g() {}\n"),
        ];
        assert_eq!(cycle_files(&named), [["c/src/a.rs", "c/src/lib.rs"]]);
    }

    #[test]
    fn a_re_export_is_followed_to_its_owner() {
        let files = [
            ("c/src/lib.rs", "mod a;\nmod b;\npub use a::A;\n"),
            ("c/src/a.rs", "pub struct A;\n"),
            ("c/src/b.rs", "use crate::A;\n"),
        ];
        assert!(cycle_files(&files).is_empty());
        let imports = Tree::read(&tree(&files), "c/src/lib.rs").imports();
        assert!(imports.contains(&("c/src/b.rs".into(), 1, "c/src/a.rs".into())));
    }

    #[test]
    fn test_modules_and_test_files_are_left_out() {
        let files = [
            ("c/src/lib.rs", "mod a;\nmod b;\n"),
            (
                "c/src/a.rs",
                "use crate::b::B;\n#[cfg(test)]\n#[path = \"a_tests.rs\"]\nmod tests;\n",
            ),
            ("c/src/a_tests.rs", "use crate::b;\n"),
            (
                "c/src/b.rs",
                "pub struct B;\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n",
            ),
        ];
        assert!(cycle_files(&files).is_empty());
    }

    #[test]
    fn nested_folders_paths_and_aliases_resolve() {
        let files = [
            (
                "c/src/main.rs",
                "mod flow;\n#[path = \"other/x.rs\"]\nmod x;\n",
            ),
            (
                "c/src/flow.rs",
                "mod kind;\nuse crate::x as ex;\nfn f() { ex::g() }\n",
            ),
            (
                "c/src/flow/kind.rs",
                "// crate::flow in a comment\nconst S: &str = \"crate::x\";\n",
            ),
            (
                "c/src/other/x.rs",
                "pub fn g() {}\nfn h() { super::flow::kind::K }\n",
            ),
        ];
        let imports = Tree::read(&tree(&files), "c/src/main.rs").imports();
        assert_eq!(
            imports,
            [
                ("c/src/flow.rs".into(), 2, "c/src/other/x.rs".into()),
                ("c/src/flow.rs".into(), 3, "c/src/other/x.rs".into()),
                ("c/src/other/x.rs".into(), 2, "c/src/flow/kind.rs".into()),
            ]
        );
    }

    #[test]
    fn components_find_each_cycle() {
        let edges: BTreeMap<&str, Vec<&str>> = [
            ("a", vec!["b"]),
            ("b", vec!["c"]),
            ("c", vec!["a", "d"]),
            ("d", vec![]),
        ]
        .into_iter()
        .collect();
        let mut found: Vec<Vec<&str>> = components(&edges)
            .into_iter()
            .map(|mut it| {
                it.sort();
                it
            })
            .collect();
        found.sort();
        assert_eq!(found, [vec!["a", "b", "c"], vec!["d"]]);
    }
}
