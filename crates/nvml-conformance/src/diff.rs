//! Two runs compared case by case, and the checked-in allow-list that explains the differences
//! that stay (`allow.toml` beside this crate's manifest).

use std::collections::HashMap;

use serde::Deserialize;

use crate::record::Outcome;

/// The allow-list this crate ships.
pub const SHIPPED_ALLOW: &str = include_str!("../allow.toml");

/// One case whose outcome differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The case's id.
    pub id: String,
    /// Our library's outcome, rendered.
    pub ours: String,
    /// Upstream's, rendered.
    pub theirs: String,
}

impl Difference {
    /// The function the case calls.
    pub fn function(&self) -> &str {
        let id = self.id.strip_prefix("before-init ").unwrap_or(&self.id);
        id.split('(').next().unwrap_or(id)
    }
}

/// Compares two runs of the same script; returns how many cases were compared and the
/// differences, in our run's order (cases only one side made come last).
pub fn compare(ours: &[Outcome], theirs: &[Outcome]) -> (usize, Vec<Difference>) {
    let theirs_by_id: HashMap<&str, &Outcome> = theirs
        .iter()
        .map(|outcome| (outcome.id.as_str(), outcome))
        .collect();
    let mut differences = Vec::new();
    for outcome in ours {
        let other = theirs_by_id.get(outcome.id.as_str());
        let (ours_text, theirs_text) = (show(outcome), other.map_or("absent".into(), |o| show(o)));
        if ours_text != theirs_text {
            differences.push(Difference {
                id: outcome.id.clone(),
                ours: ours_text,
                theirs: theirs_text,
            });
        }
    }
    let ours_ids: std::collections::HashSet<&str> =
        ours.iter().map(|outcome| outcome.id.as_str()).collect();
    for outcome in theirs.iter().filter(|o| !ours_ids.contains(o.id.as_str())) {
        differences.push(Difference {
            id: outcome.id.clone(),
            ours: "absent".into(),
            theirs: show(outcome),
        });
    }
    (ours.len().max(theirs.len()), differences)
}

/// An outcome as the report and the allow-list see it: `NOT_SUPPORTED(3) ["42"]`.
pub fn show(outcome: &Outcome) -> String {
    match &outcome.result {
        Ok((result, outputs)) => {
            let result = match result.parse::<u32>() {
                Ok(code) => format!("{}({code})", code_name(code)),
                Err(_) => format!("{result:?}"),
            };
            if outputs.is_empty() {
                result
            } else {
                format!("{result} [{}]", outputs.join(" | "))
            }
        }
        Err(how) => format!("crashed ({how})"),
    }
}

/// `nvmlReturn_t` names, as nvml.h spells them after `NVML_ERROR_`.
pub fn code_name(code: u32) -> &'static str {
    const NAMES: [&str; 30] = [
        "SUCCESS",
        "UNINITIALIZED",
        "INVALID_ARGUMENT",
        "NOT_SUPPORTED",
        "NO_PERMISSION",
        "ALREADY_INITIALIZED",
        "NOT_FOUND",
        "INSUFFICIENT_SIZE",
        "INSUFFICIENT_POWER",
        "DRIVER_NOT_LOADED",
        "TIMEOUT",
        "IRQ_ISSUE",
        "LIBRARY_NOT_FOUND",
        "FUNCTION_NOT_FOUND",
        "CORRUPTED_INFOROM",
        "GPU_IS_LOST",
        "RESET_REQUIRED",
        "OPERATING_SYSTEM",
        "LIB_RM_VERSION_MISMATCH",
        "IN_USE",
        "MEMORY",
        "NO_DATA",
        "VGPU_ECC_NOT_SUPPORTED",
        "INSUFFICIENT_RESOURCES",
        "FREQ_NOT_SUPPORTED",
        "ARGUMENT_VERSION_MISMATCH",
        "DEPRECATED",
        "NOT_READY",
        "GPU_NOT_FOUND",
        "INVALID_STATE",
    ];
    match code {
        999 => "UNKNOWN",
        _ => NAMES.get(code as usize).copied().unwrap_or("?"),
    }
}

/// The allow-list: differences that stay, each with its reason.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllowList {
    /// The entries.
    #[serde(default)]
    pub allow: Vec<Allow>,
}

/// One entry: which cases (globs, `*` matches any text), on which profiles, and why.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Allow {
    /// A glob over case ids.
    pub call: String,
    /// Profiles it applies to; every profile when absent.
    #[serde(default)]
    pub profiles: Option<Vec<String>>,
    /// A glob over our rendered outcome; any when absent.
    #[serde(default)]
    pub ours: Option<String>,
    /// A glob over upstream's rendered outcome; any when absent.
    #[serde(default)]
    pub theirs: Option<String>,
    /// Why the difference stays.
    pub reason: String,
}

/// A TOML error in the allow-list.
#[derive(Debug, thiserror::Error)]
#[error("allow-list: {0}")]
pub struct AllowListError(#[from] toml::de::Error);

impl AllowList {
    /// Parses the allow-list.
    pub fn parse(text: &str) -> Result<AllowList, AllowListError> {
        Ok(toml::from_str(text)?)
    }

    /// The index of the first entry that explains `difference` on `profile`.
    pub fn explain(&self, profile: &str, difference: &Difference) -> Option<usize> {
        self.allow.iter().position(|entry| {
            entry
                .profiles
                .as_ref()
                .is_none_or(|names| names.iter().any(|name| name == profile))
                && glob(&entry.call, &difference.id)
                && entry
                    .ours
                    .as_ref()
                    .is_none_or(|g| glob(g, &difference.ours))
                && entry
                    .theirs
                    .as_ref()
                    .is_none_or(|g| glob(g, &difference.theirs))
        })
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, rest) = parts.split_first().unwrap_or((&"", &[]));
    let Some(mut remaining) = text.strip_prefix(first) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return remaining.is_empty();
    };
    for part in middle {
        match remaining.find(part) {
            Some(at) => remaining = &remaining[at + part.len()..],
            None => return false,
        }
    }
    remaining.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(id: &str, result: &str, outputs: &[&str]) -> Outcome {
        Outcome {
            id: id.into(),
            result: Ok((
                result.into(),
                outputs.iter().map(|o| o.to_string()).collect(),
            )),
        }
    }

    #[test]
    fn equal_runs_have_no_difference_and_unequal_ones_name_both_sides() {
        let ours = [outcome("a(dev0)", "0", &["42"]), outcome("b()", "3", &[])];
        let theirs = [
            outcome("a(dev0)", "0", &["42"]),
            outcome("b()", "0", &["7"]),
        ];
        let (compared, differences) = compare(&ours, &theirs);
        assert_eq!(compared, 2);
        assert_eq!(
            differences,
            [Difference {
                id: "b()".into(),
                ours: "NOT_SUPPORTED(3)".into(),
                theirs: "SUCCESS(0) [7]".into(),
            }]
        );
        let crashed = Outcome {
            id: "c()".into(),
            result: Err("signal 11".into()),
        };
        let (_, differences) = compare(&[outcome("c()", "2", &[])], &[crashed]);
        assert_eq!(differences[0].theirs, "crashed (signal 11)");
        let (_, differences) = compare(&[], &[outcome("d(dev7)", "0", &[])]);
        assert_eq!(differences[0].ours, "absent");
    }

    #[test]
    fn globs_match_prefixes_middles_and_suffixes() {
        assert!(glob(
            "nvmlDeviceGetName(*)",
            "nvmlDeviceGetName(dev0, str:96)"
        ));
        assert!(glob(
            "*GetName*str:96/1)",
            "nvmlDeviceGetName(dev3, str:96/1)"
        ));
        assert!(!glob(
            "*GetName*str:96/1)",
            "nvmlDeviceGetName(dev3, str:96)"
        ));
        assert!(glob("exact", "exact"));
        assert!(!glob("exact", "exactly"));
        assert!(glob("*", ""));
    }

    #[test]
    fn an_entry_explains_by_call_profile_and_outcome() {
        let list = AllowList::parse(
            r#"
            [[allow]]
            call = "nvmlDeviceGetMemoryInfo(*"
            profiles = ["gb200"]
            theirs = "SUCCESS(0)*"
            reason = "memory total"
            "#,
        )
        .expect("parses");
        let difference = Difference {
            id: "nvmlDeviceGetMemoryInfo(dev0, obj:24)".into(),
            ours: "SUCCESS(0) [00]".into(),
            theirs: "SUCCESS(0) [01]".into(),
        };
        assert_eq!(list.explain("gb200", &difference), Some(0));
        assert_eq!(list.explain("h100", &difference), None);
        let failed = Difference {
            theirs: "NOT_SUPPORTED(3)".into(),
            ..difference
        };
        assert_eq!(list.explain("gb200", &failed), None);
        assert_eq!(failed.function(), "nvmlDeviceGetMemoryInfo");
    }

    #[test]
    fn the_shipped_allow_list_parses_and_every_entry_has_a_reason() {
        let list = AllowList::parse(SHIPPED_ALLOW).expect("shipped allow-list");
        for entry in &list.allow {
            assert!(
                entry.reason.len() > 20,
                "entry {} needs a reason",
                entry.call
            );
        }
    }
}
