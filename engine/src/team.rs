//! Threads that move in lockstep through one forward pass.
//!
//! Every member runs the same sequence of steps, takes its share of each (`share`), and waits for
//! the others at a spinning barrier (`sync`) before a step reads what the last one wrote. On two
//! cores a barrier costs well under a microsecond, against the several a thread-pool dispatch per
//! operation costs; a decoding step of the embedded model has about 300 of them.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many threads a forward pass uses: the machine's cores.
pub fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `step(member)` on `count` threads (this one among them) and returns when all are done.
pub fn run(count: usize, step: impl Fn(&Member) + Sync) {
    let barrier = Barrier {
        arrived: AtomicUsize::new(0),
        generation: AtomicUsize::new(0),
        count,
    };
    std::thread::scope(|scope| {
        for index in 1..count {
            let (barrier, step) = (&barrier, &step);
            scope.spawn(move || step(&Member { index, count, barrier }));
        }
        step(&Member {
            index: 0,
            count,
            barrier: &barrier,
        });
    });
}

pub struct Member<'a> {
    pub index: usize,
    pub count: usize,
    barrier: &'a Barrier,
}

impl Member<'_> {
    /// Waits until every member has arrived here.
    pub fn sync(&self) {
        self.barrier.wait();
    }

    /// This member's contiguous share of `0..len`, in multiples of `grain`.
    pub fn share(&self, len: usize, grain: usize) -> Range<usize> {
        let units = len.div_ceil(grain);
        let start = units * self.index / self.count * grain;
        let end = units * (self.index + 1) / self.count * grain;
        start.min(len)..end.min(len)
    }

    /// Every `count`-th of `0..len`, starting at this member's index.
    pub fn turns(&self, len: usize) -> std::iter::StepBy<Range<usize>> {
        (self.index..len).step_by(self.count)
    }
}

struct Barrier {
    arrived: AtomicUsize,
    generation: AtomicUsize,
    count: usize,
}

impl Barrier {
    fn wait(&self) {
        if self.count == 1 {
            return;
        }
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.count {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            // A core given to something else for a while: stop burning the one left.
            if spins < 1 << 14 {
                std::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// A buffer the members write in disjoint parts and read after a `sync`. It keeps the capacity of the
/// vector it was made from: an attention cache handed back and grown by one position per step is
/// not copied each time.
pub struct Shared<T> {
    ptr: *mut T,
    len: usize,
    capacity: usize,
}

// SAFETY: access is coordinated by the callers: writes go to disjoint elements, and no element is
// read in the step that writes it.
unsafe impl<T: Send> Sync for Shared<T> {}
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Shared<T> {
    pub fn new(v: Vec<T>) -> Shared<T> {
        let mut v = std::mem::ManuallyDrop::new(v);
        Shared {
            ptr: v.as_mut_ptr(),
            len: v.len(),
            capacity: v.capacity(),
        }
    }

    /// Writes element `i`.
    ///
    /// # Safety
    /// No other member reads or writes element `i` in this step.
    #[inline]
    pub unsafe fn set(&self, i: usize, value: T) {
        assert!(i < self.len);
        // SAFETY: in bounds; exclusivity is the caller's. The old value is dropped in place.
        unsafe { *self.ptr.add(i) = value };
    }

    /// Adds `value` to element `i`.
    ///
    /// # Safety
    /// As [`Shared::set`].
    #[inline]
    pub unsafe fn add(&self, i: usize, value: T)
    where
        T: std::ops::AddAssign,
    {
        assert!(i < self.len);
        // SAFETY: in bounds; exclusivity is the caller's.
        unsafe { *self.ptr.add(i) += value };
    }

    /// Elements `range`, to read.
    ///
    /// # Safety
    /// No member writes them while the slice lives.
    #[inline]
    pub unsafe fn get(&self, range: Range<usize>) -> &[T] {
        assert!(range.start <= range.end && range.end <= self.len);
        // SAFETY: in bounds; the absence of writers is the caller's.
        unsafe { std::slice::from_raw_parts(self.ptr.add(range.start), range.len()) }
    }

    /// Elements `range`, to write.
    ///
    /// # Safety
    /// No other member reads or writes them while the slice lives.
    #[allow(clippy::mut_from_ref)]
    #[inline]
    pub unsafe fn part(&self, range: Range<usize>) -> &mut [T] {
        assert!(range.start <= range.end && range.end <= self.len);
        // SAFETY: in bounds; exclusivity is the caller's.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(range.start), range.len()) }
    }

    pub fn into_inner(self) -> Vec<T> {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the parts came from a vector in `new` and are given back once.
        unsafe { Vec::from_raw_parts(this.ptr, this.len, this.capacity) }
    }
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // SAFETY: as `into_inner`.
        drop(unsafe { Vec::from_raw_parts(self.ptr, self.len, self.capacity) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_the_range_once_in_whole_grains() {
        for count in 1..5 {
            for len in [0, 1, 7, 64, 65, 576] {
                let barrier = Barrier {
                    arrived: AtomicUsize::new(0),
                    generation: AtomicUsize::new(0),
                    count,
                };
                let mut covered = Vec::new();
                for index in 0..count {
                    let m = Member {
                        index,
                        count,
                        barrier: &barrier,
                    };
                    let r = m.share(len, 8);
                    assert!(r.start.is_multiple_of(8) || r.start == len, "{r:?}");
                    covered.extend(r);
                }
                assert_eq!(covered, (0..len).collect::<Vec<_>>());
                let mut turns: Vec<usize> = (0..count)
                    .flat_map(|index| {
                        Member {
                            index,
                            count,
                            barrier: &barrier,
                        }
                        .turns(len)
                    })
                    .collect();
                turns.sort_unstable();
                assert_eq!(turns, (0..len).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn a_shared_buffer_gives_its_vector_back_with_its_capacity() {
        let mut v = Vec::with_capacity(100);
        v.extend([1u32, 2, 3]);
        let shared = Shared::new(v);
        // SAFETY: no other member.
        unsafe { shared.set(1, 7) };
        let back = shared.into_inner();
        assert_eq!((back.as_slice(), back.capacity()), (&[1, 7, 3][..], 100));
        drop(Shared::new(vec![String::from("dropped once")]));
    }

    #[test]
    fn members_see_each_others_writes_after_a_sync() {
        let n = 4;
        let buf = Shared::new(vec![0usize; n]);
        let sums = Shared::new(vec![0usize; n]);
        run(n, |m| {
            for round in 1..=100 {
                // SAFETY: each member writes its own element, reads all after the barrier.
                unsafe { buf.set(m.index, round * (m.index + 1)) };
                m.sync();
                let total: usize = unsafe { buf.get(0..n) }.iter().sum();
                assert_eq!(total, round * n * (n + 1) / 2);
                m.sync();
                unsafe { sums.set(m.index, total) };
            }
        });
        assert_eq!(sums.into_inner(), vec![100 * 10; n]);
    }
}
