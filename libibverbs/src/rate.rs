//! `enum ibv_rate` conversions: `ibv_rate_to_mult`, `mult_to_ibv_rate`
//! (multiples of 2.5 Gb/s, for the rates IB defines as such) and
//! `ibv_rate_to_mbps`, `mbps_to_ibv_rate` (every rate, at its signalled
//! data rate: 14 Gb/s FDR is 14062 Mb/s). One table, read both ways.

use crate::export;
use crate::guard;
use std::ffi::c_int;

/// (`enum ibv_rate` value, multiple of 2.5 Gb/s or -1, Mb/s).
const RATES: [(c_int, c_int, c_int); 24] = [
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, -1, 14062),
    (12, -1, 56250),
    (13, -1, 112500),
    (14, -1, 168750),
    (15, -1, 25781),
    (16, -1, 103125),
    (17, -1, 206250),
    (18, -1, 309375),
    (19, 11, 28125),
    (20, 20, 53125),
    (21, 160, 425000),
    (22, 240, 637500),
    (23, 320, 850000),
    (24, 480, 1275000),
    // IBV_RATE_MAX converts to nothing.
    (0, -1, -1),
];

/// `IBV_RATE_MAX`: what the reverse conversions return for no match.
const RATE_MAX: c_int = 0;

extern "C" fn rate_to_mult(rate: c_int) -> c_int {
    guard::value(-1, || {
        RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
    })
}
export!("ibv_rate_to_mult" = rate_to_mult);

extern "C" fn mult_to_rate(mult: c_int) -> c_int {
    guard::value(RATE_MAX, || {
        match RATES.iter().find(|r| r.1 == mult && mult > 0) {
            Some(r) => r.0,
            None => RATE_MAX,
        }
    })
}
export!("mult_to_ibv_rate" = mult_to_rate);

extern "C" fn rate_to_mbps(rate: c_int) -> c_int {
    guard::value(-1, || {
        RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
    })
}
export!("ibv_rate_to_mbps" = rate_to_mbps);

extern "C" fn mbps_to_rate(mbps: c_int) -> c_int {
    guard::value(RATE_MAX, || {
        match RATES.iter().find(|r| r.2 == mbps && mbps > 0) {
            Some(r) => r.0,
            None => RATE_MAX,
        }
    })
}
export!("mbps_to_ibv_rate" = mbps_to_rate);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every input either side of the table against rdma-core's own
    /// functions (the installed libibverbs, called by a C program compiled
    /// now: test-time C only, as the layout tests).
    #[test]
    // Miri cannot run the C compiler.
    #[cfg_attr(miri, ignore)]
    fn the_same_as_rdma_core() {
        let inputs: Vec<c_int> = (-2..30)
            .chain(RATES.iter().flat_map(|r| [r.1, r.2, r.2 + 1]))
            .collect();
        let list = inputs
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let prog = format!(
            "#include <stdio.h>\n#include <infiniband/verbs.h>\n\
             int main(void) {{ int in[] = {{{list}}};\n\
             for (unsigned i = 0; i < sizeof in / sizeof in[0]; i++)\n\
             printf(\"%d %d %d %d\\n\", ibv_rate_to_mult(in[i]), mult_to_ibv_rate(in[i]),\n\
             ibv_rate_to_mbps(in[i]), mbps_to_ibv_rate(in[i]));\n\
             return 0; }}\n"
        );
        let text = crate::ctest::run_c("rate", &prog, true);
        for (i, line) in inputs.iter().zip(text.lines()) {
            let ours = format!(
                "{} {} {} {}",
                rate_to_mult(*i),
                mult_to_rate(*i),
                rate_to_mbps(*i),
                mbps_to_rate(*i)
            );
            assert_eq!(ours, line, "input {i}");
        }
        assert_eq!(text.lines().count(), inputs.len());
    }
}
