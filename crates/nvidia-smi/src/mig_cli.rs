//! `nvidia-smi mig …`'s arguments (issue 38), parsed without side effects: nvidia-smi's short
//! and long flags for listing profiles, placements, GPU and compute instances and for creating
//! and destroying them. `cli.rs` hands over everything after `mig`; a usage error says what is
//! wrong.

use crate::args;

/// A profile as `-cgi` and `-cci` name it: its id, or its name with or without `MIG `
/// (`19`, `1g.10gb`, `MIG 1g.10gb`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileSpec {
    /// A profile id.
    Id(u32),
    /// A profile name, without `MIG `.
    Name(String),
}

impl ProfileSpec {
    /// One element of a comma-separated list.
    pub fn parse(text: &str) -> Result<ProfileSpec, String> {
        let text = text.trim();
        if let Ok(id) = text.parse::<u32>() {
            return Ok(ProfileSpec::Id(id));
        }
        let name = text.strip_prefix("MIG ").unwrap_or(text).trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!(
                "\"{text}\" is not a profile: give its id or its name (19, 1g.10gb or \"MIG 1g.10gb\")"
            ));
        }
        Ok(ProfileSpec::Name(name.to_owned()))
    }

    /// Whether the profile with `id` and the library's `name` is the one named.
    pub fn matches(&self, id: u32, name: &str) -> bool {
        match self {
            ProfileSpec::Id(wanted) => *wanted == id,
            ProfileSpec::Name(wanted) => name.strip_prefix("MIG ").unwrap_or(name) == wanted,
        }
    }

    /// As messages print it (`19`, `1g.10gb`).
    pub fn text(&self) -> String {
        match self {
            ProfileSpec::Id(id) => id.to_string(),
            ProfileSpec::Name(name) => name.clone(),
        }
    }
}

/// What `nvidia-smi mig` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mig {
    /// `-h`: the MIG usage.
    Help,
    /// `-lgip`: the GPU instance profiles.
    ListProfiles,
    /// `-lgipp`: each profile's possible placements.
    ListPlacements,
    /// `-lgi`: the GPU instances (of `-gi`'s ids only, if given).
    ListGpuInstances {
        /// `-gi`.
        gi: Option<Vec<u32>>,
    },
    /// `-lci`: the compute instances.
    ListComputeInstances {
        /// `-gi`.
        gi: Option<Vec<u32>>,
        /// `-ci`.
        ci: Option<Vec<u32>>,
    },
    /// `-cgi <profiles> [-C]`.
    CreateGpuInstances {
        /// The profiles, in order.
        profiles: Vec<ProfileSpec>,
        /// `-C`: also each one's default compute instance.
        default_ci: bool,
    },
    /// `-cci [profiles] [-gi <ids>]`: none named, the default compute instance.
    CreateComputeInstances {
        /// The profiles, in order.
        profiles: Vec<ProfileSpec>,
        /// `-gi`: in these GPU instances only.
        gi: Option<Vec<u32>>,
    },
    /// `-dci [-ci <ids>] [-gi <ids>]`.
    DestroyComputeInstances {
        /// `-gi`.
        gi: Option<Vec<u32>>,
        /// `-ci`.
        ci: Option<Vec<u32>>,
    },
    /// `-dgi [-gi <ids>]`.
    DestroyGpuInstances {
        /// `-gi`.
        gi: Option<Vec<u32>>,
    },
}

/// A parsed `mig` command line: the command and `-i`'s text (`cli.rs` reads the index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigArgs {
    /// What to do.
    pub command: Mig,
    /// `-i` / `--id`, as given.
    pub gpu: Option<String>,
}

/// The usage text of `nvidia-smi mig -h`.
pub const USAGE: &str = "\
nvidia-smi mig (cdsim mock driver): MIG through libnvidia-ml.so.1
  -i,    --id=<index>                          the GPU (default: every MIG-enabled GPU)
  -lgip, --list-gpu-instance-profiles          GPU instance profiles
  -lgipp, --list-gpu-instance-possible-placements
                                               each profile's possible placements
  -lgi,  --list-gpu-instances                  GPU instances
  -lci,  --list-compute-instances              compute instances
  -cgi,  --create-gpu-instance <profiles>      create GPU instances (ids or names, comma-separated)
  -C,    --default-compute-instance            with -cgi: also each one's default compute instance
  -cci,  --create-compute-instance [profiles]  create compute instances (default: the default one)
  -dci,  --destroy-compute-instance            destroy compute instances
  -dgi,  --destroy-gpu-instance                destroy GPU instances
  -gi,   --gpu-instance-id=<ids>               only these GPU instances (-lgi, -lci, -cci, -dci, -dgi)
  -ci,   --compute-instance-id=<ids>           only these compute instances (-lci, -dci)";

const COMBINATION: &str =
    "Invalid combination of input arguments. Please run 'nvidia-smi mig -h' for help.";

/// The flags seen, before they are checked together.
#[derive(Default)]
struct Seen {
    action: Option<(&'static str, Option<String>)>,
    default_ci: bool,
    gi: Option<String>,
    ci: Option<String>,
    gpu: Option<String>,
    help: bool,
}

/// Parses the arguments after `mig`.
pub fn parse(args: &[String]) -> Result<MigArgs, String> {
    let mut seen = Seen::default();
    let mut iter = args.iter().peekable();
    while let Some(arg) = iter.next() {
        let (flag, inline) = args::split(arg);
        let Some(action) = action_of(flag) else {
            let mut value = |name: &str| args::value(name, inline, &mut iter);
            match flag {
                "-h" | "--help" => seen.help = true,
                "-C" | "--default-compute-instance" => seen.default_ci = true,
                "-i" | "--id" => seen.gpu = Some(value("-i")?),
                "-gi" | "--gpu-instance-id" => seen.gi = Some(value("-gi")?),
                "-ci" | "--compute-instance-id" => seen.ci = Some(value("-ci")?),
                other => return Err(format!("Invalid argument or flag: {other}")),
            }
            continue;
        };
        // -cgi needs its list, -cci takes one if the next argument is not a flag.
        let list = match (action, inline) {
            ("-cgi", _) => Some(args::value("-cgi", inline, &mut iter)?),
            (_, Some(value)) => Some(value.to_owned()),
            ("-cci", None) => iter.next_if(|next| !next.starts_with('-')).cloned(),
            _ => None,
        };
        if seen.action.replace((action, list)).is_some() {
            return Err(COMBINATION.to_owned());
        }
    }
    let gpu = seen.gpu.clone();
    Ok(MigArgs {
        command: command(seen)?,
        gpu,
    })
}

/// The short name of an action flag.
fn action_of(flag: &str) -> Option<&'static str> {
    Some(match flag {
        "-lgip" | "--list-gpu-instance-profiles" => "-lgip",
        "-lgipp" | "--list-gpu-instance-possible-placements" => "-lgipp",
        "-lgi" | "--list-gpu-instances" => "-lgi",
        "-lci" | "--list-compute-instances" => "-lci",
        "-cgi" | "--create-gpu-instance" => "-cgi",
        "-cci" | "--create-compute-instance" => "-cci",
        "-dci" | "--destroy-compute-instance" => "-dci",
        "-dgi" | "--destroy-gpu-instance" => "-dgi",
        _ => return None,
    })
}

/// The command the flags make, or why they make none.
fn command(seen: Seen) -> Result<Mig, String> {
    if seen.help {
        return Ok(Mig::Help);
    }
    let Some((action, list)) = seen.action else {
        return Err(
            "mig needs an operation: -lgip, -lgipp, -lgi, -lci, -cgi, -cci, -dci or -dgi"
                .to_owned(),
        );
    };
    let gi = seen
        .gi
        .as_deref()
        .map(|text| ids("-gi", text))
        .transpose()?;
    let ci = seen
        .ci
        .as_deref()
        .map(|text| ids("-ci", text))
        .transpose()?;
    let (gi_ok, ci_ok) = match action {
        "-lgi" | "-cci" | "-dgi" => (true, false),
        "-lci" | "-dci" => (true, true),
        _ => (false, false),
    };
    let fits = (gi_ok || gi.is_none())
        && (ci_ok || ci.is_none())
        && (action == "-cgi" || !seen.default_ci);
    if !fits {
        return Err(COMBINATION.to_owned());
    }
    Ok(match action {
        "-lgip" => Mig::ListProfiles,
        "-lgipp" => Mig::ListPlacements,
        "-lgi" => Mig::ListGpuInstances { gi },
        "-lci" => Mig::ListComputeInstances { gi, ci },
        "-cgi" => Mig::CreateGpuInstances {
            profiles: profiles(list.as_deref().unwrap_or_default())?,
            default_ci: seen.default_ci,
        },
        "-cci" => Mig::CreateComputeInstances {
            profiles: list
                .as_deref()
                .map(profiles)
                .transpose()?
                .unwrap_or_default(),
            gi,
        },
        "-dci" => Mig::DestroyComputeInstances { gi, ci },
        _ => Mig::DestroyGpuInstances { gi },
    })
}

/// A comma-separated list of profiles.
fn profiles(text: &str) -> Result<Vec<ProfileSpec>, String> {
    text.split(',').map(ProfileSpec::parse).collect()
}

/// A comma-separated list of instance ids.
fn ids(flag: &str, text: &str) -> Result<Vec<u32>, String> {
    text.split(',')
        .map(|id| {
            id.trim().parse::<u32>().map_err(|_| {
                format!(
                    "{flag} {text}: instance ids are numbers separated by commas (e.g. {flag} 1,2)"
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(line: &str) -> Result<MigArgs, String> {
        let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        parse(&args)
    }

    fn command_of(line: &str) -> Mig {
        parsed(line)
            .unwrap_or_else(|err| panic!("{line}: {err}"))
            .command
    }

    #[test]
    fn the_listings() {
        assert_eq!(command_of("-lgip"), Mig::ListProfiles);
        assert_eq!(
            command_of("--list-gpu-instance-profiles"),
            Mig::ListProfiles
        );
        assert_eq!(command_of("-lgipp"), Mig::ListPlacements);
        assert_eq!(command_of("-lgi"), Mig::ListGpuInstances { gi: None });
        assert_eq!(
            command_of("-lci -gi 1,2"),
            Mig::ListComputeInstances {
                gi: Some(vec![1, 2]),
                ci: None
            }
        );
        assert_eq!(
            parsed("-i 0 -lgip"),
            Ok(MigArgs {
                command: Mig::ListProfiles,
                gpu: Some("0".to_owned())
            })
        );
        assert_eq!(command_of("-h"), Mig::Help);
    }

    #[test]
    fn creating_takes_ids_and_names() {
        assert_eq!(
            command_of("-cgi 19,1g.10gb,1g.10gb+me -C"),
            Mig::CreateGpuInstances {
                profiles: vec![
                    ProfileSpec::Id(19),
                    ProfileSpec::Name("1g.10gb".to_owned()),
                    ProfileSpec::Name("1g.10gb+me".to_owned())
                ],
                default_ci: true
            }
        );
        let args = ["-cgi".to_owned(), "MIG 3g.40gb,9".to_owned()];
        assert_eq!(
            parse(&args).map(|it| it.command),
            Ok(Mig::CreateGpuInstances {
                profiles: vec![ProfileSpec::Name("3g.40gb".to_owned()), ProfileSpec::Id(9)],
                default_ci: false
            })
        );
        assert_eq!(
            command_of("--create-gpu-instance=14"),
            Mig::CreateGpuInstances {
                profiles: vec![ProfileSpec::Id(14)],
                default_ci: false
            }
        );
        assert_eq!(
            command_of("-cci -gi 3"),
            Mig::CreateComputeInstances {
                profiles: vec![],
                gi: Some(vec![3])
            }
        );
        assert_eq!(
            command_of("-cci 0,0 -gi 3"),
            Mig::CreateComputeInstances {
                profiles: vec![ProfileSpec::Id(0), ProfileSpec::Id(0)],
                gi: Some(vec![3])
            }
        );
    }

    #[test]
    fn destroying_takes_instance_ids() {
        assert_eq!(
            command_of("-dci"),
            Mig::DestroyComputeInstances { gi: None, ci: None }
        );
        assert_eq!(
            command_of("-dci -ci 0 -gi 1,2"),
            Mig::DestroyComputeInstances {
                gi: Some(vec![1, 2]),
                ci: Some(vec![0])
            }
        );
        assert_eq!(
            command_of("-i 1 -dgi -gi 7"),
            Mig::DestroyGpuInstances { gi: Some(vec![7]) }
        );
    }

    #[test]
    fn profiles_match_by_id_or_name() {
        let spec = ProfileSpec::Name("1g.10gb".to_owned());
        assert!(spec.matches(19, "1g.10gb"));
        assert!(spec.matches(19, "MIG 1g.10gb"));
        assert!(!spec.matches(20, "1g.10gb+me"));
        assert!(ProfileSpec::Id(20).matches(20, "1g.10gb+me"));
        assert_eq!(ProfileSpec::Id(9).text(), "9");
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        for (line, message) in [
            ("", "needs an operation"),
            ("-lgi -lci", "Invalid combination"),
            ("-lgip -gi 1", "Invalid combination"),
            ("-lgi -C", "Invalid combination"),
            ("-dgi -ci 0", "Invalid combination"),
            ("-cgi", "-cgi needs a value"),
            ("-cgi 19,,14", "is not a profile"),
            ("-dgi -gi one", "instance ids are numbers"),
            ("-gi", "-gi needs a value"),
            ("-lgi -x", "Invalid argument or flag: -x"),
        ] {
            let err = parsed(line).expect_err(line);
            assert!(err.contains(message), "{line}: {err}");
        }
    }
}
