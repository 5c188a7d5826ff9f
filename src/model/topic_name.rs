//! Kafka's rules for topic names and partition counts, checked wherever a name enters: the
//! admin path, auto-creation, the controller.

/// Largest partition count accepted for one topic (bounds memory and file handles).
pub const MAX_PARTITIONS: i32 = 10_000;

/// A topic name Kafka would refuse (INVALID_TOPIC_EXCEPTION).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid topic name '{name}': {reason}")]
pub struct InvalidTopicName {
    pub name: String,
    pub reason: String,
}

/// Kafka's rule: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), InvalidTopicName> {
    let invalid = |reason: &str| InvalidTopicName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(invalid("empty"));
    }
    if name.len() > 249 {
        return Err(invalid("longer than 249 characters"));
    }
    if name == "." || name == ".." {
        return Err(invalid("'.' and '..' are not allowed"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(invalid(
            "only ASCII letters, digits, '.', '_' and '-' are allowed",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names() {
        assert!(validate_topic_name("orders.v1_x-y").is_ok());
        for bad in ["", ".", "..", "a b", "ü", &"x".repeat(250)] {
            assert!(validate_topic_name(bad).is_err(), "{bad}");
        }
    }
}
