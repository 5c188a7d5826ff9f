//! How `ringbroker consume` prints a record: a kcat-style template (`-f '%k %s\n'`) or one
//! JSON object per line.
//!
//! Template codes: `%t` topic, `%p` partition, `%o` offset, `%k` key, `%s` value, `%T`
//! timestamp (ms), `%h` headers (`k=v,k2=v2`), `%K` key length, `%S` value length (-1 for
//! null), `%%` a percent sign; escapes `\n`, `\t`, `\r`, `\\`. Keys and values are written as
//! the raw bytes; a null key or value prints nothing.
//!
//! JSON: `{"topic","partition","offset","timestamp","key","value","headers":[{"key","value"}]}`.
//! A key or value (or header value) that is valid UTF-8 is a JSON string, null is null, and
//! anything else is base64 under `key_base64` / `value_base64` instead of `key` / `value`.

use std::io::Write;

use base64::Engine;
use serde_json::{Map, Value};

use crate::client::ConsumerRecord;

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Key,
    Value,
    Timestamp,
    Headers,
    KeyLen,
    ValueLen,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordFormat {
    Template(Vec<Piece>),
    Json,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    #[error("unknown format code %{0} (%t %p %o %k %s %T %h %K %S %%)")]
    UnknownCode(char),
    #[error("the format ends in a lone %")]
    TrailingPercent,
}

impl RecordFormat {
    /// A preset (`value`, `kv`, `json`) or a template.
    pub fn parse(spec: &str) -> Result<RecordFormat, FormatError> {
        match spec {
            "value" => Self::template("%s\\n"),
            "kv" => Self::template("%k\\t%s\\n"),
            "json" => Ok(RecordFormat::Json),
            other => Self::template(other),
        }
    }

    fn template(spec: &str) -> Result<RecordFormat, FormatError> {
        let mut pieces = Vec::new();
        let mut text = Vec::new();
        let mut chars = spec.chars();
        while let Some(c) = chars.next() {
            let piece = match c {
                '%' => match chars.next() {
                    Some('t') => Piece::Topic,
                    Some('p') => Piece::Partition,
                    Some('o') => Piece::Offset,
                    Some('k') => Piece::Key,
                    Some('s') => Piece::Value,
                    Some('T') => Piece::Timestamp,
                    Some('h') => Piece::Headers,
                    Some('K') => Piece::KeyLen,
                    Some('S') => Piece::ValueLen,
                    Some('%') => {
                        text.push(b'%');
                        continue;
                    }
                    Some(other) => return Err(FormatError::UnknownCode(other)),
                    None => return Err(FormatError::TrailingPercent),
                },
                '\\' => {
                    match chars.next() {
                        Some('n') => text.push(b'\n'),
                        Some('t') => text.push(b'\t'),
                        Some('r') => text.push(b'\r'),
                        Some('\\') => text.push(b'\\'),
                        Some(other) => {
                            text.push(b'\\');
                            push_char(&mut text, other);
                        }
                        None => text.push(b'\\'),
                    }
                    continue;
                }
                other => {
                    push_char(&mut text, other);
                    continue;
                }
            };
            if !text.is_empty() {
                pieces.push(Piece::Text(std::mem::take(&mut text)));
            }
            pieces.push(piece);
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(RecordFormat::Template(pieces))
    }

    /// Writes one record.
    pub fn write(&self, out: &mut impl Write, r: &ConsumerRecord) -> std::io::Result<()> {
        match self {
            RecordFormat::Json => {
                let line = serde_json::to_string(&json(r)).map_err(std::io::Error::other)?;
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")
            }
            RecordFormat::Template(pieces) => {
                for piece in pieces {
                    match piece {
                        Piece::Text(t) => out.write_all(t)?,
                        Piece::Topic => out.write_all(r.topic.as_bytes())?,
                        Piece::Partition => write!(out, "{}", r.partition)?,
                        Piece::Offset => write!(out, "{}", r.offset)?,
                        Piece::Key => out.write_all(r.key.as_deref().unwrap_or_default())?,
                        Piece::Value => out.write_all(r.value.as_deref().unwrap_or_default())?,
                        Piece::Timestamp => write!(out, "{}", r.timestamp)?,
                        Piece::KeyLen => write!(out, "{}", len(&r.key))?,
                        Piece::ValueLen => write!(out, "{}", len(&r.value))?,
                        Piece::Headers => {
                            for (i, (k, v)) in r.headers.iter().enumerate() {
                                if i > 0 {
                                    out.write_all(b",")?;
                                }
                                out.write_all(k.as_bytes())?;
                                out.write_all(b"=")?;
                                out.write_all(v.as_deref().unwrap_or_default())?;
                            }
                        }
                    }
                }
                Ok(())
            }
        }
    }
}

fn push_char(text: &mut Vec<u8>, c: char) {
    let mut buf = [0u8; 4];
    text.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

fn len(b: &Option<Vec<u8>>) -> i64 {
    b.as_ref().map_or(-1, |b| b.len() as i64)
}

/// Puts `bytes` under `name` as a string, or under `name_base64` when not UTF-8.
fn put_bytes(obj: &mut Map<String, Value>, name: &str, bytes: &Option<Vec<u8>>) {
    match bytes {
        None => {
            obj.insert(name.to_string(), Value::Null);
        }
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => {
                obj.insert(name.to_string(), Value::String(s.to_string()));
            }
            Err(_) => {
                let encoded = base64::engine::general_purpose::STANDARD.encode(b);
                obj.insert(format!("{name}_base64"), Value::String(encoded));
            }
        },
    }
}

fn json(r: &ConsumerRecord) -> Value {
    let mut obj = Map::new();
    obj.insert("topic".into(), Value::String(r.topic.to_string()));
    obj.insert("partition".into(), r.partition.into());
    obj.insert("offset".into(), r.offset.into());
    obj.insert("timestamp".into(), r.timestamp.into());
    put_bytes(&mut obj, "key", &r.key);
    put_bytes(&mut obj, "value", &r.value);
    let headers = r
        .headers
        .iter()
        .map(|(k, v)| {
            let mut h = Map::new();
            h.insert("key".into(), Value::String(k.clone()));
            put_bytes(&mut h, "value", v);
            Value::Object(h)
        })
        .collect();
    obj.insert("headers".into(), Value::Array(headers));
    Value::Object(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn record() -> ConsumerRecord {
        ConsumerRecord {
            topic: Arc::from("orders"),
            partition: 2,
            offset: 41,
            timestamp: 1700000000000,
            key: Some(b"k1".to_vec()),
            value: Some(b"hello world".to_vec()),
            headers: vec![("a".into(), Some(b"1".to_vec())), ("b".into(), None)],
        }
    }

    fn render(spec: &str, r: &ConsumerRecord) -> String {
        let mut out = Vec::new();
        RecordFormat::parse(spec)
            .unwrap()
            .write(&mut out, r)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn presets() {
        assert_eq!(render("value", &record()), "hello world\n");
        assert_eq!(render("kv", &record()), "k1\thello world\n");
    }

    #[test]
    fn templates_have_every_field() {
        assert_eq!(
            render("%t %p %o %k %s %T %h %K %S 100%%\\n", &record()),
            "orders 2 41 k1 hello world 1700000000000 a=1,b= 2 11 100%\n"
        );
        let mut null = record();
        null.key = None;
        null.value = None;
        null.headers.clear();
        assert_eq!(render("[%k][%s][%h] %K %S", &null), "[][][] -1 -1");
        assert_eq!(render("tab\\there\\\\ é\\q", &null), "tab\there\\ é\\q");
    }

    #[test]
    fn bad_templates_are_refused() {
        assert_eq!(
            RecordFormat::parse("%x"),
            Err(FormatError::UnknownCode('x'))
        );
        assert_eq!(
            RecordFormat::parse("abc%"),
            Err(FormatError::TrailingPercent)
        );
    }

    #[test]
    fn json_is_one_object_per_line_with_base64_for_binary() {
        let line = render("json", &record());
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["topic"], "orders");
        assert_eq!(v["partition"], 2);
        assert_eq!(v["offset"], 41);
        assert_eq!(v["timestamp"], 1700000000000i64);
        assert_eq!(v["key"], "k1");
        assert_eq!(v["value"], "hello world");
        assert_eq!(v["headers"][0]["key"], "a");
        assert_eq!(v["headers"][0]["value"], "1");
        assert_eq!(v["headers"][1]["value"], Value::Null);

        let mut binary = record();
        binary.key = None;
        binary.value = Some(vec![0xff, 0x00, 0x80]);
        let v: Value = serde_json::from_str(&render("json", &binary)).unwrap();
        assert_eq!(v["key"], Value::Null);
        assert_eq!(v["value_base64"], "/wCA");
        assert!(v.get("value").is_none());
    }
}
