//! Linear-time search for every (possibly overlapping) occurrence of a sequence: Knuth–Morris–Pratt
//! over any `PartialEq` items (bytes, or lines already mapped to their comparison keys).

/// Every start index at which `pat` occurs in `hay`, overlapping occurrences included, ascending.
/// An empty pattern matches nowhere. O(`hay.len()` + `pat.len()`) comparisons.
pub(crate) fn find_all<T: PartialEq>(hay: &[T], pat: &[T]) -> Vec<usize> {
    let mut out = Vec::new();
    if pat.is_empty() || pat.len() > hay.len() {
        return out;
    }
    // fail[i]: length of the longest proper border of pat[..=i].
    let mut fail = vec![0usize; pat.len()];
    let mut k = 0usize;
    for i in 1..pat.len() {
        while k > 0 && pat[i] != pat[k] {
            k = fail[k - 1];
        }
        if pat[i] == pat[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut q = 0usize;
    for (i, h) in hay.iter().enumerate() {
        while q > 0 && *h != pat[q] {
            q = fail[q - 1];
        }
        if *h == pat[q] {
            q += 1;
        }
        if q == pat.len() {
            out.push(i + 1 - q);
            q = fail[q - 1];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::find_all;

    #[test]
    fn overlapping_and_edge_cases() {
        assert_eq!(find_all(b"aaa", b"aa"), vec![0, 1]);
        assert_eq!(find_all(b"abababa", b"aba"), vec![0, 2, 4]);
        assert_eq!(find_all(b"abc", b""), Vec::<usize>::new());
        assert_eq!(find_all(b"ab", b"abc"), Vec::<usize>::new());
        assert_eq!(find_all(&["x", "y", "x", "y"], &["x", "y"]), vec![0, 2]);
        assert_eq!(find_all(b"aabaabaaa", b"aabaaa"), vec![3]);
    }
}
