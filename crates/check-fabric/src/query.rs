//! Which fabric entry point to call: `nvmlDeviceGetGpuFabricInfoV` with the
//! v3 tag, then the v2 tag when the library answers VERSION_MISMATCH, then
//! the v1 `nvmlDeviceGetGpuFabricInfo` when the versioned symbol is absent or
//! knows neither tag. Pure over [`FabricSource`].

use crate::report::{Fabric, FabricInfo, Return};

/// `nvmlGpuFabricInfo_v3` = `sizeof(nvmlGpuFabricInfo_v3_t) | 3 << 24`.
pub const FABRIC_INFO_V3: u32 = 0x0300_0028;
/// `nvmlGpuFabricInfo_v2` = `sizeof(nvmlGpuFabricInfo_v2_t) | 2 << 24`.
pub const FABRIC_INFO_V2: u32 = 0x0200_0024;
/// `NVML_ERROR_FUNCTION_NOT_FOUND`, when the library has no fabric entry point.
pub const FUNCTION_NOT_FOUND: Return = Return(13);

/// The two fabric entry points of a loaded library; `None` = symbol absent.
pub trait FabricSource {
    /// A device handle.
    type Device: Copy;
    /// `nvmlDeviceGetGpuFabricInfoV` with the given version tag.
    fn fabric_versioned(
        &self,
        device: Self::Device,
        version: u32,
    ) -> Option<Result<FabricInfo, Return>>;
    /// `nvmlDeviceGetGpuFabricInfo` (v1).
    fn fabric_v1(&self, device: Self::Device) -> Option<Result<FabricInfo, Return>>;
}

/// One GPU's fabric identity through the newest entry point the library has.
///
/// NOT_SUPPORTED becomes [`Fabric::NotSupported`]; any other error is returned.
pub fn query<S: FabricSource>(source: &S, device: S::Device) -> Result<Fabric, Return> {
    let mut last_err = FUNCTION_NOT_FOUND;
    for version in [FABRIC_INFO_V3, FABRIC_INFO_V2] {
        match source.fabric_versioned(device, version) {
            None => break,
            Some(Err(Return::ARGUMENT_VERSION_MISMATCH)) => {
                last_err = Return::ARGUMENT_VERSION_MISMATCH
            }
            Some(answer) => return classify(answer),
        }
    }
    match source.fabric_v1(device) {
        None => Err(last_err),
        Some(answer) => classify(answer),
    }
}

fn classify(answer: Result<FabricInfo, Return>) -> Result<Fabric, Return> {
    match answer {
        Ok(info) => Ok(Fabric::Info(info)),
        Err(Return::NOT_SUPPORTED) => Ok(Fabric::NotSupported),
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// A library described by which tags its V entry point accepts.
    struct Library {
        versioned: Option<Vec<u32>>,
        has_v1: bool,
        answer: Result<FabricInfo, Return>,
        calls: RefCell<Vec<String>>,
    }

    impl FabricSource for Library {
        type Device = ();
        fn fabric_versioned(&self, _: (), version: u32) -> Option<Result<FabricInfo, Return>> {
            let accepted = self.versioned.as_ref()?;
            self.calls.borrow_mut().push(format!("V {version:#x}"));
            if accepted.contains(&version) {
                Some(self.answer)
            } else {
                Some(Err(Return::ARGUMENT_VERSION_MISMATCH))
            }
        }
        fn fabric_v1(&self, _: ()) -> Option<Result<FabricInfo, Return>> {
            if !self.has_v1 {
                return None;
            }
            self.calls.borrow_mut().push("v1".to_owned());
            Some(self.answer)
        }
    }

    const INFO: FabricInfo = FabricInfo {
        cluster_uuid: [1; 16],
        clique_id: 7,
        state: 3,
    };

    fn library(versioned: Option<&[u32]>, has_v1: bool) -> Library {
        Library {
            versioned: versioned.map(<[u32]>::to_vec),
            has_v1,
            answer: Ok(INFO),
            calls: RefCell::new(Vec::new()),
        }
    }

    #[test]
    fn v3_is_preferred() {
        let lib = library(Some(&[FABRIC_INFO_V2, FABRIC_INFO_V3]), true);
        assert_eq!(query(&lib, ()), Ok(Fabric::Info(INFO)));
        assert_eq!(*lib.calls.borrow(), ["V 0x3000028"]);
    }

    #[test]
    fn v2_follows_a_version_mismatch() {
        let lib = library(Some(&[FABRIC_INFO_V2]), true);
        assert_eq!(query(&lib, ()), Ok(Fabric::Info(INFO)));
        assert_eq!(*lib.calls.borrow(), ["V 0x3000028", "V 0x2000024"]);
    }

    #[test]
    fn v1_when_the_versioned_symbol_is_absent() {
        let lib = library(None, true);
        assert_eq!(query(&lib, ()), Ok(Fabric::Info(INFO)));
        assert_eq!(*lib.calls.borrow(), ["v1"]);
    }

    #[test]
    fn v1_when_no_tag_is_accepted() {
        let lib = library(Some(&[]), true);
        assert_eq!(query(&lib, ()), Ok(Fabric::Info(INFO)));
        assert_eq!(*lib.calls.borrow(), ["V 0x3000028", "V 0x2000024", "v1"]);
    }

    #[test]
    fn no_entry_point_is_function_not_found() {
        assert_eq!(query(&library(None, false), ()), Err(FUNCTION_NOT_FOUND));
        assert_eq!(
            query(&library(Some(&[]), false), ()),
            Err(Return::ARGUMENT_VERSION_MISMATCH)
        );
    }

    #[test]
    fn not_supported_and_errors_stop_the_fallback() {
        let mut lib = library(Some(&[FABRIC_INFO_V3]), true);
        lib.answer = Err(Return::NOT_SUPPORTED);
        assert_eq!(query(&lib, ()), Ok(Fabric::NotSupported));
        lib.answer = Err(Return(15));
        assert_eq!(query(&lib, ()), Err(Return(15)));
        assert_eq!(
            lib.calls.borrow().len(),
            2,
            "no v1 call after a real answer"
        );
    }
}
