//! Allow / ask / deny rules (P2).
