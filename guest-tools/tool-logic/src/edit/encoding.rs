//! Naming the encoding of a file that is not UTF-8 (issue 32), so that a refusal can say what the
//! file is instead of only what it is not. A heuristic over the bytes: it names an encoding only
//! when the bytes look like it, and says so ("looks like"); the file is never converted.

/// A short description of the likely encoding of `bytes`, which are not valid UTF-8 (and hold no
/// NUL in their start, else they count as binary): `UTF-16 (little-endian, with a byte order
/// mark)`, `windows-1251 (Cyrillic)`, `KOI8-R (Cyrillic)`, `ISO-8859-1 / windows-1252 (Latin-1)`,
/// or `None` when nothing fits well.
pub fn guess(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0xFF, 0xFE]) {
        return Some("UTF-16 (little-endian, with a byte order mark)");
    }
    if bytes.starts_with(&[0xFE, 0xFF]) {
        return Some("UTF-16 (big-endian, with a byte order mark)");
    }
    let high: Vec<usize> = (0..bytes.len()).filter(|&i| bytes[i] >= 0x80).collect();
    if high.is_empty() {
        return None;
    }
    let is_high = |i: usize| bytes.get(i).is_some_and(|&b| b >= 0x80);
    // Cyrillic in both 8-bit encodings: letters at 0xC0..=0xFF (plus Ё/ё), written in runs (words).
    let letters = high
        .iter()
        .filter(|&&i| bytes[i] >= 0xC0 || bytes[i] == 0xA8 || bytes[i] == 0xB8)
        .count();
    let in_runs = high
        .iter()
        .filter(|&&i| (i > 0 && is_high(i - 1)) || is_high(i + 1))
        .count();
    let n = high.len();
    if letters * 10 >= n * 9 && in_runs * 10 >= n * 6 {
        // Lower case (most of any text) is 0xE0..=0xFF in windows-1251, 0xC0..=0xDF in KOI8-R.
        let upper_half = high.iter().filter(|&&i| bytes[i] >= 0xE0).count();
        return Some(if upper_half * 2 >= letters {
            "windows-1251 (Cyrillic)"
        } else {
            "KOI8-R (Cyrillic)"
        });
    }
    // Latin-1: accented letters (0xC0..=0xFF) and symbols (0xA0..), mostly alone between ASCII.
    let latin = high.iter().filter(|&&i| bytes[i] >= 0xA0).count();
    if latin * 10 >= n * 9 && in_runs * 2 < n {
        return Some("ISO-8859-1 / windows-1252 (Latin-1)");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::guess;

    #[test]
    fn names_the_usual_suspects() {
        // "Привет, мир" / "строка" in windows-1251
        let cp1251 =
            b"// \xcf\xf0\xe8\xe2\xe5\xf2, \xec\xe8\xf0\nlet s = \"\xf1\xf2\xf0\xee\xea\xe0\";\n";
        assert_eq!(guess(cp1251), Some("windows-1251 (Cyrillic)"));
        // the same words in KOI8-R
        let koi8 =
            b"// \xf0\xd2\xc9\xd7\xc5\xd4, \xcd\xc9\xd2\nlet s = \"\xd3\xd4\xd2\xcf\xcb\xc1\";\n";
        assert_eq!(guess(koi8), Some("KOI8-R (Cyrillic)"));
        // "café déjà vu" in Latin-1
        assert_eq!(
            guess(b"caf\xe9 d\xe9j\xe0 vu\n"),
            Some("ISO-8859-1 / windows-1252 (Latin-1)")
        );
        assert_eq!(
            guess(b"\xff\xfeh\x00i\x00"),
            Some("UTF-16 (little-endian, with a byte order mark)")
        );
        // stray high bytes that fit nothing
        assert_eq!(guess(b"a\x81\x82\x83\x84b"), None);
    }
}
