use super::*;

#[test]
fn exp_matches_std() {
    let mut worst = 0.0f32;
    let mut x = 0.0f32;
    while x > -87.0 {
        let rel = ((exp_nonpositive(x) - x.exp()) / x.exp()).abs();
        worst = worst.max(rel);
        x -= 0.013;
    }
    assert!(worst < 3e-7, "worst relative error {worst}");
    assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
    assert_eq!(exp_nonpositive(-100.0), 0.0);
    assert_eq!(exp_nonpositive(0.0), 1.0);
}

#[test]
fn window_ranges() {
    let w = Window::symmetric(2);
    assert_eq!(w.key_range(0, 10), (0, 3));
    assert_eq!(w.key_range(5, 10), (3, 8));
    assert_eq!(w.key_range(9, 10), (7, 10));
    assert!(w.allows(5, 3) && w.allows(5, 7) && !w.allows(5, 2) && !w.allows(5, 8));
    assert_eq!(Window::GLOBAL.key_range(4, 10), (0, 10));
    let causal = Window {
        left: None,
        right: Some(0),
    };
    assert_eq!(causal.key_range(4, 10), (0, 5));
}

#[test]
fn rejects_bad_lengths() {
    let shape = AttentionShape {
        batch: 1,
        heads: 1,
        seq_q: 2,
        seq_kv: 2,
        head_dim: 4,
    };
    let params = AttentionParams {
        scale: 0.5,
        window: Window::GLOBAL,
    };
    let x = vec![0.0; 8];
    let mut out = vec![0.0; 7];
    let err = flash_attention(&x, &x, &x, None, shape, params, &mut out, &Sequential);
    assert!(matches!(
        err,
        Err(AttentionError::Length { what: "out", .. })
    ));
}
