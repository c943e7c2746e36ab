//! Reading one source file for the cycle check: a small lexer (comments,
//! strings and lifetimes dropped) and the file's `mod` declarations, `use`
//! leaves and qualified paths, `#[cfg(test)]` items left out.

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    /// `::`
    Sep,
    Punct(char),
}

struct Token {
    tok: Tok,
    line: usize,
}

/// Rust source as identifiers, string literals, `::` and punctuation;
/// comments, numbers, character literals and lifetimes are dropped.
fn lex(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let start = i;
        let tok = if c == '/' && next == Some('/') {
            i = (i..chars.len())
                .find(|&j| chars[j] == '\n')
                .unwrap_or(chars.len());
            None
        } else if c == '/' && next == Some('*') {
            i = block_comment_end(&chars, i);
            None
        } else if let Some((end, value)) = string_literal(&chars, i) {
            i = end;
            Some(Tok::Str(value))
        } else if c == '\'' || (c == 'b' && next == Some('\'')) {
            i = quote_end(&chars, if c == 'b' { i + 1 } else { i });
            None
        } else if c.is_alphabetic() || c == '_' {
            i = word_end(&chars, i);
            Some(Tok::Ident(chars[start..i].iter().collect()))
        } else if c.is_ascii_digit() {
            i = word_end(&chars, i);
            None
        } else if c == ':' && next == Some(':') {
            i += 2;
            Some(Tok::Sep)
        } else {
            i += 1;
            (!c.is_whitespace()).then_some(Tok::Punct(c))
        };
        if let Some(tok) = tok {
            out.push(Token { tok, line });
        }
        line += chars[start..i].iter().filter(|it| **it == '\n').count();
    }
    out
}

fn word_end(chars: &[char], from: usize) -> usize {
    (from..chars.len())
        .find(|&j| !(chars[j].is_alphanumeric() || chars[j] == '_'))
        .unwrap_or(chars.len())
}

fn block_comment_end(chars: &[char], mut i: usize) -> usize {
    let mut depth = 0;
    while i < chars.len() {
        match (chars[i], chars.get(i + 1)) {
            ('/', Some('*')) => {
                depth += 1;
                i += 2;
            }
            ('*', Some('/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    i
}

/// A character literal's end, or a lifetime's (`i` at the quote).
fn quote_end(chars: &[char], i: usize) -> usize {
    if chars.get(i + 1) == Some(&'\\') {
        return (i + 3..chars.len())
            .find(|&j| chars[j] == '\'')
            .map_or(chars.len(), |j| j + 1);
    }
    if chars.get(i + 2) == Some(&'\'') {
        return i + 3;
    }
    word_end(chars, i + 1)
}

/// A string literal starting at `i` (plain, byte, C or raw): its end and
/// its text as written.
fn string_literal(chars: &[char], i: usize) -> Option<(usize, String)> {
    let mut j = i;
    if matches!(chars[j], 'b' | 'c') {
        j += 1;
    }
    let raw = chars.get(j) == Some(&'r');
    if raw {
        j += 1;
    }
    let hashes = (j..chars.len()).take_while(|&k| chars[k] == '#').count();
    j += hashes;
    if chars.get(j) != Some(&'"') || (!raw && hashes > 0) {
        return None;
    }
    j += 1;
    let mut value = String::new();
    while j < chars.len() {
        let c = chars[j];
        if !raw && c == '\\' {
            value.extend(chars[j..chars.len().min(j + 2)].iter());
            j += 2;
            continue;
        }
        if c == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
            return Some((j + 1 + hashes, value));
        }
        value.push(c);
        j += 1;
    }
    Some((chars.len(), value))
}

/// A `use` leaf or a qualified path: the module it stands in, its
/// segments, the name it binds (a `use` leaf's, not a glob's) and its line.
#[derive(Debug)]
pub(super) struct Named {
    pub(super) module: Vec<String>,
    pub(super) path: Vec<String>,
    pub(super) binds: Option<String>,
    pub(super) is_use: bool,
    pub(super) line: usize,
}

/// What one file declares and names.
#[derive(Default, Debug)]
pub(super) struct FileItems {
    /// Out-of-line child modules: the module and the files it may be in.
    pub(super) children: Vec<(Vec<String>, Vec<String>)>,
    /// The modules this file holds (its own and its inline ones).
    pub(super) modules: Vec<Vec<String>>,
    pub(super) named: Vec<Named>,
}

/// Reads one file, whose module is `module` (`mod_rs`: a crate root or a
/// `mod.rs`, whose children live beside it).
pub(super) fn parse(file: &str, text: &str, module: &[String], mod_rs: bool) -> FileItems {
    let toks = lex(text);
    let parent = file.rsplit_once('/').map_or("", |it| it.0).to_string();
    let children_dir = if mod_rs {
        parent.clone()
    } else {
        file.trim_end_matches(".rs").to_string()
    };
    let mut p = Parser {
        toks: &toks,
        items: FileItems {
            modules: vec![module.to_vec()],
            ..FileItems::default()
        },
        module: module.to_vec(),
        inline: Vec::new(),
        depth: 0,
    };
    let (mut test, mut path_attr) = (false, None);
    let mut i = 0;
    while i < toks.len() {
        let tok = &toks[i].tok;
        if *tok == Tok::Punct('#') {
            let (end, inner, attr) = attribute(&toks, i);
            if is_cfg_test(&attr) && inner {
                return FileItems::default();
            }
            test |= is_cfg_test(&attr);
            if let [Tok::Ident(word), Tok::Punct('='), Tok::Str(value)] = attr.as_slice() {
                if word == "path" {
                    path_attr = Some(value.clone());
                }
            }
            i = end;
            continue;
        }
        if test {
            i = item_end(&toks, i);
            (test, path_attr) = (false, None);
            continue;
        }
        let dir = [children_dir.as_str()]
            .into_iter()
            .chain(p.inline.iter().map(|(name, _)| name.as_str()))
            .collect::<Vec<_>>()
            .join("/");
        let at_dir = if p.inline.is_empty() { &parent } else { &dir };
        i = match tok {
            Tok::Ident(word) if word == "mod" => p.module_item(i, &dir, at_dir, path_attr.take()),
            Tok::Ident(word) if word == "use" => p.use_item(i),
            Tok::Punct('{' | '}' | ';') => {
                path_attr = None;
                p.punct(i)
            }
            _ => p.path(i),
        };
    }
    p.items
}

/// An attribute at `i` (`#[…]` or `#![…]`): its end, whether it is inner,
/// and the tokens between its brackets.
fn attribute(toks: &[Token], i: usize) -> (usize, bool, Vec<Tok>) {
    let inner = matches!(
        toks.get(i + 1),
        Some(Token {
            tok: Tok::Punct('!'),
            ..
        })
    );
    let open = i + 1 + usize::from(inner);
    let mut depth = 0;
    for (j, token) in toks.iter().enumerate().skip(open) {
        match token.tok {
            Tok::Punct('[') => depth += 1,
            Tok::Punct(']') => {
                depth -= 1;
                if depth == 0 {
                    let attr = toks[open + 1..j].iter().map(|it| it.tok.clone());
                    return (j + 1, inner, attr.collect());
                }
            }
            _ => {}
        }
    }
    (toks.len(), inner, Vec::new())
}

fn is_cfg_test(attr: &[Tok]) -> bool {
    let ident = |word: &str| attr.contains(&Tok::Ident(word.to_string()));
    attr.first() == Some(&Tok::Ident("cfg".to_string())) && ident("test") && !ident("not")
}

/// Where the item starting at `i` ends: after its `;`, or after its first
/// braced block.
fn item_end(toks: &[Token], i: usize) -> usize {
    let mut depth = 0_i32;
    for (j, token) in toks.iter().enumerate().skip(i) {
        match token.tok {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']') => depth -= 1,
            Tok::Punct('}') if depth == 0 => return j,
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            Tok::Punct(';') if depth == 0 => return j + 1,
            _ => {}
        }
    }
    toks.len()
}

struct Parser<'a> {
    toks: &'a [Token],
    items: FileItems,
    /// The file's module.
    module: Vec<String>,
    /// The inline modules open here, with the brace depth each opened at.
    inline: Vec<(String, usize)>,
    depth: usize,
}

impl Parser<'_> {
    fn tok(&self, i: usize) -> Option<&Tok> {
        self.toks.get(i).map(|it| &it.tok)
    }

    fn current(&self) -> Vec<String> {
        let inline = self.inline.iter().map(|(name, _)| name.clone());
        self.module.iter().cloned().chain(inline).collect()
    }

    /// `mod name;` or `mod name { … }` at `i`.
    fn module_item(&mut self, i: usize, dir: &str, at_dir: &str, path: Option<String>) -> usize {
        let Some(Tok::Ident(name)) = self.tok(i + 1).cloned() else {
            return i + 1;
        };
        let mut module = self.current();
        module.push(name.clone());
        match self.tok(i + 2) {
            Some(Tok::Punct(';')) => {
                let files = match path {
                    Some(path) => vec![normalize(&format!("{at_dir}/{path}"))],
                    None => vec![format!("{dir}/{name}.rs"), format!("{dir}/{name}/mod.rs")],
                };
                self.items.children.push((module, files));
                i + 3
            }
            Some(Tok::Punct('{')) => {
                self.inline.push((name, self.depth));
                self.depth += 1;
                self.items.modules.push(module);
                i + 3
            }
            _ => i + 2,
        }
    }

    /// A `use` item at `i`: each of its leaves.
    fn use_item(&mut self, i: usize) -> usize {
        let mut leaves = Vec::new();
        let mut end = i + 1;
        use_tree(self.toks, &mut end, Vec::new(), &mut leaves);
        let line = self.toks[i].line;
        for (path, binds) in leaves {
            self.items.named.push(Named {
                module: self.current(),
                path,
                binds,
                is_use: true,
                line,
            });
        }
        end
    }

    fn punct(&mut self, i: usize) -> usize {
        match self.tok(i) {
            Some(Tok::Punct('{')) => self.depth += 1,
            Some(Tok::Punct('}')) => {
                self.depth = self.depth.saturating_sub(1);
                if self.inline.last().is_some_and(|(_, at)| *at == self.depth) {
                    self.inline.pop();
                }
            }
            _ => {}
        }
        i + 1
    }

    /// A qualified path `a::b::c` starting at `i`, if one does.
    fn path(&mut self, i: usize) -> usize {
        let starts = matches!(self.tok(i), Some(Tok::Ident(_)))
            && self.tok(i + 1) == Some(&Tok::Sep)
            && i.checked_sub(1).and_then(|it| self.tok(it)) != Some(&Tok::Sep)
            // `pub(in crate::x)` names a visibility, not an item.
            && !(i >= 2
                && self.tok(i - 1) == Some(&Tok::Ident("in".to_string()))
                && self.tok(i - 2) == Some(&Tok::Punct('(')));
        if !starts {
            return i + 1;
        }
        let mut path = Vec::new();
        let mut j = i;
        while let Some(Tok::Ident(segment)) = self.tok(j) {
            path.push(segment.clone());
            if self.tok(j + 1) != Some(&Tok::Sep) {
                break;
            }
            j += 2;
        }
        self.items.named.push(Named {
            module: self.current(),
            path,
            binds: None,
            is_use: false,
            line: self.toks[i].line,
        });
        j.max(i + 1)
    }
}

/// A use tree from `*i`: its leaves as (path, bound name; `None` for a glob).
fn use_tree(
    toks: &[Token],
    i: &mut usize,
    mut path: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let tok = |at: usize| toks.get(at).map(|it| &it.tok);
    loop {
        match tok(*i) {
            Some(Tok::Sep) => *i += 1,
            Some(Tok::Ident(name)) => {
                path.push(name.clone());
                *i += 1;
                if tok(*i) == Some(&Tok::Sep) {
                    continue;
                }
                let mut binds = Some(name.clone());
                if tok(*i) == Some(&Tok::Ident("as".to_string())) {
                    if let Some(Tok::Ident(alias)) = tok(*i + 1) {
                        binds = Some(alias.clone());
                    }
                    *i += 2;
                }
                if path.len() > 1 && path.last().is_some_and(|it| it == "self") {
                    path.pop();
                    if binds.as_deref() == Some("self") {
                        binds = path.last().cloned();
                    }
                }
                out.push((path, binds));
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                while !matches!(tok(*i), None | Some(Tok::Punct('}'))) {
                    let at = *i;
                    use_tree(toks, i, path.clone(), out);
                    if tok(*i) == Some(&Tok::Punct(',')) || *i == at {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push((path, None));
                return;
            }
            _ => return,
        }
    }
}

/// `a/b/../c` as `a/c`.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_trees_expand_to_their_leaves() {
        let toks = lex("crate::{a::{self, B as C}, d::*};");
        let mut leaves = Vec::new();
        use_tree(&toks, &mut 0, Vec::new(), &mut leaves);
        let words = |it: &[&str]| it.iter().map(|it| it.to_string()).collect::<Vec<_>>();
        assert_eq!(
            leaves,
            [
                (words(&["crate", "a"]), Some("a".to_string())),
                (words(&["crate", "a", "B"]), Some("C".to_string())),
                (words(&["crate", "d"]), None),
            ]
        );
    }
}
