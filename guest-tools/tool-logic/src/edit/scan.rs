//! The whole-file byte scans of the edit path — every `\n` of the file, whether it is all ASCII,
//! whether two versions are equal — made 16 bytes at a time inside a component.
//!
//! A 1 MiB `edit_file` spent most of its time inside the component in scans like these, and the
//! generic versions are slow there: memchr's iterator starts a new vector search after every
//! newline (one call per line), std's ASCII check reads 4-byte words (`usize` on wasm32), and
//! `==` on slices is wasi-libc's `memcmp`, one byte per iteration (each iteration also paying
//! wasmtime's epoch check). Inside the component (wasm32 with `simd128`, which the guest is built
//! with) these compare 16 bytes per instruction and hand back a bit per byte; natively they are
//! memchr's and std's (already vectorised). [`blocks`] holds the block logic on every target, so
//! the native tests check it against those with a scalar block.

/// Calls `f` with the offset of every `\n` in `bytes`, ascending.
pub(crate) fn for_each_newline(bytes: &[u8], mut f: impl FnMut(usize)) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        blocks::for_each_eq::<simd::Simd>(bytes, b'\n', &mut f)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        memchr::memchr_iter(b'\n', bytes).for_each(&mut f)
    }
}

/// Whether every byte of `bytes` is ASCII.
pub(crate) fn is_ascii(bytes: &[u8]) -> bool {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        blocks::is_ascii::<simd::Simd>(bytes)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        bytes.is_ascii()
    }
}

/// Whether `a` and `b` hold the same bytes.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        blocks::same::<simd::Simd>(a, b)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        a == b
    }
}

/// The scans over blocks of 16 bytes, for any way of comparing a block ([`Block`]).
#[cfg_attr(
    not(all(target_arch = "wasm32", target_feature = "simd128")),
    allow(dead_code)
)]
mod blocks {
    /// One block's comparisons.
    pub trait Block {
        /// Bit `i` set where byte `i` of `block` is `byte`.
        fn eq_mask(block: &[u8; 16], byte: u8) -> u16;
        /// Bit `i` set where byte `i` of one of the blocks is not ASCII.
        fn high_mask(blocks: &[[u8; 16]; 4]) -> u16;
        /// Whether the blocks of `a` and `b` differ anywhere.
        fn differ(a: &[[u8; 16]; 4], b: &[[u8; 16]; 4]) -> bool;
    }

    /// `bytes` as whole blocks of `N` × 16 bytes, and what is left after them.
    fn split<const N: usize>(bytes: &[u8]) -> (&[[[u8; 16]; N]], &[u8]) {
        let (blocks, _) = bytes.as_chunks::<16>();
        let (groups, _) = blocks.as_chunks::<N>();
        let whole = groups.len() * N * 16;
        (groups, &bytes[whole..])
    }

    pub fn for_each_eq<B: Block>(bytes: &[u8], byte: u8, mut f: impl FnMut(usize)) {
        let (groups, rest) = split::<2>(bytes);
        let mut base = 0;
        for [a, b] in groups {
            let mut mask = u32::from(B::eq_mask(a, byte)) | (u32::from(B::eq_mask(b, byte)) << 16);
            while mask != 0 {
                f(base + mask.trailing_zeros() as usize);
                mask &= mask - 1;
            }
            base += 32;
        }
        for (i, &c) in rest.iter().enumerate() {
            if c == byte {
                f(base + i);
            }
        }
    }

    pub fn is_ascii<B: Block>(bytes: &[u8]) -> bool {
        let (groups, rest) = split::<4>(bytes);
        groups.iter().all(|g| B::high_mask(g) == 0) && rest.is_ascii()
    }

    pub fn same<B: Block>(a: &[u8], b: &[u8]) -> bool {
        if a.len() != b.len() {
            return false;
        }
        let ((ga, ra), (gb, rb)) = (split::<4>(a), split::<4>(b));
        ga.iter().zip(gb).all(|(x, y)| !B::differ(x, y)) && ra == rb
    }
}

/// Blocks compared with wasm's 128-bit vectors.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd {
    use core::arch::wasm32::{
        u8x16_bitmask, u8x16_eq, u8x16_splat, v128, v128_any_true, v128_load, v128_or, v128_xor,
    };

    pub struct Simd;

    #[inline(always)]
    fn load(block: &[u8; 16]) -> v128 {
        // SAFETY: `block` is 16 readable bytes; `v128_load` has no alignment requirement.
        unsafe { v128_load(block.as_ptr().cast()) }
    }

    impl super::blocks::Block for Simd {
        #[inline(always)]
        fn eq_mask(block: &[u8; 16], byte: u8) -> u16 {
            u8x16_bitmask(u8x16_eq(load(block), u8x16_splat(byte)))
        }

        #[inline(always)]
        fn high_mask(b: &[[u8; 16]; 4]) -> u16 {
            let any = v128_or(
                v128_or(load(&b[0]), load(&b[1])),
                v128_or(load(&b[2]), load(&b[3])),
            );
            u8x16_bitmask(any)
        }

        #[inline(always)]
        fn differ(a: &[[u8; 16]; 4], b: &[[u8; 16]; 4]) -> bool {
            let d = |i: usize| v128_xor(load(&a[i]), load(&b[i]));
            v128_any_true(v128_or(v128_or(d(0), d(1)), v128_or(d(2), d(3))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::blocks::{self, Block};

    /// The block comparisons one byte at a time: what the vector version computes.
    struct Scalar;

    impl Block for Scalar {
        fn eq_mask(block: &[u8; 16], byte: u8) -> u16 {
            (0..16).fold(0, |m, i| m | (u16::from(block[i] == byte) << i))
        }

        fn high_mask(b: &[[u8; 16]; 4]) -> u16 {
            (0..16).fold(0, |m, i| {
                let high = b.iter().any(|block| block[i] >= 0x80);
                m | (u16::from(high) << i)
            })
        }

        fn differ(a: &[[u8; 16]; 4], b: &[[u8; 16]; 4]) -> bool {
            a != b
        }
    }

    /// Texts of every length around the block sizes, with newlines, non-ASCII bytes and
    /// differences at every position (first, last, inside a block, in the part after the last
    /// whole block).
    #[test]
    fn the_block_scans_agree_with_the_byte_scans() {
        for len in (0usize..=200).chain([1 << 12, (1 << 12) + 37]) {
            let text: Vec<u8> = (0..len)
                .map(|i| match i % 7 {
                    3 => b'\n',
                    5 if i % 3 == 0 => b'\r',
                    _ => b'a' + (i % 26) as u8,
                })
                .collect();
            let mut got = Vec::new();
            blocks::for_each_eq::<Scalar>(&text, b'\n', |p| got.push(p));
            let want: Vec<usize> = memchr::memchr_iter(b'\n', &text).collect();
            assert_eq!(got, want, "newlines, len {len}");
            let mut got = Vec::new();
            super::for_each_newline(&text, |p| got.push(p));
            assert_eq!(got, want);
            assert!(blocks::is_ascii::<Scalar>(&text));
            assert!(blocks::same::<Scalar>(&text, &text.clone()));
            for at in [0, len / 2, len.saturating_sub(1), len.saturating_sub(20)] {
                if at >= len {
                    continue;
                }
                let mut other = text.clone();
                other[at] = 0xc3;
                assert!(!blocks::is_ascii::<Scalar>(&other), "len {len} at {at}");
                assert!(!super::is_ascii(&other));
                assert!(!blocks::same::<Scalar>(&text, &other), "len {len} at {at}");
                assert!(!super::same(&text, &other));
            }
            assert!(!blocks::same::<Scalar>(&text, &text[..len.saturating_sub(1)]) || len == 0);
        }
    }
}
