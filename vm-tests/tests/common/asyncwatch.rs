//! An async event watcher (`ibv_asyncwatch`, or `rverbs asyncwatch`)
//! running while a test changes the port: what it printed so far.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A watcher writing to a file (read while it runs: it runs until
/// killed); killed when dropped.
pub struct Watcher {
    child: Child,
    out: PathBuf,
}

impl Watcher {
    /// Starts `cmd`, its output in `asyncwatch-<name>.out` in the temp
    /// directory.
    pub fn spawn(name: &str, cmd: &mut Command) -> Watcher {
        let out = std::env::temp_dir().join(format!("asyncwatch-{name}.out"));
        let f = std::fs::File::create(&out).expect("create the output file");
        let child = cmd
            .stdout(f)
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.get_program()));
        Watcher { child, out }
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it printed so far.
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits (at most 20 s) until it printed its first line: the device
    /// is open and its async fd is being read.
    pub fn wait_ready(&self) {
        let until = Instant::now() + Duration::from_secs(20);
        while !self.text().contains("async event FD") {
            assert!(
                Instant::now() < until,
                "{} never started",
                self.out.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The event lines, in order.
    pub fn events(&self) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| l.starts_with("  event_type "))
            .map(str::to_string)
            .collect()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (at most 10 s: each reads the events at its own pace) until
/// `ours` printed the event lines `theirs` did; asserts that it did, and
/// returns them.
pub fn assert_same_events(theirs: &Watcher, ours: &Watcher) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(10);
    while theirs.events() != ours.events() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    let (t, o) = (theirs.events(), ours.events());
    assert_eq!(o, t, "ours:\n{}\ntheirs:\n{}", ours.text(), theirs.text());
    o
}
