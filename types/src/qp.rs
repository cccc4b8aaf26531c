//! The transport service of a QP.

/// The transport service of a QP (`enum ib_uverbs_qp_type`, the three
/// rverbs offers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpType {
    /// Reliable connected: every operation.
    Rc,
    /// Unreliable connected: sends and writes.
    Uc,
    /// Unreliable datagram: sends, each to an address handle.
    Ud,
}

impl QpType {
    /// `IB_UVERBS_QPT_*`.
    pub fn raw(self) -> u8 {
        use uverbs_abi::ioctl::IbUverbsQpType as K;
        (match self {
            QpType::Rc => K::RC.0,
            QpType::Uc => K::UC.0,
            QpType::Ud => K::UD.0,
        }) as u8
    }

    /// The type `IB_UVERBS_QPT_*` names, if rverbs offers it.
    pub fn from_raw(raw: u8) -> Option<QpType> {
        match raw {
            2 => Some(QpType::Rc),
            3 => Some(QpType::Uc),
            4 => Some(QpType::Ud),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_are_the_kernels() {
        use uverbs_abi::ioctl::IbUverbsQpType as K;
        for (t, k) in [
            (QpType::Rc, K::RC),
            (QpType::Uc, K::UC),
            (QpType::Ud, K::UD),
        ] {
            assert_eq!(u32::from(t.raw()), k.0);
            assert_eq!(QpType::from_raw(t.raw()), Some(t));
        }
        assert_eq!(QpType::from_raw(1), None);
    }
}
