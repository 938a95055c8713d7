//! The random seed of the randomised tests (kill -9 rounds, fault injection): `BB7_TEST_SEED=<n>`
//! fixes it; unset, it is drawn from the operating system's randomness (never from the clock).
//! Either way it is printed, so a failure can be replayed.

/// The environment variable that fixes the seed.
pub const SEED_VAR: &str = "BB7_TEST_SEED";

/// A small xorshift generator: the same seed gives the same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    /// The seed from [`SEED_VAR`] (a bad value fails the test) or a random one; `what` names the
    /// test in the printed line.
    pub fn from_env(what: &str) -> Rng {
        let seed = match std::env::var(SEED_VAR) {
            Ok(v) => v
                .trim()
                .parse::<u64>()
                .unwrap_or_else(|e| panic!("{SEED_VAR}={v:?} is not a u64: {e}")),
            Err(std::env::VarError::NotPresent) => rand::random::<u64>(),
            Err(e) => panic!("{SEED_VAR}: {e}"),
        };
        eprintln!("{what}: seed {seed} (replay with {SEED_VAR}={seed})");
        Rng::new(seed)
    }

    /// A generator for `seed` (xorshift needs a non-zero state).
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}
