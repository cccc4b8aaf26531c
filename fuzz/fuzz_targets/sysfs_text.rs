//! The sysfs text parsers: GIDs (`fe80:0000:…`) and GUIDs
//! (`xxxx:xxxx:xxxx:xxxx`), over arbitrary (UTF-8) text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(gid) = rverbs::query::parse_gid(&text) {
        // Whatever parsed reads back the same from its canonical form.
        let canon: Vec<String> = gid
            .chunks(2)
            .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
            .collect();
        assert_eq!(rverbs::query::parse_gid(&canon.join(":")), Some(gid));
    }
    let _ = rverbs::device::parse_guid(&text);
});
