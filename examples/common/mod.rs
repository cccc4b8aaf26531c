//! What the examples share: the device and port named on the command line,
//! and a wait for completions that fails on any that did not succeed.

use rverbs::{Context, Cq, Error, Result, Wc};
use std::time::{Duration, Instant};

/// The device named by the first argument (default: the first device) and
/// the port (second argument, default 1).
pub fn open_from_args() -> Result<(Context, u8)> {
    let mut args = std::env::args().skip(1);
    let dev = args.next();
    let port = match args.next() {
        Some(p) => p.parse::<u8>().map_err(|e| Error::InvalidArgument {
            what: format!("port {p:?}: {e}"),
        })?,
        None => 1,
    };
    Ok((Context::open_by_name(dev.as_deref())?, port))
}

/// The next `n` completions of `cq` (within 5 seconds), all successful.
pub fn wait(cq: &mut Cq, n: usize) -> Result<Vec<Wc>> {
    let mut wcs = vec![Wc::default(); n];
    let got = cq.poll_until(&mut wcs, Instant::now() + Duration::from_secs(5));
    let failed = wcs[..got].iter().find(|w| !w.is_ok());
    if got < n || failed.is_some() {
        return Err(Error::InvalidArgument {
            what: format!("{got} of {n} completions, failed: {failed:?}"),
        });
    }
    Ok(wcs)
}
