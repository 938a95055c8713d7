//! A counting-only `cl100k_base` byte-pair encoder with a compact table.
//!
//! tiktoken's `CoreBPE` keeps the ranks three times (encoder map of owned `Vec<u8>`s, decoder map,
//! sorted token list) plus 128 regex clones: about 14 MiB resident for the whole session, only to
//! count. Counting needs the ranks once: every token's bytes in one arena and an open-addressing
//! table of token indexes ([`RankTable`], about 2.0 MiB). The build script embeds the arena ready-made
//! (zstd-compressed, about 0.4 MB instead of the 1.7 MB ranks file), so building the table is one
//! decompression and one pass of hashing. The split (tiktoken's cl100k pattern, run by `fancy_regex`
//! exactly as tiktoken runs it) and the merge (a port of tiktoken's `_byte_pair_merge` and its heap
//! variant for long pieces) are tiktoken's, so counts equal tiktoken's (the tests compare them).

use std::collections::BinaryHeap;

use fancy_regex::Regex;

type Rank = u32;

// CL100K_ZST, CL100K_BYTES, CL100K_TOKENS (build.rs).
include!(concat!(env!("OUT_DIR"), "/cl100k.rs"));

/// Why the table cannot be built or a text counted.
#[derive(Debug, thiserror::Error)]
pub enum BpeError {
    /// The embedded table does not decompress.
    #[error("the embedded cl100k table does not decompress: {0}")]
    Decompress(std::io::Error),
    /// The embedded table's token lengths do not add up to its size.
    #[error("the embedded cl100k table is malformed")]
    Malformed,
    /// The split pattern does not compile, or the regex engine gave up on a text (its
    /// backtracking limit).
    #[error(transparent)]
    Regex(#[from] fancy_regex::Error),
}

/// The cl100k pre-tokenizer pattern, as tiktoken uses it.
const CL100K_PATTERN: &str = "'(?i:[sdmt]|ll|ve|re)|[^\\r\\n\\p{L}\\p{N}]?+\\p{L}++|\\p{N}{1,3}+| ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+|\\s++$|\\s*[\\r\\n]|\\s+(?!\\S)|\\s";

/// Pieces at least this long are merged with the heap variant (as tiktoken does).
const LARGE_PIECE: usize = 100;

/// The ranks and the split.
pub struct Bpe {
    ranks: RankTable,
    split: Regex,
}

/// Token bytes → rank, compactly: every token's bytes in one arena (in rank order, so a token's
/// index is its rank), the token's start in it, and an open-addressing table of token indexes
/// (linear probing, at most 3/8 full). About 2.0 MiB for cl100k, where a hash map of slices held
/// 4.1 MiB.
struct RankTable {
    arena: Box<[u8]>,
    /// Token `i` (rank `i`) is `arena[starts[i]..starts[i + 1]]`.
    starts: Box<[u32]>,
    /// `i + 1` for token `i`; 0 is an empty slot. The length is a power of two.
    slots: Box<[u32]>,
    /// `64 - log2(slots.len())`: a hash's top bits pick the first slot.
    shift: u32,
}

impl RankTable {
    fn new(arena: Vec<u8>, starts: Vec<u32>) -> RankTable {
        let n = starts.len() - 1;
        let len = (n * 8 / 3).max(8).next_power_of_two();
        let mut table = RankTable {
            arena: arena.into_boxed_slice(),
            starts: starts.into_boxed_slice(),
            slots: vec![0u32; len].into_boxed_slice(),
            shift: 64 - len.trailing_zeros(),
        };
        for i in 0..n {
            let mut slot = table.first_slot(table.token(i));
            loop {
                match table.slots[slot] {
                    0 => {
                        table.slots[slot] = i as u32 + 1;
                        break;
                    }
                    // A repeated token keeps its first rank (cl100k has none).
                    t if table.token(t as usize - 1) == table.token(i) => break,
                    _ => slot = (slot + 1) & (table.slots.len() - 1),
                }
            }
        }
        table
    }

    fn token(&self, i: usize) -> &[u8] {
        &self.arena[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    fn first_slot(&self, bytes: &[u8]) -> usize {
        use std::hash::Hasher;
        let mut h = rustc_hash::FxHasher::default();
        h.write(bytes);
        (h.finish() >> self.shift) as usize
    }

    /// The rank of the token with exactly these bytes.
    fn get(&self, bytes: &[u8]) -> Option<Rank> {
        let mut slot = self.first_slot(bytes);
        loop {
            match self.slots[slot] {
                0 => return None,
                t => {
                    let i = t as usize - 1;
                    if self.token(i) == bytes {
                        return Some(i as Rank);
                    }
                }
            }
            slot = (slot + 1) & (self.slots.len() - 1);
        }
    }
}

impl Bpe {
    /// Builds the table from the embedded one (see `build.rs`).
    pub fn cl100k() -> Result<Bpe, BpeError> {
        let mut arena =
            zstd::bulk::decompress(CL100K_ZST, CL100K_BYTES).map_err(BpeError::Decompress)?;
        let arena_len = CL100K_BYTES
            .checked_sub(CL100K_TOKENS)
            .ok_or(BpeError::Malformed)?;
        if arena.len() != CL100K_BYTES {
            return Err(BpeError::Malformed);
        }
        let mut starts: Vec<u32> = Vec::with_capacity(CL100K_TOKENS + 1);
        let mut at = 0usize;
        for &len in &arena[arena_len..] {
            starts.push(at as u32);
            at += usize::from(len);
        }
        starts.push(at as u32);
        if at != arena_len {
            return Err(BpeError::Malformed);
        }
        arena.truncate(arena_len);
        let ranks = RankTable::new(arena, starts);
        let split = Regex::new(CL100K_PATTERN)?;
        Ok(Bpe { ranks, split })
    }

    /// The number of tokens tiktoken's `encode_ordinary` gives `text`. `Err` when the regex engine
    /// gives up (its backtracking limit), as tiktoken would panic.
    pub fn count(&self, text: &str) -> Result<usize, BpeError> {
        let mut n = 0;
        for m in self.split.find_iter(text) {
            let piece = m?.as_str().as_bytes();
            n += self.count_piece(piece);
        }
        Ok(n)
    }

    /// The tokens of one pre-tokenizer piece.
    pub fn count_piece(&self, piece: &[u8]) -> usize {
        if piece.is_empty() {
            return 0;
        }
        if self.ranks.get(piece).is_some() {
            return 1;
        }
        if piece.len() < LARGE_PIECE {
            self.merge_small(piece)
        } else {
            self.merge_large(piece)
        }
    }

    fn rank(&self, bytes: &[u8]) -> Rank {
        self.ranks.get(bytes).unwrap_or(Rank::MAX)
    }

    /// tiktoken's `_byte_pair_merge`: the number of parts left.
    fn merge_small(&self, piece: &[u8]) -> usize {
        // (start, rank of the pair starting here)
        let mut parts: Vec<(usize, Rank)> = Vec::with_capacity(piece.len() + 1);
        let mut min_rank: (Rank, usize) = (Rank::MAX, usize::MAX);
        for i in 0..piece.len() - 1 {
            let rank = self.rank(&piece[i..i + 2]);
            if rank < min_rank.0 {
                min_rank = (rank, i);
            }
            parts.push((i, rank));
        }
        parts.push((piece.len() - 1, Rank::MAX));
        parts.push((piece.len(), Rank::MAX));
        let get_rank = |parts: &Vec<(usize, Rank)>, i: usize| {
            if i + 3 < parts.len() {
                self.rank(&piece[parts[i].0..parts[i + 3].0])
            } else {
                Rank::MAX
            }
        };
        while min_rank.0 != Rank::MAX {
            let i = min_rank.1;
            if i > 0 {
                parts[i - 1].1 = get_rank(&parts, i - 1);
            }
            parts[i].1 = get_rank(&parts, i);
            parts.remove(i + 1);
            min_rank = (Rank::MAX, usize::MAX);
            for (i, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
                if rank < min_rank.0 {
                    min_rank = (rank, i);
                }
            }
        }
        parts.len() - 1
    }

    /// tiktoken's `_byte_pair_merge_large` (a heap of candidate merges): the number of parts left.
    fn merge_large(&self, piece: &[u8]) -> usize {
        struct State {
            prev: usize,
            end: usize,
            next_end: usize,
            next_rank: Rank,
        }
        #[derive(PartialEq, Eq)]
        struct Merge {
            start: usize,
            rank: Rank,
        }
        impl Ord for Merge {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                other
                    .rank
                    .cmp(&self.rank)
                    .then_with(|| other.start.cmp(&self.start))
            }
        }
        impl PartialOrd for Merge {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        let mut state = Vec::with_capacity(piece.len());
        state.push(State {
            prev: usize::MAX,
            end: 1,
            next_end: 2,
            next_rank: Rank::MAX,
        });
        let mut heap = BinaryHeap::with_capacity(piece.len());
        for i in 0..piece.len() - 1 {
            let rank = self.rank(&piece[i..i + 2]);
            if rank != Rank::MAX {
                heap.push(Merge { start: i, rank });
                state[i].next_rank = rank;
            }
            state.push(State {
                prev: i,
                end: i + 2,
                next_end: i + 3,
                next_rank: Rank::MAX,
            });
        }
        let potential_merge = |state: &mut Vec<State>,
                               heap: &mut BinaryHeap<Merge>,
                               start: usize,
                               next_end: usize| {
            state[start].next_end = next_end;
            state[start].next_rank = Rank::MAX;
            if next_end <= piece.len() {
                let rank = self.rank(&piece[start..next_end]);
                if rank != Rank::MAX {
                    heap.push(Merge { start, rank });
                    state[start].next_rank = rank;
                }
            }
        };
        while let Some(left) = heap.pop() {
            if left.rank == Rank::MAX {
                break;
            }
            if left.rank != state[left.start].next_rank {
                continue;
            }
            let left_start = left.start;
            let right_start = state[left_start].end;
            let right_end = state[left_start].next_end;
            let right_next_end = state[right_start].next_end;
            state[left_start].end = right_end;
            potential_merge(&mut state, &mut heap, left_start, right_next_end);
            if right_end < state.len() {
                state[right_end].prev = left_start;
            }
            if left_start > 0 {
                let prev_start = state[left_start].prev;
                potential_merge(&mut state, &mut heap, prev_start, right_end);
            }
            state[right_start].next_rank = Rank::MAX;
        }
        let mut n = 0;
        let mut i = 0;
        while i < state.len() {
            n += 1;
            i = state[i].end;
        }
        n
    }
}
