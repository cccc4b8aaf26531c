//! The sysfs text parsers of uverbs-abi (`uverbs_abi::sysfs`): GIDs
//! (`fe80:0000:…`), GUIDs (`xxxx:xxxx:xxxx:xxxx`), P_Keys, device numbers,
//! node and GID types, over arbitrary (UTF-8) text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use uverbs_abi::sysfs;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Some(gid) = sysfs::gid(&text) {
        // Whatever parsed reads back the same from its canonical form.
        let canon: Vec<String> = gid
            .chunks(2)
            .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
            .collect();
        assert_eq!(sysfs::gid(&canon.join(":")), Some(gid));
    }
    if let Some(guid) = sysfs::guid(&text) {
        let hex = format!("{guid:016x}");
        let groups: Vec<&str> = (0..4).map(|i| &hex[4 * i..4 * i + 4]).collect();
        assert_eq!(sysfs::guid(&groups.join(":")), Some(guid));
    }
    let _ = (sysfs::pkey(&text), sysfs::dev_t(&text), sysfs::node_type(&text));
    let _ = (sysfs::gid_type(&text, true), sysfs::gid_type(&text, false));
});
