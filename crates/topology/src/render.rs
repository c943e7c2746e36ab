//! Writing a topology back out: the document itself and the Helm values
//! fragment the chart renders into its topology ConfigMap.
//!
//! The YAML is written by hand so that uuids are always double-quoted (a
//! purely numeric uuid must never become a YAML number) and so that any
//! string survives a round trip through both libyaml and Go's YAML 1.1
//! resolver (which Helm uses).

use std::fmt::Write;

use crate::{Domain, Topology};

impl Topology {
    /// The document as YAML; `parse(&t.to_yaml()) == Ok(t)` for every valid `t`.
    pub fn to_yaml(&self) -> String {
        let mut out = format!("version: {}\n", self.version);
        write_domains(&mut out, &self.domains, 0);
        out
    }

    /// A Helm values fragment that enables the chart's topology ConfigMap
    /// with these domains: `topology: {enabled: true, domains: [...]}`.
    ///
    /// Pass it with `helm -f`, not `--set-file` (which would make the list a string).
    pub fn helm_values(&self) -> String {
        let mut out = String::from("topology:\n  enabled: true\n");
        write_domains(&mut out, &self.domains, 2);
        out
    }
}

fn write_domains(out: &mut String, domains: &[Domain], indent: usize) {
    let pad = " ".repeat(indent);
    write_list_key(out, &pad, "domains", domains);
    for domain in domains {
        let _ = writeln!(out, "{pad}  - name: {}", scalar(&domain.name));
        let _ = writeln!(out, "{pad}    uuid: \"{}\"", domain.uuid);
        write_list_key(out, &pad, "    cliques", &domain.cliques);
        for clique in &domain.cliques {
            let _ = writeln!(out, "{pad}      - id: {}", clique.id);
            write_list_key(out, &pad, "        nodes", &clique.nodes);
            for node in &clique.nodes {
                let _ = writeln!(out, "{pad}          - {}", scalar(node));
            }
        }
    }
}

/// The line that opens the list `items` under `key`: `key:`, or the flow `key: []` when the
/// list is empty (so that it still reads back as a list).
fn write_list_key<T>(out: &mut String, pad: &str, key: &str, items: &[T]) {
    if items.is_empty() {
        let _ = writeln!(out, "{pad}{key}: []");
    } else {
        let _ = writeln!(out, "{pad}{key}:");
    }
}

/// A YAML scalar that reads back as exactly `text` as a string: plain when
/// that is unambiguous in every YAML schema, double-quoted otherwise.
fn scalar(text: &str) -> String {
    if is_plain_safe(text) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            ch if needs_escape(ch) => {
                let code = u32::from(ch);
                if code <= 0xffff {
                    let _ = write!(out, "\\u{code:04x}");
                } else {
                    let _ = write!(out, "\\U{code:08x}");
                }
            }
            ch => out.push(ch),
        }
    }
    out.push('"');
    out
}

/// Starts with a letter, holds only `[A-Za-z0-9._-]`, and is not one of
/// YAML 1.1's boolean or null words: a string in every schema.
fn is_plain_safe(text: &str) -> bool {
    let mut chars = text.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    if !first.is_ascii_alphabetic() {
        return false;
    }
    if !chars.all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-')) {
        return false;
    }
    const RESERVED: [&str; 9] = ["y", "n", "yes", "no", "true", "false", "on", "off", "null"];
    !RESERVED.iter().any(|word| word.eq_ignore_ascii_case(text))
}

/// Characters libyaml refuses or folds inside a double-quoted scalar.
fn needs_escape(ch: char) -> bool {
    let code = u32::from(ch);
    code < 0x20
        || (0x7f..=0x9f).contains(&code)
        || code == 0x2028
        || code == 0x2029
        || code == 0xfeff
        || (0xfffe..=0xffff).contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, Clique, ClusterUuid};

    fn topology_with_nodes(nodes: &[&str]) -> Topology {
        Topology {
            version: 1,
            domains: vec![Domain {
                name: "d".to_owned(),
                uuid: ClusterUuid::from_bytes([7; 16]),
                cliques: vec![Clique {
                    id: 3,
                    nodes: nodes.iter().map(|node| (*node).to_owned()).collect(),
                }],
            }],
        }
    }

    #[test]
    fn yaml_round_trips_awkward_strings() {
        let awkward = [
            "plain-node",
            "yes",
            "No",
            "null",
            "~",
            "123",
            "0x1f",
            "1e5",
            ".inf",
            "2024-01-01",
            "a: b",
            "- item",
            "#comment",
            "quote\"back\\slash",
            "new\nline",
            "tab\there",
            "\u{85}nel",
            "x\u{2028}y",
            "\u{feff}bom",
            "\u{1}ctl",
            "emoji 🚀",
            "trailing space ",
            "'single'",
            "*alias",
            "&anchor",
            "!tag",
            "{flow}",
            "[seq]",
            "%percent",
            "@at",
            "`tick",
            "|",
            ">",
        ];
        let topology = topology_with_nodes(&awkward);
        let yaml = topology.to_yaml();
        assert_eq!(parse(&yaml), Ok(topology), "{yaml}");
    }

    #[test]
    fn uuids_are_always_quoted_and_names_plain_when_safe() {
        let yaml = topology_with_nodes(&["node-a", "true"]).to_yaml();
        assert_eq!(
            yaml,
            "version: 1
domains:
  - name: d
    uuid: \"07070707-0707-0707-0707-070707070707\"
    cliques:
      - id: 3
        nodes:
          - node-a
          - \"true\"
"
        );
    }

    #[test]
    fn empty_lists_render_as_flow_sequences() {
        let mut topology = topology_with_nodes(&[]);
        assert!(topology.to_yaml().contains("        nodes: []\n"));
        assert_eq!(parse(&topology.to_yaml()), Ok(topology.clone()));
        topology.domains[0].cliques.clear();
        assert!(topology.to_yaml().contains("    cliques: []\n"));
        assert_eq!(parse(&topology.to_yaml()), Ok(topology.clone()));
        topology.domains.clear();
        assert_eq!(topology.to_yaml(), "version: 1\ndomains: []\n");
        assert_eq!(
            topology.helm_values(),
            "topology:\n  enabled: true\n  domains: []\n"
        );
    }
}
