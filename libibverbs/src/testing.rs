//! What the host tests share: C structs as a caller may hand them over
//! (short, uninitialised), and a count of heap allocations.

/// Heap memory for a C struct `T` as a caller may hand it over: only the
/// first `len` bytes (an older, shorter version of the struct), none of
/// them initialised. Miri reports any read past them or of a member the
/// test did not set.
pub(crate) struct Partial<T> {
    p: *mut T,
    layout: std::alloc::Layout,
}

impl<T> Partial<T> {
    pub(crate) fn new(len: usize) -> Partial<T> {
        let layout =
            std::alloc::Layout::from_size_align(len, std::mem::align_of::<T>()).expect("a layout");
        // SAFETY: the tests ask for a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) }.cast::<T>();
        assert!(!p.is_null(), "out of memory");
        Partial { p, layout }
    }

    pub(crate) fn ptr(&self) -> *mut T {
        self.p
    }
}

impl<T> Drop for Partial<T> {
    fn drop(&mut self) {
        // SAFETY: allocated in new with this layout, freed once.
        unsafe { std::alloc::dealloc(self.p.cast(), self.layout) }
    }
}

/// Counts this thread's heap allocations (the test binary's allocator).
struct Counting;

std::thread_local! {
    static ALLOCS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; the
// counter is a const-initialised thread-local (no allocation, no
// destructor), so counting cannot recurse.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: std::alloc::Layout) -> *mut u8 {
        ALLOCS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's layout contract, forwarded.
        unsafe { std::alloc::System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: std::alloc::Layout) {
        // SAFETY: p came from System.alloc with l (forwarded).
        unsafe { std::alloc::System.dealloc(p, l) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// This thread's heap allocations so far.
pub(crate) fn allocs() -> usize {
    ALLOCS.with(|n| n.get())
}
