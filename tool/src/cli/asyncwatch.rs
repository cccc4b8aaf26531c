//! `rverbs asyncwatch`: rdma-core's `ibv_asyncwatch`. Opens the device and
//! prints each async event as the C tool does: port and device events by
//! name, the others as `unexpected`, each with its number and the port
//! (the element, for the events not about a port).

use clap::Args;
use rverbs::{Context, EventType, Result};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::ExitCode;

#[derive(Args)]
pub struct AsyncwatchArgs {
    /// Use this RDMA device (default: the first).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// Exit after this many events (default: run until killed, as the C
    /// tool does).
    #[arg(short = 'n', long = "count", value_name = "N")]
    count: Option<u64>,
}

/// `event_name_str` of ibv_asyncwatch: the names it knows, "unexpected"
/// for the rest.
pub fn event_name(t: EventType) -> &'static str {
    match t.0 {
        8 => "IBV_EVENT_DEVICE_FATAL",
        9 => "IBV_EVENT_PORT_ACTIVE",
        10 => "IBV_EVENT_PORT_ERR",
        11 => "IBV_EVENT_LID_CHANGE",
        12 => "IBV_EVENT_PKEY_CHANGE",
        13 => "IBV_EVENT_SM_CHANGE",
        17 => "IBV_EVENT_CLIENT_REREGISTER",
        18 => "IBV_EVENT_GID_CHANGE",
        20 => "IBV_EVENT_DEVICE_SPEED_CHANGE",
        _ => "unexpected",
    }
}

pub fn asyncwatch(a: &AsyncwatchArgs) -> Result<ExitCode> {
    let ctx = Context::open_by_name(a.dev.as_deref())?;
    let mut out = std::io::stdout().lock();
    // Line by line, as the C tool forces with setvbuf: a reader of a pipe
    // sees each event when it happens.
    let say = |out: &mut std::io::StdoutLock<'_>, s: String| {
        let _ = writeln!(out, "{s}");
        let _ = out.flush();
    };
    say(
        &mut out,
        format!(
            "{}: async event FD {}",
            ctx.device().name(),
            ctx.async_fd().as_raw_fd()
        ),
    );
    let mut seen = 0u64;
    while a.count.is_none_or(|n| seen < n) {
        let ev = ctx.get_async_event()?;
        // The C tool prints the element union's port_num for every event:
        // the port for port events, the low bits of the object otherwise.
        say(
            &mut out,
            format!(
                "  event_type {} ({}), port {}",
                event_name(ev.event_type),
                ev.event_type.0,
                ev.element as i32
            ),
        );
        seen += 1;
    }
    Ok(ExitCode::SUCCESS)
}
