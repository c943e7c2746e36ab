//! The command line, parsed without side effects.
//!
//! nvidia-smi's own syntax (`--query-gpu=a,b --format=csv,noheader`, `-i 0`, `-mig 1`), for
//! the subset this mock answers; `mig …` goes to `mig_cli.rs`. Anything else is a usage error
//! (exit 2, as nvidia-smi's "invalid argument or flag").

use crate::args;
use crate::mig_cli::{self, Mig};

/// What to print.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `--version`: the driver, NVML and CUDA versions (what the DRA driver's init container runs).
    Version,
    /// `-L` / `--list-gpus`: `GPU <i>: <name> (UUID: <uuid>)`.
    List,
    /// `--query-gpu=<fields> --format=csv[,noheader][,nounits]`.
    Query {
        /// The fields, in order.
        fields: Vec<Field>,
        /// Whether to print the header line.
        header: bool,
    },
    /// `-q` / `--query`: every GPU's details as indented text; with `-x` / `--xml-format`, as
    /// the `<nvidia_smi_log>` XML document.
    Report {
        /// `-x`: XML instead of text.
        xml: bool,
    },
    /// No arguments: a short per-GPU table.
    Summary,
    /// `-mig 0|1` / `--multi-instance-gpu=0|1`: disable or enable MIG mode.
    MigMode(bool),
    /// `mig …`: MIG profiles and instances.
    Mig(Mig),
    /// `-h` / `--help`.
    Help,
}

/// A `--query-gpu` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `index`.
    Index,
    /// `name`.
    Name,
    /// `uuid` (`gpu_uuid`).
    Uuid,
    /// `pci.bus_id` (`gpu_bus_id`).
    PciBusId,
    /// `serial`.
    Serial,
    /// `driver_version`.
    DriverVersion,
    /// `count`.
    Count,
}

impl Field {
    /// Parses a field name as nvidia-smi spells it.
    pub fn parse(name: &str) -> Option<Field> {
        Some(match name.trim() {
            "index" => Field::Index,
            "name" | "gpu_name" => Field::Name,
            "uuid" | "gpu_uuid" => Field::Uuid,
            "pci.bus_id" | "gpu_bus_id" => Field::PciBusId,
            "serial" => Field::Serial,
            "driver_version" => Field::DriverVersion,
            "count" => Field::Count,
            _ => return None,
        })
    }

    /// The header nvidia-smi prints for the field.
    pub fn header(self) -> &'static str {
        match self {
            Field::Index => "index",
            Field::Name => "name",
            Field::Uuid => "uuid",
            Field::PciBusId => "pci.bus_id",
            Field::Serial => "serial",
            Field::DriverVersion => "driver_version",
            Field::Count => "count",
        }
    }
}

/// A parsed command line: the command and an optional `-i` GPU index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// What to print.
    pub command: Command,
    /// `-i <index>` / `--id=<index>`: only this GPU.
    pub gpu: Option<u32>,
}

/// The usage text (stdout for `--help`, stderr after a usage error).
pub const USAGE: &str = "\
nvidia-smi (cdsim mock driver): answers through libnvidia-ml.so.1
  --version                                   driver, NVML and CUDA versions
  -L, --list-gpus                             one line per GPU
  --query-gpu=<fields> --format=csv[,noheader][,nounits]
                                              fields: index, name, uuid, pci.bus_id, serial,
                                              driver_version, count
  -q, --query                                 every GPU's details (driver, CUDA, product, UUID,
                                              serial, minor number, PCI, memory, fabric)
  -x, --xml-format                            with -q: as XML (<nvidia_smi_log>)
  -i, --id=<index>                            only this GPU
  -mig, --multi-instance-gpu=<0|1>            disable or enable MIG mode (with -i: that GPU)
  -L                                          also lists each GPU's MIG devices
mig                                           MIG profiles and instances: nvidia-smi mig -h
Other nvidia-smi operations (-pm, -r, ...) are not available on the mock.";

/// Parses `args` (without the program name); a usage error says what is wrong.
pub fn parse(args: &[String]) -> Result<Invocation, String> {
    if let Some(("mig", rest)) = args
        .split_first()
        .map(|(first, rest)| (first.as_str(), rest))
    {
        let parsed = mig_cli::parse(rest)?;
        return Ok(Invocation {
            command: Command::Mig(parsed.command),
            gpu: parsed.gpu.as_deref().map(gpu_index).transpose()?,
        });
    }
    let mut command = None;
    let mut query = None;
    let mut format = None;
    let mut gpu = None;
    let mut xml = false;
    let mut iter = args.iter();
    let set = |slot: &mut Option<Command>, value: Command| match slot.replace(value) {
        None => Ok(()),
        Some(_) => Err("Invalid combination of input arguments.".to_owned()),
    };
    while let Some(arg) = iter.next() {
        let (flag, inline) = args::split(arg);
        let mut value = |name: &str| args::value(name, inline, &mut iter);
        match flag {
            "--version" => set(&mut command, Command::Version)?,
            "-L" | "--list-gpus" => set(&mut command, Command::List)?,
            "-h" | "--help" => set(&mut command, Command::Help)?,
            "-q" | "--query" => set(&mut command, Command::Report { xml: false })?,
            "-x" | "--xml-format" => xml = true,
            "--query-gpu" => query = Some(value("--query-gpu")?),
            "--format" => format = Some(value("--format")?),
            "-i" | "--id" => gpu = Some(gpu_index(&value("-i")?)?),
            "-mig" | "--multi-instance-gpu" => {
                let mode = match value("-mig")?.as_str() {
                    "0" => false,
                    "1" => true,
                    other => {
                        return Err(format!("-mig {other}: 0 disables MIG mode, 1 enables it"))
                    }
                };
                set(&mut command, Command::MigMode(mode))?;
            }
            other => return Err(format!("Invalid argument or flag: {other}")),
        }
    }
    if let Some(fields) = query {
        let fields = fields
            .split(',')
            .map(|name| {
                Field::parse(name).ok_or_else(|| {
                    format!("Field \"{}\" is not a valid field to query.", name.trim())
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let format = format.ok_or("--query-gpu needs --format=csv")?;
        let mut options = format.split(',');
        if options.next() != Some("csv") {
            return Err(format!("--format={format}: only csv is supported"));
        }
        let mut header = true;
        for option in options {
            match option {
                "noheader" => header = false,
                "nounits" => {}
                other => return Err(format!("--format: unknown option {other}")),
            }
        }
        set(&mut command, Command::Query { fields, header })?;
    } else if format.is_some() {
        return Err("--format needs --query-gpu".to_owned());
    }
    let command = match (command, xml) {
        (Some(Command::Report { .. }), xml) => Command::Report { xml },
        (_, true) => return Err("-x needs -q".to_owned()),
        (command, false) => command.unwrap_or(Command::Summary),
    };
    Ok(Invocation { command, gpu })
}

/// `-i`'s GPU index.
fn gpu_index(text: &str) -> Result<u32, String> {
    text.parse::<u32>()
        .map_err(|_| format!("-i {text}: the mock selects GPUs by index only (e.g. -i 0)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_queries_nvidia_software_makes() {
        assert_eq!(
            parse(&args("--version")).map(|it| it.command),
            Ok(Command::Version)
        );
        assert_eq!(parse(&args("-L")).map(|it| it.command), Ok(Command::List));
        assert_eq!(parse(&[]).map(|it| it.command), Ok(Command::Summary));
        assert_eq!(
            parse(&args("-q")).map(|it| it.command),
            Ok(Command::Report { xml: false })
        );
        for line in ["-q -x", "-x -q", "--query --xml-format"] {
            assert_eq!(
                parse(&args(line)).map(|it| it.command),
                Ok(Command::Report { xml: true }),
                "{line}"
            );
        }
        assert_eq!(
            parse(&args("-q -x -i 1")),
            Ok(Invocation {
                command: Command::Report { xml: true },
                gpu: Some(1)
            })
        );
        assert_eq!(
            parse(&args(
                "--query-gpu=index,uuid,pci.bus_id --format=csv,noheader -i 2"
            )),
            Ok(Invocation {
                command: Command::Query {
                    fields: vec![Field::Index, Field::Uuid, Field::PciBusId],
                    header: false
                },
                gpu: Some(2)
            })
        );
        assert_eq!(
            parse(&args("--query-gpu name --format csv")).map(|it| it.command),
            Ok(Command::Query {
                fields: vec![Field::Name],
                header: true
            })
        );
    }

    #[test]
    fn mig_mode_and_the_mig_subcommand() {
        assert_eq!(
            parse(&args("-i 0 -mig 1")),
            Ok(Invocation {
                command: Command::MigMode(true),
                gpu: Some(0)
            })
        );
        assert_eq!(
            parse(&args("--multi-instance-gpu=0")).map(|it| it.command),
            Ok(Command::MigMode(false))
        );
        assert_eq!(
            parse(&args("mig -i 2 -lgip")),
            Ok(Invocation {
                command: Command::Mig(Mig::ListProfiles),
                gpu: Some(2)
            })
        );
        assert_eq!(
            parse(&args("mig -lgi")).map(|it| it.command),
            Ok(Command::Mig(Mig::ListGpuInstances { gi: None }))
        );
    }

    #[test]
    fn everything_else_is_a_usage_error() {
        for (line, message) in [
            ("-pm 1", "Invalid argument or flag: -pm"),
            ("-i 0 -r", "Invalid argument or flag: -r"),
            ("-mig 2", "1 enables it"),
            ("-mig 1 -L", "Invalid combination"),
            ("mig -i GPU-1 -lgi", "by index only"),
            (
                "--query-gpu=bogus --format=csv",
                "Field \"bogus\" is not a valid field",
            ),
            ("--query-gpu=name", "needs --format=csv"),
            ("--query-gpu=name --format=xml", "only csv"),
            ("--format=csv", "needs --query-gpu"),
            ("--version -L", "Invalid combination"),
            ("-i GPU-1234", "by index only"),
            ("-i", "needs a value"),
            ("-x", "-x needs -q"),
            ("-L -x", "-x needs -q"),
            ("-q -L", "Invalid combination"),
        ] {
            let err = parse(&args(line)).expect_err(line);
            assert!(err.contains(message), "{line}: {err}");
        }
    }
}
