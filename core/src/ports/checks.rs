//! The input rules of every port method, written once; a backend calls the
//! method's check before it touches storage, and gets the typed
//! [`Error::InvalidInput`](crate::Error::InvalidInput) with the one label.
//!
//! Besides refusals, a rule may shape what is kept: [`dispatch_error`] cuts
//! the error `record_dispatch_failure` keeps to
//! [`MAX_DISPATCH_ERROR_BYTES`].

/// The longest dispatch error an event keeps, in bytes: what
/// [`EventStore::record_dispatch_failure`](super::EventStore::record_dispatch_failure)
/// stores is cut to this on a char boundary.
pub const MAX_DISPATCH_ERROR_BYTES: usize = 2_000;

/// The dispatch error as an event keeps it: the first at most
/// [`MAX_DISPATCH_ERROR_BYTES`] bytes of `error`, ending on a char boundary
/// (a multi-byte character the limit would split is left out whole).
pub fn dispatch_error(error: &str) -> String {
    let mut end = error.len().min(MAX_DISPATCH_ERROR_BYTES);
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    error[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_dispatch_error_is_kept_whole() {
        assert_eq!(dispatch_error("boom"), "boom");
        assert_eq!(dispatch_error(""), "");
    }

    #[test]
    fn a_long_dispatch_error_is_cut_on_a_char_boundary() {
        let long = "é".repeat(5_000);
        let kept = dispatch_error(&long);
        assert_eq!(kept.len(), MAX_DISPATCH_ERROR_BYTES);
        let odd = format!("x{long}");
        let kept = dispatch_error(&odd);
        assert_eq!(kept.len(), MAX_DISPATCH_ERROR_BYTES - 1);
        assert!(odd.starts_with(&kept));
    }
}
