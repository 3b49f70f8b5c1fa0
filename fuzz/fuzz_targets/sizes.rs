//! The size parser (`-b 64M`, `-e 1.5GiB`): any text parses or says why, and every size it prints as a
//! command-line word or as an exact label parses back to the same number of bytes.
#![no_main]

use collbench::sizes::{format_size, format_size_arg, parse_size};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(v) = parse_size(text) {
            assert_eq!(parse_size(&format_size_arg(v)), Ok(v), "{text:?}");
        }
    }
    if data.len() >= 8 {
        let v = u64::from_le_bytes(data[..8].try_into().expect("8 bytes"));
        assert_eq!(parse_size(&format_size_arg(v)), Ok(v));
        let label = format_size(v);
        if !label.starts_with('~') {
            assert_eq!(parse_size(&label), Ok(v), "{label}");
        }
    }
});
