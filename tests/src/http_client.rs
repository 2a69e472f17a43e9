//! A minimal keep-alive HTTP/1.1 client over a plain TCP socket, for the benchmarks and
//! the soak: it writes exactly the bytes asked for (a body paced in chunks as over a
//! network) and reads the answer whole, with no connection pool or retry policy between
//! the measurement and the socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Bytes written between two pauses of a paced upload.
pub const PACE_CHUNK: usize = 16 * 1024;

/// One keep-alive HTTP/1.1 connection.
pub struct Conn {
    port: u16,
    reader: Option<BufReader<TcpStream>>,
    /// Pause after each [`PACE_CHUNK`] bytes of a body (zero: one write).
    pub pace: Duration,
}

/// Status, lower-cased headers and body of one response.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Conn {
    pub fn new(port: u16, pace: Duration) -> Self {
        Conn {
            port,
            reader: None,
            pace,
        }
    }

    /// POSTs `body` as JSON; reconnects once when the kept connection is gone.
    pub fn post(&mut self, path: &str, body: &[u8]) -> std::io::Result<Answer> {
        match self.try_post(path, body) {
            Ok(a) => Ok(a),
            Err(_) => {
                self.reader = None;
                self.try_post(path, body)
            }
        }
    }

    fn try_post(&mut self, path: &str, body: &[u8]) -> std::io::Result<Answer> {
        if self.reader.is_none() {
            let s = TcpStream::connect(("127.0.0.1", self.port))?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(Duration::from_secs(60)))?;
            self.reader = Some(BufReader::with_capacity(1 << 16, s));
        }
        let Some(reader) = self.reader.as_mut() else {
            return Err(std::io::Error::other("no connection"));
        };
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n",
            body.len()
        );
        let stream = reader.get_mut();
        stream.write_all(head.as_bytes())?;
        if self.pace.is_zero() {
            stream.write_all(body)?;
        } else {
            for (i, piece) in body.chunks(PACE_CHUNK).enumerate() {
                if i > 0 {
                    std::thread::sleep(self.pace);
                }
                stream.write_all(piece)?;
            }
        }
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
            }
        }
        let get = |n: &str| {
            headers
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v): &(String, String)| v.clone())
        };
        let mut body = Vec::new();
        if let Some(n) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
            body.resize(n, 0);
            reader.read_exact(&mut body)?;
        } else if get("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            loop {
                line.clear();
                reader.read_line(&mut line)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| std::io::Error::other("bad chunk size"))?;
                let mut chunk = vec![0; size + 2];
                reader.read_exact(&mut chunk)?;
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            reader.read_to_end(&mut body)?;
            self.reader = None;
        }
        if get("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")) {
            self.reader = None;
        }
        Ok(Answer {
            status,
            headers,
            body,
        })
    }
}
