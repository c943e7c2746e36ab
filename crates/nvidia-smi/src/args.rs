//! Reading one argument, as `cli.rs` and `mig_cli.rs` both do: a long flag's `--flag=value`
//! split at its `=`, and a flag's value taken from there or from the next argument.

/// The flag and its inline value (`--id=0`; only long flags take one).
pub fn split(arg: &str) -> (&str, Option<&str>) {
    match arg.split_once('=') {
        Some((flag, value)) if flag.starts_with("--") => (flag, Some(value)),
        _ => (arg, None),
    }
}

/// The value of flag `name`: the inline one, else the next argument.
pub fn value<'a>(
    name: &str,
    inline: Option<&str>,
    rest: &mut impl Iterator<Item = &'a String>,
) -> Result<String, String> {
    match inline {
        Some(value) => Ok(value.to_owned()),
        None => rest
            .next()
            .cloned()
            .ok_or_else(|| format!("{name} needs a value")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_values_only_for_long_flags() {
        assert_eq!(split("--id=3"), ("--id", Some("3")));
        assert_eq!(split("-i"), ("-i", None));
        assert_eq!(split("-x=1"), ("-x=1", None));
        let rest = ["7".to_owned()];
        assert_eq!(value("-i", None, &mut rest.iter()), Ok("7".to_owned()));
        assert_eq!(value("-i", Some("2"), &mut rest.iter()), Ok("2".to_owned()));
        let err = value("-i", None, &mut [].iter()).expect_err("no value");
        assert_eq!(err, "-i needs a value");
    }
}
