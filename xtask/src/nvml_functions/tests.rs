//! The pure parser on small headers and bridge files with the shapes nvml.h and upstream use.

use super::parse::*;

const HEADER: &str = r#"
#define DECLDIR
#define DEPRECATED(ver) /* nop */
#define NVML_STRUCT_VERSION(data, ver) (unsigned int)(sizeof(x) | \
    ((ver) << 24U))
#ifdef __cplusplus
extern "C" {
#endif
#define NVML_FMT "//not a comment"
typedef enum nvmlReturn_enum { NVML_SUCCESS = 0, NVML_ERROR_UNKNOWN = 999 } nvmlReturn_t;
typedef struct
{
    struct nvmlDevice_st* handle;
} nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;
typedef unsigned int nvmlVgpuInstance_t;
typedef enum nvmlClockType_enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM } nvmlClockType_t;
typedef struct nvmlPciInfo_st { char busId[32]; unsigned int domain; } nvmlPciInfo_t;
typedef nvmlPciInfo_t nvmlPciInfoAlias_t;
/** A comment with a declaration in it: nvmlReturn_t DECLDIR nvmlNot(void); */
nvmlReturn_t DECLDIR nvmlInit_v2(void);
const DECLDIR char* nvmlErrorString(nvmlReturn_t result);
DEPRECATED(13.0) nvmlReturn_t DECLDIR nvmlDeviceGetClock(nvmlDevice_t device, nvmlClockType_t type,
                                                       unsigned long long *value);
nvmlReturn_t DECLDIR nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlPciInfo_t *data, unsigned int timeoutms);
nvmlReturn_t DECLDIR nvmlVgpuSet(nvmlVgpuInstance_t vgpu, float share, double ratio, const char *name);
#ifdef NVML_NO_UNVERSIONED_FUNC_DEFS
nvmlReturn_t DECLDIR nvmlEventSetWait(nvmlEventSet_t set, nvmlPciInfo_t * data, unsigned int timeoutms);
nvmlReturn_t DECLDIR nvmlInit(void);
#endif
#ifdef __cplusplus
}
#endif
"#;

fn signature(function: &Function) -> (String, Returns, Vec<Kind>) {
    (
        function.name.clone(),
        function.returns,
        function.params.clone(),
    )
}

#[test]
fn the_header_s_functions_and_kinds() {
    let header = parse_header(HEADER).expect("parses");
    let got: Vec<_> = header.functions.iter().map(signature).collect();
    let want = [
        ("nvmlInit_v2", Returns::Code, vec![]),
        ("nvmlErrorString", Returns::Text, vec![Kind::Int]),
        (
            "nvmlDeviceGetClock",
            Returns::Code,
            vec![Kind::Device, Kind::Int, Kind::Ptr],
        ),
        (
            "nvmlEventSetWait_v2",
            Returns::Code,
            vec![Kind::Handle, Kind::Ptr, Kind::Int],
        ),
        (
            "nvmlVgpuSet",
            Returns::Code,
            vec![Kind::Int, Kind::F32, Kind::F64, Kind::Ptr],
        ),
        (
            "nvmlEventSetWait",
            Returns::Code,
            vec![Kind::Handle, Kind::Ptr, Kind::Int],
        ),
        ("nvmlInit", Returns::Code, vec![]),
    ];
    let want: Vec<_> = want
        .into_iter()
        .map(|(name, returns, params)| (name.to_owned(), returns, params))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn what_cannot_be_classified_fails_naming_it() {
    let by_value = format!(
        "{HEADER}\nnvmlReturn_t DECLDIR nvmlSetPci(nvmlDevice_t device, nvmlPciInfoAlias_t pci);"
    );
    let err = parse_header(&by_value)
        .err()
        .expect("a struct by value fails");
    assert!(
        err.contains("nvmlSetPci") && err.contains("by value"),
        "{err}"
    );
    let unknown = format!("{HEADER}\nnvmlReturn_t DECLDIR nvmlOdd(nvmlMystery_t thing);");
    let err = parse_header(&unknown).err().expect("an unknown type fails");
    assert!(
        err.contains("nvmlOdd") && err.contains("nvmlMystery_t"),
        "{err}"
    );
    let twice = format!("{HEADER}\nnvmlReturn_t DECLDIR nvmlInit(void);");
    assert!(parse_header(&twice).is_err(), "a name declared twice fails");
    assert!(parse_header("int main(void);").is_err(), "not nvml.h");
}

const BRIDGE: &str = r#"
//export nvmlInit_v1
func nvmlInit_v1() C.nvmlReturn_t {
	return nvmlInit_v2()
}

//export nvmlEventSetWait_v1
//nolint:revive // a lint comment between
func nvmlEventSetWait_v1(set C.nvmlEventSet_t, data *C.nvmlPciInfo_t, timeoutms C.uint) C.nvmlReturn_t {
}

//export nvmlDeviceGetClock_v1
func nvmlDeviceGetClock_v1(device C.nvmlDevice_t, a, b C.uint) C.nvmlReturn_t {
}

//export nvmlInternalGetExportTable
func nvmlInternalGetExportTable(table unsafe.Pointer, guid unsafe.Pointer) C.nvmlReturn_t {
}

//export mockInternalHelper
func mockInternalHelper() C.int {
}
"#;

#[test]
fn upstream_s_bridge_and_the_extras() {
    let header = parse_header(HEADER).expect("parses");
    let files = [("b.go".to_owned(), BRIDGE.to_owned())];
    let upstream = parse_bridge(&files, &header.types).expect("parses");
    let names: Vec<&str> = upstream.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "nvmlDeviceGetClock_v1",
            "nvmlEventSetWait_v1",
            "nvmlInit_v1",
            "nvmlInternalGetExportTable"
        ]
    );
    assert_eq!(upstream[0].params, [Kind::Device, Kind::Int, Kind::Int]);
    let extras = extras(&header.functions, &upstream);
    assert_eq!(
        extras,
        [
            // nvmlDeviceGetClock is not declared unversioned: upstream's own signature.
            Extra::Upstream(upstream[0].clone()),
            Extra::Alias {
                name: "nvmlEventSetWait_v1".to_owned(),
                target: "nvmlEventSetWait".to_owned()
            },
            Extra::Alias {
                name: "nvmlInit_v1".to_owned(),
                target: "nvmlInit".to_owned()
            },
            Extra::Upstream(upstream[3].clone()),
        ]
    );
    let broken = [(
        "c.go".to_owned(),
        "//export nvmlX\nfunc other() C.nvmlReturn_t {\n".to_owned(),
    )];
    assert!(parse_bridge(&broken, &header.types).is_err());
}

#[test]
fn the_data_file_splits_into_its_two_parts() {
    let header = parse_header(HEADER).expect("parses");
    let first = render_header_part("v9", &header.functions);
    assert!(first.contains("function nvmlDeviceGetClock return device int ptr\n"));
    assert!(first.contains("function nvmlErrorString string int\n"));
    let second = render_extras_part(
        "snap.tar.gz",
        &[Extra::Alias {
            name: "nvmlInit_v1".to_owned(),
            target: "nvmlInit".to_owned(),
        }],
    );
    assert!(second.ends_with("alias nvmlInit_v1 nvmlInit\n"));
    let text = format!("{first}{second}");
    assert_eq!(split_data(&text), (first.as_str(), second.as_str()));
    assert_eq!(split_data("no marker"), ("no marker", ""));
}
