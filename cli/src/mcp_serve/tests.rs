//! The posture ceiling of `cadre mcp serve`.

use cadre_runtime::permission::Posture;

use super::ceiling;

const ALL: [Posture; 4] = [
    Posture::Never,
    Posture::Suggest,
    Posture::Auto,
    Posture::Bypass,
];

#[test]
fn a_callers_posture_only_narrows_the_configured_one() {
    for configured in ALL {
        assert_eq!(ceiling(configured, None), configured);
        for asked in ALL {
            let got = ceiling(configured, Some(asked));
            assert!(
                got <= configured && got <= asked,
                "{configured} {asked} -> {got}"
            );
            assert!(got == configured || got == asked);
        }
    }
}
