//! Checks of a `health` block: every error names its field.

use super::{ClocksEventReason, Health};
use crate::error::{invalid, Result};

/// NVML's string buffers (including the NUL).
const PART_NUMBER_BUFFER: usize = 80;
const VBIOS_BUFFER: usize = 32;
const INFOROM_BUFFER: usize = 16;
const GSP_BUFFER: usize = 64;
/// `NVML_PSTATE_15` and `NVML_PSTATE_UNKNOWN`.
const LAST_PSTATE: u32 = 15;
const UNKNOWN_PSTATE: u32 = 32;

/// Checks a `health` block found at `field`.
pub(crate) fn validate(field: &str, health: &Health) -> Result<()> {
    let at = |name: &str| format!("{field}.{name}");
    if let Some(power) = &health.power {
        let range = power.min_limit_mw..=power.max_limit_mw;
        for (name, value) in [
            ("limit_mw", power.limit_mw),
            ("default_limit_mw", power.default_limit_mw),
            ("enforced_limit_mw", power.enforced_limit_mw),
        ] {
            if !range.contains(&value) {
                return invalid(
                    at(&format!("power.{name}")),
                    format!("is {value}, must be in min_limit_mw..=max_limit_mw ({range:?})"),
                );
            }
        }
    }
    if let Some(state) = health.performance_state {
        if state > LAST_PSTATE && state != UNKNOWN_PSTATE {
            return invalid(
                at("performance_state"),
                format!("is {state}, must be 0..=15 or 32 (unknown)"),
            );
        }
    }
    if let Some(reasons) = &health.clocks_event_reasons {
        let supported = ClocksEventReason::mask(&reasons.supported);
        if let Some(reason) = reasons
            .active
            .iter()
            .find(|reason| reason.bit() & supported == 0)
        {
            return invalid(
                at("clocks_event_reasons.active"),
                format!("{reason:?} is not among the supported reasons"),
            );
        }
    }
    if let Some(fans) = &health.fans {
        if fans.speed_percent > 100 {
            return invalid(
                at("fans.speed_percent"),
                format!("is {}, must be at most 100", fans.speed_percent),
            );
        }
    }
    if let Some(bar1) = &health.bar1_memory {
        if bar1.used > bar1.total {
            return invalid(at("bar1_memory.used"), "must not exceed total");
        }
    }
    strings(field, health)
}

fn strings(field: &str, health: &Health) -> Result<()> {
    let mut checks: Vec<(String, &str, usize)> = Vec::new();
    if let Some(text) = &health.board_part_number {
        checks.push(("board_part_number".into(), text, PART_NUMBER_BUFFER));
    }
    if let Some(text) = &health.vbios_version {
        checks.push(("vbios_version".into(), text, VBIOS_BUFFER));
    }
    if let Some(inforom) = &health.inforom {
        checks.push((
            "inforom.image_version".into(),
            &inforom.image_version,
            INFOROM_BUFFER,
        ));
        for (name, text) in [
            ("oem", &inforom.oem),
            ("ecc", &inforom.ecc),
            ("power", &inforom.power),
        ] {
            if let Some(text) = text {
                checks.push((format!("inforom.{name}"), text, INFOROM_BUFFER));
            }
        }
    }
    if let Some(gsp) = &health.gsp_firmware {
        checks.push(("gsp_firmware.version".into(), &gsp.version, GSP_BUFFER));
    }
    for (name, text, buffer) in checks {
        if text.is_empty() || text.len() >= buffer {
            return invalid(
                format!("{field}.{name}"),
                format!(
                    "{text:?} must be 1..={} bytes (NVML's buffer holds {buffer} with the NUL)",
                    buffer - 1
                ),
            );
        }
    }
    Ok(())
}
