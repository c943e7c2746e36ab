//! [`Report::write`]: the JSON report and the files beside it, the JUnit XML
//! and the page. Its own module below `report.rs` and `html.rs`, so that the
//! report's types do not import the page that draws them.

use std::path::Path;

use super::{html, Beside, Report};

impl Report {
    /// Writes `path` (JSON), the JUnit XML (`.xml`) and the page (`.html`) beside it.
    pub fn write(&self, path: &Path) -> anyhow::Result<Beside> {
        if let Some(parent) = path.parent().filter(|it| !it.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|err| anyhow::format_err!("cannot create {}: {err}", parent.display()))?;
        }
        std::fs::write(path, self.to_json()).map_err(|err| {
            anyhow::format_err!("cannot write the report {}: {err}", path.display())
        })?;
        let xml_path = path.with_extension("xml");
        std::fs::write(&xml_path, self.to_junit())
            .map_err(|err| anyhow::format_err!("cannot write {}: {err}", xml_path.display()))?;
        let html_path = path.with_extension("html");
        std::fs::write(&html_path, html::render(self))
            .map_err(|err| anyhow::format_err!("cannot write {}: {err}", html_path.display()))?;
        Ok(Beside {
            xml: xml_path,
            html: html_path,
        })
    }
}
