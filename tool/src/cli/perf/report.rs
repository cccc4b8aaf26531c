//! perftest's report lines.

/// Latency statistics over per-iteration samples (microseconds).
pub fn latency(size: u32, samples: &mut [f64]) {
    samples.sort_by(|a, b| a.total_cmp(b));
    let n = samples.len().max(1);
    let pct = |p: f64| samples[((n as f64 * p).ceil() as usize).clamp(1, n) - 1];
    let avg = samples.iter().sum::<f64>() / n as f64;
    let var = samples.iter().map(|s| (s - avg) * (s - avg)).sum::<f64>() / n as f64;
    let line =
        "---------------------------------------------------------------------------------------";
    println!("{line}");
    println!(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ");
    println!(
        " {:<7} {:<10}   {:<7.2}        {:<7.2}      {:<7.2}    \t       {:<7.2}      \t{:<7.2} \t\t{:<7.2} \t\t{:<7.2}",
        size,
        samples.len(),
        samples.first().copied().unwrap_or(0.0),
        samples.last().copied().unwrap_or(0.0),
        samples[n / 2],
        avg,
        var.sqrt(),
        pct(0.99),
        pct(0.999)
    );
    println!("{line}");
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
