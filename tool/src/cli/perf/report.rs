//! perftest's report lines.

/// Latency statistics over per-iteration samples (microseconds).
pub fn latency(size: u32, samples: &mut [f64]) {
    let line =
        "---------------------------------------------------------------------------------------";
    println!("{line}");
    println!(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ");
    match latency_stats(samples) {
        Some(s) => println!(
            " {:<7} {:<10}   {:<7.2}        {:<7.2}      {:<7.2}    \t       {:<7.2}      \t{:<7.2} \t\t{:<7.2} \t\t{:<7.2}",
            size, samples.len(), s.min, s.max, s.typical, s.avg, s.stdev, s.p99, s.p999
        ),
        None => println!(" {size:<7} 0          (no samples)"),
    }
    println!("{line}");
}

/// What a latency line shows.
#[derive(Debug, PartialEq)]
struct Stats {
    min: f64,
    max: f64,
    typical: f64,
    avg: f64,
    stdev: f64,
    p99: f64,
    p999: f64,
}

/// Sorts the samples and computes the statistics; `None` without samples.
fn latency_stats(samples: &mut [f64]) -> Option<Stats> {
    samples.sort_by(|a, b| a.total_cmp(b));
    let n = samples.len();
    let (&min, &max) = (samples.first()?, samples.last()?);
    let pct = |p: f64| samples[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    let avg = samples.iter().sum::<f64>() / n as f64;
    let var = samples.iter().map(|s| (s - avg) * (s - avg)).sum::<f64>() / n as f64;
    Some(Stats {
        min,
        max,
        typical: samples[n / 2],
        avg,
        stdev: var.sqrt(),
        p99: pct(0.99),
        p999: pct(0.999),
    })
}

/// Bandwidth figures: peak over the best chunk, average over the run.
pub fn bandwidth(size: u32, iters: u32, secs: f64, peak_bytes_per_sec: f64) {
    let line =
        "---------------------------------------------------------------------------------------";
    let avg = size as f64 * iters as f64 / secs;
    println!("{line}");
    println!(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]");
    println!(
        " {:<10} {:<10}       {:<7.2}            {:<7.2}   \t\t   {:.6}",
        size,
        iters,
        peak_bytes_per_sec.max(avg) / 1_048_576.0,
        avg / 1_048_576.0,
        iters as f64 / secs / 1e6
    );
    println!("{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_none_one_and_many_samples() {
        assert_eq!(latency_stats(&mut []), None);
        let one = latency_stats(&mut [3.0]).unwrap();
        assert_eq!(
            (one.min, one.max, one.typical, one.p999),
            (3.0, 3.0, 3.0, 3.0)
        );
        let mut v: Vec<f64> = (1..=1000).rev().map(f64::from).collect();
        let s = latency_stats(&mut v).unwrap();
        assert_eq!((s.min, s.max, s.typical), (1.0, 1000.0, 501.0));
        assert_eq!((s.p99, s.p999), (990.0, 999.0));
        // Printing never panics either.
        latency(64, &mut []);
    }
}
