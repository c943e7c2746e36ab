//! The daemon's log: its sink, filtered by `LOG_LEVEL`, and its start-up lines.

use std::io::Write;
use std::sync::Mutex;

use imex_double::config::{Config, LogTarget};
use imex_double::{clock, MARKER, NO_GPU_VERSION};

/// The daemon's name in its messages.
pub const NAME: &str = "nvidia-imex (IMEX test double)";

/// The log sink, filtered by `LOG_LEVEL`.
pub struct Log {
    level: u8,
    sink: Mutex<Box<dyn Write + Send>>,
}

impl Log {
    pub fn at(&self, level: u8, tag: &str, msg: &str) {
        if level > self.level {
            return;
        }
        if let Ok(mut sink) = self.sink.lock() {
            let _ = writeln!(sink, "[{}] [{tag}] {msg}", clock::now());
            let _ = sink.flush();
        }
    }
    pub fn info(&self, msg: &str) {
        self.at(4, "INFO", msg);
    }
    pub fn warn(&self, msg: &str) {
        self.at(3, "WARNING", msg);
    }
}

pub fn open_log(cfg: &Config) -> Result<Log, String> {
    let level = match cfg.get("LOG_LEVEL") {
        None => 4,
        Some(text) => text
            .parse()
            .map_err(|_| format!("{}: LOG_LEVEL={text:?} is not 0-4", cfg.path()))?,
    };
    let append = cfg.append_log().map_err(|e| e.to_string())?;
    let sink: Box<dyn Write + Send> = match cfg.log_target() {
        LogTarget::Stderr => Box::new(std::io::stderr()),
        // Unopenable: stderr, as documented.
        LogTarget::File(path) => match std::fs::OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(&path)
        {
            Ok(file) => Box::new(file),
            Err(err) => {
                eprintln!("{NAME}: cannot open log file {path} ({err}); logging to stderr");
                Box::new(std::io::stderr())
            }
        },
    };
    Ok(Log {
        level,
        sink: Mutex::new(sink),
    })
}

/// The startup lines: the version and every configuration option; the stats file's first line.
pub fn log_startup(cfg: &Config, log: &Log) {
    log.info(&format!(
        "IMEX version {NO_GPU_VERSION} ({MARKER}) is running with the following configuration options"
    ));
    for (key, value) in cfg.entries() {
        log.info(&format!("{key}={value}"));
    }
    match cfg.stats_file() {
        Some(path) if LogTarget::File(path.clone()) != cfg.log_target() => {
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
            {
                Ok(mut file) => {
                    let _ = writeln!(file, "[{}] stats: started ({MARKER})", clock::now());
                }
                Err(err) => log.warn(&format!("cannot open stats file {path}: {err}")),
            }
        }
        _ => {}
    }
}
