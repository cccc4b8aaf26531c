//! rverbs
