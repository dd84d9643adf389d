//! Matrix products in blocks: each thread's share of a weight matrix's rows, eight or sixteen at a
//! time, against tiles of activation rows.

use super::Acts;
use crate::kernels::{ActRow, QMatrix, ROWS};
use crate::team::Member;

/// Weight rows per share: whole cache lines of output, and enough rows to keep a thread busy.
pub(super) const GRAIN: usize = 16;
const _: () = assert!(GRAIN.is_multiple_of(ROWS), "a share holds whole groups of rows");

/// Every member's share of `w`'s rows against the `tokens` activation rows of `a`, in the blocks of
/// [`each_block`] and the tiles of [`each_tile`]; `put(t, r, value)` takes each product.
///
/// # Safety
/// No one writes `a`'s rows in this step; `put` writes only what this member owns.
pub(super) unsafe fn matmul(m: &Member, w: &QMatrix, a: &Acts, tokens: usize, mut put: impl FnMut(usize, usize, f32)) {
    // SAFETY: the caller's.
    let acts = unsafe { a.rows(tokens) };
    let rows = m.share(w.rows, GRAIN);
    each_block(&[w], rows.clone(), tokens, |r, size| {
        each_tile(size, tokens, |t, take| {
            let v = block_tile(w, (r, size), &acts, t, take);
            for (k, v) in v.iter().take(take).enumerate() {
                for (i, &v) in v.iter().take(size.min(rows.end - r)).enumerate() {
                    put(t + k, r + i, v);
                }
            }
        });
    });
}

/// The row blocks of `rows` (a share: it starts at a group of [`ROWS`] and ends at one or at the
/// matrix's last row) against `tokens` activation rows:
/// `f(r, 16)` for two groups where every matrix of `ws` computes them together
/// ([`QMatrix::pairs_rows`]) and there are more than eight tokens, else `f(r, 8)`. (A step of
/// eight sequences or fewer reads each weight once in one eight-token tile; as two four-token tiles
/// over sixteen rows it measured 141–147 against 176–178 tok/s at eight sequences of the 1.5B model.)
pub(super) fn each_block(
    ws: &[&QMatrix],
    rows: std::ops::Range<usize>,
    tokens: usize,
    mut f: impl FnMut(usize, usize),
) {
    let mut r = rows.start;
    while r < rows.end {
        let size = if tokens > 8 && r + ROWS < rows.end && ws.iter().all(|w| w.pairs_rows(r)) {
            2 * ROWS
        } else {
            ROWS
        };
        f(r, size);
        r += size;
    }
}

/// The tiles of `tokens` activation rows against a block of `size` rows: `f(t, take)` with `take`
/// eight (eight-row blocks only) while there are eight, then four, then one.
pub(super) fn each_tile(size: usize, tokens: usize, mut f: impl FnMut(usize, usize)) {
    let mut t = 0;
    while t < tokens {
        let take = match tokens - t {
            8.. if size == ROWS => 8,
            4.. => 4,
            _ => 1,
        };
        f(t, take);
        t += take;
    }
}

/// Rows `r..r + size` of `w` (a block of [`each_block`]) against the activation rows
/// `t..t + take` (a tile of [`each_tile`]): `out[k][i]` is token `t + k`'s row `r + i`.
pub(super) fn block_tile(
    w: &QMatrix,
    (r, size): (usize, usize),
    a: &[ActRow],
    t: usize,
    take: usize,
) -> [[f32; 2 * ROWS]; 8] {
    let mut out = [[0.; 2 * ROWS]; 8];
    if size == ROWS {
        for (out, v) in out.iter_mut().zip(tile(w, r, a, t, take)) {
            out[..ROWS].copy_from_slice(&v);
        }
        return out;
    }
    debug_assert!(take == 4 || take == 1, "a sixteen-row block takes four tokens or one");
    let mut place = |halves: [&[[f32; ROWS]]; 2]| {
        for (h, half) in halves.into_iter().enumerate() {
            for (out, v) in out.iter_mut().zip(half) {
                out[h * ROWS..(h + 1) * ROWS].copy_from_slice(v);
            }
        }
    };
    if take == 4 {
        let [first, second] = w.dot16(r, [a[t], a[t + 1], a[t + 2], a[t + 3]]);
        place([&first, &second]);
    } else {
        let [first, second] = w.dot16(r, [a[t]]);
        place([&first, &second]);
    }
    out
}

/// Rows `r..r + 8` of `w` against the activation rows `t..t + take` (8, 4 or 1).
fn tile(w: &QMatrix, r: usize, a: &[ActRow], t: usize, take: usize) -> [[f32; ROWS]; 8] {
    let mut out = [[0.; ROWS]; 8];
    match take {
        8 => out = w.dot8(r, std::array::from_fn::<_, 8, _>(|k| a[t + k])),
        4 => out[..4].copy_from_slice(&w.dot8(r, [a[t], a[t + 1], a[t + 2], a[t + 3]])),
        _ => out[0] = w.dot8(r, [a[t]])[0],
    }
    out
}
