//! What `Mr::write` and `Mr::read` cost per call, without a kernel: the
//! copy engine they run after their bounds check (`src/mr/shared.rs`,
//! compiled into this program as it is into the library) over plain heap
//! memory, for 4 KiB and 1 MiB at an 8-aligned offset and at an offset of
//! 3 (where the copy merges its first and last bytes into their words
//! with a compare-and-swap).
//!
//! ```text
//! cargo build --release --example bench_mr_copy
//! valgrind --tool=callgrind --callgrind-out-file=cg.mr \
//!     target/release/examples/bench_mr_copy 1000
//! target/release/examples/bench_mr_copy time   # wall clock, median and spread
//! ```
//! `cargo xtask bench` runs the callgrind form (inclusive instructions /
//! calls of each `bench_*` function). Not a test: it checks only that the
//! bytes arrived, so that a broken build cannot report a cheap number.

#[allow(dead_code, unsafe_code)]
#[path = "../src/mr/shared.rs"]
mod shared;

use shared::Region;
use std::hint::black_box;
use std::time::Instant;

const SMALL: usize = 4096;
const LARGE: usize = 1 << 20;

#[inline(never)]
fn bench_write_4k(r: &Region, src: &[u8]) {
    r.write(black_box(0), &src[..SMALL]);
}

#[inline(never)]
fn bench_read_4k(r: &Region, dst: &mut [u8]) {
    r.read(black_box(0), &mut dst[..SMALL]);
}

#[inline(never)]
fn bench_write_4k_at_3(r: &Region, src: &[u8]) {
    r.write(black_box(3), &src[..SMALL]);
}

#[inline(never)]
fn bench_write_1m(r: &Region, src: &[u8]) {
    r.write(black_box(0), &src[..LARGE]);
}

#[inline(never)]
fn bench_read_1m(r: &Region, dst: &mut [u8]) {
    r.read(black_box(0), &mut dst[..LARGE]);
}

type Op = fn(&Region, &mut [u8], &[u8]);

/// The measured calls, by name.
const OPS: [(&str, Op, usize); 5] = [
    ("write 4 KiB", |r, _, s| bench_write_4k(r, s), SMALL),
    ("read 4 KiB", |r, d, _| bench_read_4k(r, d), SMALL),
    (
        "write 4 KiB at offset 3",
        |r, _, s| bench_write_4k_at_3(r, s),
        SMALL,
    ),
    ("write 1 MiB", |r, _, s| bench_write_1m(r, s), LARGE),
    ("read 1 MiB", |r, d, _| bench_read_1m(r, d), LARGE),
];

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "1000".into());
    // The MR's buffer: 8-aligned, as every heap or page buffer is.
    let mut buf = vec![0u64; (LARGE + 64) / 8];
    // SAFETY: `buf` outlives every use of the region, and nothing else
    // reaches it while the region is used.
    let r = unsafe { Region::new(buf.as_mut_ptr().cast(), LARGE + 64) };
    let src: Vec<u8> = (0..LARGE).map(|i| (i * 7 + 1) as u8).collect();
    let mut dst = vec![0u8; LARGE];
    if arg == "time" {
        time(&r, &mut dst, &src);
    } else {
        let n: u64 = arg.parse().expect("iterations");
        for (_, op, _) in OPS {
            for _ in 0..n {
                op(&r, &mut dst, &src);
            }
        }
    }
    r.read(0, &mut dst);
    assert_eq!(dst, src, "the copies did not arrive");
}

/// Wall clock: for each call, 15 samples of a loop long enough to take
/// tens of milliseconds; prints the median and the spread in GB/s.
fn time(r: &Region, dst: &mut [u8], src: &[u8]) {
    for (name, op, bytes) in OPS {
        let reps = (256 << 20) / bytes;
        let mut gbps: Vec<f64> = (0..15)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..reps {
                    op(r, dst, src);
                }
                (reps * bytes) as f64 / t.elapsed().as_secs_f64() / 1e9
            })
            .collect();
        gbps.sort_by(f64::total_cmp);
        println!(
            "{name}: median {:.2} GB/s (min {:.2}, max {:.2})",
            gbps[7], gbps[0], gbps[14]
        );
    }
}
