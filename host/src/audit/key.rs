//! The chain's Ed25519 signing key: made at first use in the chain's directory (`key`, the hex of
//! the 32-byte seed, mode 0600; `key.pub`, the hex of the public key), read back on later uses.

use std::io::Write;
use std::path::Path;

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use ed25519_dalek::{Signature, Signer, SigningKey, Verifier, VerifyingKey};

use super::{AuditError, KEY_FILE, KeyError, PUBKEY_FILE};

/// A short name for a public key: the first 16 hex digits of its SHA-256.
pub fn key_id(public: &VerifyingKey) -> String {
    super::sha256_hex(public.as_bytes())[..16].to_string()
}

/// Loads the signing key from `dir` (whose path is `path`, for messages), making it (and `key.pub`)
/// when there is none. Call under the chain's lock, so two processes never make two keys.
pub fn load_or_make(dir: &Dir, path: &Path) -> Result<SigningKey, AuditError> {
    let key_path = path.join(KEY_FILE);
    match crate::store::read_regular_nofollow(dir, KEY_FILE) {
        Ok(bytes) => {
            let key = parse_secret(&bytes).map_err(|reason| AuditError::Key {
                path: key_path.clone(),
                reason,
            })?;
            if crate::store::read_regular_nofollow(dir, PUBKEY_FILE).is_err() {
                write_public(dir, path, &key)?;
            }
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // From the operating system, not `rand`'s thread-local generator: this runs in the
            // exit checkpoint too (a libc `atexit` handler, `chain.rs`), after glibc has destroyed
            // the main thread's thread-locals, where that generator panics.
            let mut seed = [0u8; 32];
            rand::TryRng::try_fill_bytes(&mut rand::rngs::SysRng, &mut seed).map_err(|e| {
                AuditError::io(
                    "cannot create the audit key",
                    &key_path,
                    std::io::Error::other(e),
                )
            })?;
            let key = SigningKey::from_bytes(&seed);
            // Written whole to a temporary file (0600) and renamed into place, so a crash or a full
            // disk never leaves a partial key that every later start would refuse.
            // (A leftover temporary file is removed first: it is made anew, 0600, never reused.)
            let tmp = format!("{KEY_FILE}.tmp");
            match dir.remove_file(&tmp) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(AuditError::io("cannot create the audit key", &key_path, e));
                }
                _ => {}
            }
            let mut opts = OpenOptions::new();
            opts.write(true).create_new(true).mode(0o600);
            let mut f = dir
                .open_with(&tmp, &opts)
                .map_err(|e| AuditError::io("cannot create the audit key", &key_path, e))?
                .into_std();
            f.write_all(format!("{}\n", hex::encode(seed)).as_bytes())
                .and_then(|()| f.sync_all())
                .and_then(|()| dir.rename(&tmp, dir, KEY_FILE))
                .map_err(|e| AuditError::io("cannot write the audit key", &key_path, e))?;
            // Both files are fsynced before their renames; one fsync of the directory then makes
            // both renames durable (write_public's own directory fsync would be a second one).
            write_public_with(dir, path, &key, |d, n, b| {
                crate::store::write_atomic_relaxed(d, n, b)
            })?;
            crate::store::sync_dir(dir);
            Ok(key)
        }
        Err(e) => Err(AuditError::io("cannot read the audit key", &key_path, e)),
    }
}

fn write_public(dir: &Dir, path: &Path, key: &SigningKey) -> Result<(), AuditError> {
    write_public_with(dir, path, key, |d, n, b| {
        crate::store::write_atomic(d, n, b)
    })
}

/// Writes `key.pub` for `key` with `write` (durable, or relaxed when the caller fsyncs the
/// directory itself).
fn write_public_with(
    dir: &Dir,
    path: &Path,
    key: &SigningKey,
    write: fn(&Dir, &str, &[u8]) -> std::io::Result<()>,
) -> Result<(), AuditError> {
    let text = format!("{}\n", hex::encode(key.verifying_key().as_bytes()));
    write(dir, PUBKEY_FILE, text.as_bytes())
        .map_err(|e| AuditError::io("cannot write", &path.join(PUBKEY_FILE), e))
}

fn parse_secret(bytes: &[u8]) -> Result<SigningKey, KeyError> {
    let text = std::str::from_utf8(bytes).map_err(|_| KeyError::NotText)?;
    let raw = hex::decode(text.trim())?;
    let seed: [u8; 32] = raw.try_into().map_err(|_| KeyError::WrongLength("seed"))?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Parses a public key file's text (64 hex digits, surrounding whitespace ignored).
pub fn parse_public(text: &[u8]) -> Result<VerifyingKey, KeyError> {
    let text = std::str::from_utf8(text).map_err(|_| KeyError::NotText)?;
    let raw = hex::decode(text.trim())?;
    let bytes: [u8; 32] = raw
        .try_into()
        .map_err(|_| KeyError::WrongLength("public key"))?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| KeyError::NotPublicKey(e.to_string()))
}

/// What a checkpoint's signature covers: a fixed prefix and the checkpoint's canonical JSON
/// without `hash` and `signature` (so its `seq`, `time`, `prev` — the head it signs — and `key_id`).
pub fn message(canonical_unsigned: &[u8]) -> Vec<u8> {
    let mut m = b"bb7-audit-checkpoint\n".to_vec();
    m.extend_from_slice(canonical_unsigned);
    m
}

/// Signs `message`, as hex.
pub fn sign(key: &SigningKey, message: &[u8]) -> String {
    hex::encode(key.sign(message).to_bytes())
}

/// Whether `signature_hex` is `public`'s signature of `message`.
pub fn verify(public: &VerifyingKey, message: &[u8], signature_hex: &str) -> bool {
    let Ok(raw) = hex::decode(signature_hex) else {
        return false;
    };
    let Ok(bytes) = <[u8; 64]>::try_from(raw.as_slice()) else {
        return false;
    };
    public
        .verify(message, &Signature::from_bytes(&bytes))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    /// The key is written whole and renamed into place: a temporary file left by a crash (or a
    /// full disk) is replaced, never taken for the key, and the key is 0600.
    /// A bad key file is told apart by its typed reason, not by its text.
    #[test]
    fn key_errors_are_typed() {
        assert_eq!(parse_public(b"\xff").unwrap_err(), KeyError::NotText);
        assert!(matches!(parse_public(b"zz"), Err(KeyError::NotHex(_))));
        assert_eq!(
            parse_public(b"abcd\n").unwrap_err(),
            KeyError::WrongLength("public key")
        );
        assert_eq!(
            parse_secret(b"abcd").unwrap_err(),
            KeyError::WrongLength("seed")
        );
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join(KEY_FILE), b"12\n").unwrap();
        let dir = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        match load_or_make(&dir, t.path()) {
            Err(AuditError::Key { reason, .. }) => {
                assert_eq!(reason, KeyError::WrongLength("seed"))
            }
            other => panic!("{other:?}"),
        }
    }

    /// Making the key costs one fsync of the directory for both files' renames (the key file's
    /// own fsync is not counted here: it is not a `store` write), not one per file.
    #[test]
    fn a_new_key_fsyncs_its_directory_once() {
        let t = tempfile::tempdir().unwrap();
        let dir = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        let before = crate::store::fsyncs();
        let key = load_or_make(&dir, t.path()).expect("a key is made");
        // key.pub's file fsync and one directory fsync.
        assert_eq!(crate::store::fsyncs() - before, 2);
        let public = std::fs::read_to_string(t.path().join(PUBKEY_FILE)).unwrap();
        assert_eq!(
            parse_public(public.as_bytes()).unwrap(),
            key.verifying_key()
        );
    }

    #[test]
    fn a_leftover_partial_key_never_becomes_the_key() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join(format!("{KEY_FILE}.tmp")), b"12").unwrap();
        let dir = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        let key = load_or_make(&dir, t.path()).expect("a key is made");
        assert!(!t.path().join(format!("{KEY_FILE}.tmp")).exists());
        let again = load_or_make(&dir, t.path()).expect("the key is read back");
        assert_eq!(key.to_bytes(), again.to_bytes());
        let mode = std::fs::metadata(t.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
