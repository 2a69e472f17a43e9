use super::*;

#[test]
fn plain_run_stops_where_the_byte_by_byte_scan_does() {
    let naive = |r: &[u8]| {
        r.iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(r.len())
    };
    // Every byte value at every place of two words, and random mixes.
    for b in 0..=255u8 {
        for at in 0..20 {
            let mut t = b"plain text, no stops!".to_vec();
            if let Some(slot) = t.get_mut(at) {
                *slot = b;
            }
            for start in 0..4 {
                let r = t.get(start..).unwrap_or_default();
                assert_eq!(plain_run(r), naive(r), "{r:?}");
            }
        }
    }
    let mut x = 0x853c_49e6_748f_ea9b_u64;
    for _ in 0..20_000 {
        let t: Vec<u8> = (0..(x % 40))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b"ab \"\\\x1f\x00\x7f\x80\xff ~"
                    .get((x % 12) as usize)
                    .unwrap_or(&b'a')
            })
            .collect();
        assert_eq!(plain_run(&t), naive(&t), "{t:?}");
    }
}
