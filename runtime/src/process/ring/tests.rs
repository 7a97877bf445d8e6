use pretty_assertions::assert_eq;

use super::*;

fn ring(capacity: usize, pushes: &[&str]) -> Ring {
    let mut ring = Ring::new(capacity);
    for push in pushes {
        ring.push(push.as_bytes());
    }
    ring
}

fn check(ring: &Ring, cursor: u64, max: usize, expected: (&str, u64, u64, u64, u64)) {
    let chunk = ring.read(cursor, max);
    assert_eq!(
        (
            chunk.text.as_str(),
            chunk.from,
            chunk.next,
            chunk.skipped,
            chunk.more
        ),
        expected
    );
}

#[test]
fn reads_on_from_a_cursor() {
    let r = ring(16, &["hello ", "world"]);
    check(&r, 0, 100, ("hello world", 0, 11, 0, 0));
    check(&r, 6, 100, ("world", 6, 11, 0, 0));
    check(&r, 11, 100, ("", 11, 11, 0, 0));
    check(&r, 0, 5, ("hello", 0, 5, 0, 6));
}

#[test]
fn a_cursor_past_what_fell_out_says_how_much_was_skipped() {
    let r = ring(4, &["abcdef", "gh"]);
    assert_eq!(r.end(), 8);
    check(&r, 0, 100, ("efgh", 4, 8, 4, 0));
    check(&r, 5, 100, ("fgh", 5, 8, 0, 0));
}

#[test]
fn a_cursor_beyond_the_end_reads_nothing() {
    let r = ring(4, &["ab"]);
    check(&r, 99, 10, ("", 2, 2, 0, 0));
}

#[test]
fn one_push_larger_than_the_ring_keeps_its_end() {
    let r = ring(3, &["xy", "0123456789"]);
    assert_eq!(r.end(), 12);
    check(&r, 0, 100, ("789", 9, 12, 9, 0));
}

#[test]
fn the_tail_is_the_last_bytes() {
    let r = ring(8, &["0123456789"]);
    let tail = r.tail(3);
    assert_eq!((tail.text.as_str(), tail.from, tail.next), ("789", 7, 10));
    assert_eq!(r.tail(100).text, "23456789");
}

proptest::proptest! {
    /// Whatever is pushed, the ring holds exactly the last `capacity`
    /// bytes and `end` counts every byte.
    #[test]
    fn holds_the_last_bytes(capacity in 1usize..40, pushes in proptest::collection::vec("[a-z]{0,30}", 0..20)) {
        let mut r = Ring::new(capacity);
        let mut all = String::new();
        for p in &pushes {
            r.push(p.as_bytes());
            all.push_str(p);
        }
        let kept = &all[all.len().saturating_sub(capacity)..];
        proptest::prop_assert_eq!(r.end(), all.len() as u64);
        proptest::prop_assert_eq!(r.read(0, usize::MAX).text, kept.to_string());
    }
}
