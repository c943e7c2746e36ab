//! Text made safe in markup, the one escaping both the JUnit XML and the
//! page use: in text and in a quoted attribute, XML and HTML alike.

/// `text` with `&`, `<`, `>`, both quotes and newlines as character
/// references, and the control characters XML forbids (all but tab) left out.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' => out.push_str("&#10;"),
            c if (c as u32) < 0x20 && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_text_attributes_newlines_and_control_characters() {
        assert_eq!(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
        assert_eq!(escape("one\ntwo\tthree\u{1b}[0m"), "one&#10;two\tthree[0m");
    }
}
