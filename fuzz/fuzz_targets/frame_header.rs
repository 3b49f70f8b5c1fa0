//! The 16-byte header before every message part: any 16 bytes decode, encoding gives back their fields with
//! zero padding, and the check against the expected part accepts exactly that part's encoded header.
#![no_main]

use collbench::transport::tcp::handshake::{FrameHeader, FRAME_HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 * FRAME_HEADER_LEN {
        return;
    }
    let mut got = [0u8; FRAME_HEADER_LEN];
    got.copy_from_slice(&data[..FRAME_HEADER_LEN]);
    let mut exp = [0u8; FRAME_HEADER_LEN];
    exp.copy_from_slice(&data[FRAME_HEADER_LEN..2 * FRAME_HEADER_LEN]);
    let h = FrameHeader::decode(&got);
    assert_eq!(h.encode()[..8], got[..8]);
    assert_eq!(FrameHeader::decode(&h.encode()), h);
    let expected = FrameHeader::decode(&exp);
    assert_eq!(FrameHeader::check(&got, expected).is_ok(), got == expected.encode());
});
