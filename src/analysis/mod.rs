//! What finished sessions say when read together: two interview sessions compared over the characters
//! both measured ([`compare`]), what changed for one character between two sessions ([`diff`]), how
//! far judges agree on the same recorded interviews ([`judges`]); where two sessions were asked or judged
//! otherwise ([`setup`]); how a session's measurements meet the
//! characters' targets ([`targets`]). Each reads the journals' records (`study`) and the catalog and
//! touches no file: it sits above `study`, which never reads it, and below `session` and the two faces,
//! which render what it finds.

pub mod compare;
pub mod diff;
pub mod judges;
pub mod setup;
pub mod targets;
