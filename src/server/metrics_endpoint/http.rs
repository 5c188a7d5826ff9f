//! Just enough HTTP/1.1 for a scrape: one request head in, one response out, connection
//! closed. No bodies, no keep-alive, no chunking.

/// Largest request head accepted (request line + headers).
pub const MAX_HEAD_BYTES: usize = 8 * 1024;

/// Why a request head is refused (answered with 400, or 405 for a method).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HttpError {
    #[error("request head larger than {MAX_HEAD_BYTES} bytes")]
    TooLarge,
    #[error("request head is not valid UTF-8")]
    NotText,
    #[error("malformed request line {0:?}")]
    BadRequestLine(String),
    #[error("unsupported protocol {0:?}")]
    BadVersion(String),
    #[error("method {0} is not allowed")]
    MethodNotAllowed(String),
}

impl HttpError {
    pub fn status(&self) -> Status {
        match self {
            HttpError::MethodNotAllowed(_) => Status::MethodNotAllowed,
            _ => Status::BadRequest,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    BadRequest,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    ServiceUnavailable,
}

impl Status {
    fn line(self) -> &'static str {
        match self {
            Status::Ok => "200 OK",
            Status::BadRequest => "400 Bad Request",
            Status::NotFound => "404 Not Found",
            Status::MethodNotAllowed => "405 Method Not Allowed",
            Status::RequestTimeout => "408 Request Timeout",
            Status::ServiceUnavailable => "503 Service Unavailable",
        }
    }
}

/// A parsed request head: only the path matters here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The path without its query string.
    pub path: String,
    /// HEAD: answer with the headers only.
    pub head_only: bool,
}

/// Parses the head in `buf` once it is complete (ends with an empty line). `Ok(None)`: read
/// more. Headers are skipped: nothing in them changes the answer.
pub fn parse_head(buf: &[u8]) -> Result<Option<RequestHead>, HttpError> {
    let Some(end) = find_head_end(buf) else {
        if buf.len() > MAX_HEAD_BYTES {
            return Err(HttpError::TooLarge);
        }
        return Ok(None);
    };
    if end > MAX_HEAD_BYTES {
        return Err(HttpError::TooLarge);
    }
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| HttpError::NotText)?;
    let request_line = head.lines().next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::BadRequestLine(truncated(request_line)));
    };
    if !target.starts_with('/') {
        return Err(HttpError::BadRequestLine(truncated(request_line)));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(HttpError::BadVersion(truncated(version)));
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        other => return Err(HttpError::MethodNotAllowed(truncated(other))),
    };
    let path = target.split('?').next().unwrap_or(target).to_string();
    Ok(Some(RequestHead { path, head_only }))
}

/// The end of the head (after `\r\n\r\n`, or a bare `\n\n` from hand-typed requests).
fn find_head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Error messages quote client input; keep them short.
fn truncated(s: &str) -> String {
    s.chars().take(64).collect()
}

/// A complete response that closes the connection.
pub fn response(status: Status, content_type: &str, body: &str, head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        status.line(),
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    out
}

/// A plain-text error response.
pub fn error_response(status: Status, message: &str) -> Vec<u8> {
    response(
        status,
        "text/plain; charset=utf-8",
        &format!("{message}\n"),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_get_and_strips_the_query() {
        let head = parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n")
            .expect("valid")
            .expect("complete");
        assert_eq!(head.path, "/metrics");
        assert!(!head.head_only);
        let head = parse_head(b"HEAD /metrics/stages.json HTTP/1.0\n\n")
            .expect("valid")
            .expect("complete");
        assert_eq!(head.path, "/metrics/stages.json");
        assert!(head.head_only);
    }

    #[test]
    fn waits_for_the_end_of_the_head() {
        assert_eq!(
            parse_head(b"GET /metrics HTTP/1.1\r\nHost: a\r\n"),
            Ok(None)
        );
        assert_eq!(parse_head(b""), Ok(None));
    }

    #[test]
    fn refuses_bad_input() {
        for bad in [
            &b"GARBAGE\r\n\r\n"[..],
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1 extra\r\n\r\n",
            b"GET /metrics SPDY/3\r\n\r\n",
            b"GET /\xff HTTP/1.1\r\n\r\n",
        ] {
            let e = parse_head(bad).expect_err("refused");
            assert_eq!(e.status(), Status::BadRequest, "{e}");
        }
        let e = parse_head(b"POST /metrics HTTP/1.1\r\n\r\n").expect_err("refused");
        assert_eq!(e.status(), Status::MethodNotAllowed);
        let huge = vec![b'a'; MAX_HEAD_BYTES + 1];
        assert_eq!(parse_head(&huge), Err(HttpError::TooLarge));
    }

    #[test]
    fn responses_carry_length_and_close() {
        let r = String::from_utf8(response(Status::Ok, "text/plain", "abc", false)).expect("text");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(r.contains("Content-Length: 3\r\n"));
        assert!(r.contains("Connection: close\r\n"));
        assert!(r.ends_with("\r\n\r\nabc"));
        let head = response(Status::Ok, "text/plain", "abc", true);
        assert!(head.ends_with(b"\r\n\r\n"));
    }
}
