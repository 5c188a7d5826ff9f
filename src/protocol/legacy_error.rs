//! Why a legacy message set (or its compression) was rejected.

/// Why a legacy message set was rejected.
///
/// Positions (`at`) are byte offsets into the buffer being parsed: the caller's message set, or,
/// for messages inside a compressed wrapper, the decompressed inner message set.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
pub enum LegacyError {
    /// The input ended inside the message set entry (offset, size or message) starting at or
    /// read at `at`.
    #[error("legacy message set truncated at byte {at}")]
    Truncated { at: usize },
    /// The CRC32 of the message whose entry starts at `at` does not match.
    #[error("legacy message CRC mismatch at byte {at}: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc {
        at: usize,
        stored: u32,
        computed: u32,
    },
    /// Message magic other than 0 or 1 (2 means a RecordBatch was sent where a MessageSet was
    /// expected).
    #[error("unsupported message magic {0} (legacy message sets are magic 0 or 1)")]
    UnsupportedMagic(i8),
    /// Codec id 4-7 in a legacy message (or 5-7 for [`decompress_records`]).
    #[error("unsupported compression codec {0}")]
    UnsupportedCodec(u8),
    /// The compressed payload could not be decompressed.
    #[error("decompression failed: {0}")]
    Decompress(String),
    /// Compressing the converted records failed.
    #[error("compression failed: {0}")]
    Compress(String),
    /// Decompressed data would exceed `limit` bytes (the `max_decompressed` budget), or the
    /// converted batch would exceed the RecordBatch size limit.
    #[error("data exceeds the limit of {limit} bytes")]
    TooLarge { limit: usize },
    /// The message set holds no message.
    #[error("empty message set")]
    Empty,
    /// A compressed message inside a compressed message (Kafka allows one level only).
    #[error("compressed message nested inside a compressed message")]
    Nested,
    /// An inner message's magic differs from its wrapper's.
    #[error("inner message magic {inner} does not match wrapper magic {wrapper}")]
    MagicMismatch { wrapper: i8, inner: i8 },
    /// A structurally invalid message (bad size or length fields, null or empty wrapper, ...).
    #[error("malformed legacy message at byte {at}: {reason}")]
    Malformed { at: usize, reason: &'static str },
}
